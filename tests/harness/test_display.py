"""slower_harness.display: what a reader sees (tables, progress bars, what a launch count counts)."""
import pandas as pd

from slower_harness import display, env


def test_launch_note_names_what_was_counted(monkeypatch):
    monkeypatch.setattr(env, "HAS_GPU", True)
    assert display.launch_note(per="call") == "every CUDA kernel per call (a CUDA graph of one call)"
    assert display.launch_note() == "every CUDA kernel per decoded token (torch.profiler)"
    monkeypatch.setattr(env, "HAS_GPU", False)
    assert display.launch_note(per="call") == "CPU mode: our Triton kernels per call only (no CUDA kernels to count)"
    assert "per decoded token" in display.launch_note()


def test_progress_bars_hide_when_asked(monkeypatch):
    """run_series --write-outputs sets TQDM_DISABLE: a stored notebook would keep a widget's "0%"."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert display.progress(range(3)).disable
    monkeypatch.delenv("TQDM_DISABLE")
    bar = display.progress(range(3))
    assert not bar.disable and list(bar) == [0, 1, 2]


def test_show_formats_floats_and_leaves_the_caller_s_table_alone(capsys):
    df = pd.DataFrame({"launches": [1655.0, 977.0], "ms": [26.4503, float("nan")], "name": ["a", "b"]})
    display.show(df)
    out = capsys.readouterr().out
    assert "1,655" in out and "26.45" in out and " -" in out and "NaN" not in out
    assert df["launches"].dtype == float  # a copy was formatted
