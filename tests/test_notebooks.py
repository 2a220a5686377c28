"""The chapters' sources and generated notebooks agree, and each carries the current setup cell."""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import sync_notebooks  # noqa: E402

CHAPTERS = ["01_setup", "02_add_kernel", "03_rmsnorm_unfusing", "04_matmul_tiles", "05_attention",
            "06_full_stack", "07_context_sweep", "08_lessons", "09_faster_on_purpose", "10_close_to_the_floor"]
FIX = "fix with: python tools/sync_notebooks.py"


def test_every_chapter_exists_as_a_pair():
    assert [p.stem for p in sync_notebooks.notebook_sources()] == CHAPTERS
    for name in CHAPTERS:
        assert (ROOT / "notebooks" / f"{name}.ipynb").exists(), f"{name}.ipynb missing; {FIX}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_ipynb_is_generated_from_py(name):
    problems = sync_notebooks.pair_differences(ROOT / "notebooks" / f"{name}.py")
    assert not problems, "\n".join(problems) + f"\n{FIX}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_setup_cell_and_badge_are_current(name):
    path = ROOT / "notebooks" / f"{name}.py"
    assert sync_notebooks.synced_source(path) == path.read_text(), f"{name}: setup cell or badge stale; {FIX}"
    import colab_setup

    assert colab_setup.colab_url(name) in path.read_text()


def test_pairing_check_catches_drift(tmp_path):
    """The check itself can fail: edit a generated notebook and it notices."""
    import shutil

    import jupytext

    src = ROOT / "notebooks" / "02_add_kernel.py"
    shutil.copy(src, tmp_path / src.name)
    nb = jupytext.read(src)
    nb.cells[-1].source += "\nprint('drift')"
    jupytext.write(nb, tmp_path / "02_add_kernel.ipynb")
    assert sync_notebooks.pair_differences(tmp_path / src.name)


def test_changed_cells_lose_their_stored_outputs():
    """Outputs stay under the code that made them and nowhere else."""
    import nbformat
    import jupytext

    def cell(source, text):
        return nbformat.v4.new_code_cell(source, outputs=[nbformat.v4.new_output("stream", text=text)],
                                         execution_count=1)

    stored = nbformat.v4.new_notebook(cells=[cell("x = 1\nprint(x)", "1\n"), cell("print('old')", "old\n"),
                                             cell("print(x)", "1\n")])
    # cell 1 edited; cell 2 edited into a copy of cell 0's source, whose outputs it must not borrow
    edited = jupytext.reads("# %%\nx = 1\nprint(x)\n\n# %%\nprint('new')\n\n# %%\nx = 1\nprint(x)\n",
                            fmt="py:percent")
    combined = jupytext.combine.combine_inputs_with_outputs(edited, stored)
    cleared = sync_notebooks.drop_stale_outputs(combined, stored)
    assert combined.cells[0].outputs and combined.cells[0].execution_count == 1
    assert cleared == [1, 2]
    assert not combined.cells[1].outputs and combined.cells[1].execution_count is None
    assert not combined.cells[2].outputs


# --- Time first, profile after (slower_harness.timing_order.host_clock_free) ----------------------------
HOST_TIMINGS = re.compile(r"helpers\.(compare_configs|host_ms_per_call|host_us_alone|launch_prices|reproduce)\("
                          r"|clock=\"host\"")
GPU_ONLY_PROFILE = "helpers.step_timeline("  # on a GPU only: the CPU run of a chapter never profiles with it


def host_timings_after_gpu_only_profile(source: str) -> list[str]:
    """Host-clock timings written after a chapter's first ``helpers.step_timeline`` call (comments left out), but
    for a comparison that says it runs after a profile (``after_profile=True``, in the same statement)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    first = code.find(GPU_ONLY_PROFILE)
    if first < 0:
        return []
    late = []
    for m in HOST_TIMINGS.finditer(code, first):
        statement = code[m.start():code.find("\n\n", m.start())]
        if "after_profile=True" not in statement:
            late.append(m.group(0))
    return late


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_chapter_times_the_host_after_a_gpu_only_profile(name):
    """The helpers refuse a host-clock timing once a process has profiled, in every mode, so the CPU run of the
    notebooks checks the order; ``step_timeline`` profiles on a GPU only, so its order is checked in the source."""
    late = host_timings_after_gpu_only_profile((ROOT / "notebooks" / f"{name}.py").read_text())
    assert not late, f"{name}: {late} after {GPU_ONLY_PROFILE}...): time first, profile after"


def test_the_order_check_sees_a_late_host_timing():
    source = ("helpers.step_timeline(model, ids)\n\n"
              "cmp = helpers.compare_calls(calls, ref, clock=\"host\",\n    after_profile=True)\n\n"
              "# helpers.compare_configs( in a comment does not count\n"
              "comparison = helpers.compare_configs(model, {})\n")
    assert host_timings_after_gpu_only_profile(source) == ["helpers.compare_configs("]
    assert host_timings_after_gpu_only_profile(source.replace("step_timeline", "other")) == []


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_exercise_answer_is_a_colab_dropdown(name):
    """An exercise's guess is a Colab form field (a dropdown of the three answers, None until the reader picks): the
    default changes nothing that the committed outputs show."""
    import ast

    lines = [line for line in (ROOT / "notebooks" / f"{name}.py").read_text().splitlines()
             if line.startswith("answer =")]
    assert lines, f"{name}: no exercise"
    for line in lines:
        code, _, form = line.partition("# @param ")
        assert ast.literal_eval(code.split("=", 1)[1].strip()) is None, line
        options, _, kind = form.rpartition("]")
        assert [ast.literal_eval(o) for o in ast.literal_eval(options + "]")] == [None, "faster", "slower", "same"], line
        assert kind.strip() == '{type:"raw"}', line
