"""The README's numbers come from the committed results, never from a keyboard; the chapters' hand-written quotes
of the committed run match what their committed outputs show."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import check_quotes  # noqa: E402
import make_readme  # noqa: E402


def test_readme_and_results_match_the_committed_results():
    for path, sections in make_readme.SECTIONS.items():
        text = path.read_text()
        assert make_readme.render(text, sections) == text, f"{path.name} is stale: run python tools/make_readme.py"


def test_check_fails_when_a_number_is_edited(tmp_path):
    text = make_readme.RESULTS.read_text()
    start = text.index("<!-- results:start -->")
    edited = (text[:start] + "<!-- results:start -->\n| typed by hand | 99 |\n<!-- results:end -->"
              + text[text.index("<!-- results:end -->") + len("<!-- results:end -->"):])
    assert make_readme.render(edited, make_readme.SECTIONS[make_readme.RESULTS]) == text


def test_the_front_door_stays_short_and_links_the_rest():
    """The README is a front door (at most 1,500 words, links and comments aside); the method and the run's
    details have pages of their own, and every page it links to exists."""
    import re

    text = make_readme.README.read_text()
    words = re.findall(r"[A-Za-z][A-Za-z'-]+", re.sub(r"<!--.*?-->|\(http[^)]*\)", "", text, flags=re.S))
    assert len(words) <= 1500, f"README.md has {len(words)} words"
    for page in re.findall(r"\]\(([A-Z]+\.md)\)", text):
        assert (ROOT / page).is_file(), f"README.md links to {page}, which is missing"
    assert {"METHODS.md", "RESULTS.md"} <= set(re.findall(r"\]\(([A-Z]+\.md)\)", text))


def test_readme_names_the_two_commands_and_ci_calls_the_second():
    text = make_readme.README.read_text()
    assert "python tools/run_series.py" in text and "bash tools/test.sh" in text
    assert "bash tools/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_chapters_quotes_of_the_committed_run_are_in_its_outputs():
    stale = {c: s for c, s in check_quotes.stale().items() if s}
    assert len(check_quotes.committed_notebooks()) >= 9 and not stale, f"stale quotes (tools/check_quotes.py): {stale}"


def _chapter(tmp_path, markdown: str, printed: str):
    (tmp_path / "01_x.py").write_text("# %% [markdown]\n" + "".join(f"# {line}\n" for line in markdown.splitlines())
                                      + "\n# %%\nprint()\n")
    cell = {"cell_type": "code", "source": [], "outputs": [{"output_type": "stream", "text": [printed]}]}
    (tmp_path / "01_x.ipynb").write_text(json.dumps({"cells": [cell]}))


def test_check_quotes_flags_a_number_the_outputs_no_longer_show(tmp_path, monkeypatch):
    monkeypatch.setattr(check_quotes, "NOTEBOOKS", tmp_path)
    _chapter(tmp_path, "In the committed H200 run the ratio was 1.26x\n(quartiles 1.1-1.4), about 0.4 µs.\n"
                       "Elsewhere 9.99 is no quote of the run.", "ratio 1.2649, quartiles 1.104-1.43, 7.0 µs")
    pools = {"01": check_quotes.numbers(check_quotes.output_text(tmp_path / "01_x.ipynb"))}
    assert check_quotes.unmatched("01", pools) == []  # rounded to the quoted precision; "about" and other sentences
    pools = {"01": check_quotes.numbers("ratio 1.2749, quartiles 1.104-1.43")}  # a new run moved the ratio
    assert [q for q, _ in check_quotes.unmatched("01", pools)] == ["1.26"]
    pools["02"] = {1.26}  # the same number shown by a chapter the sentence does not name does not count
    assert [q for q, _ in check_quotes.unmatched("01", pools)] == ["1.26"]


def _results(path, note: str):
    fields = "id,value,unit,note,gpu,time"
    rows = [f'baseline.tps_kv,40,tokens/s,"greedy, {note}; prefill included",GPU X,2026-01-02T10:01:00+00:00',
            "runtime.01_setup_s,60,s,full mode,GPU X,2026-01-02T10:01:00+00:00",
            "runtime.09_faster_on_purpose_s,200,s,full mode,GPU X,2026-01-02T10:04:20+00:00",
            "runtime.08_lessons_s,100,s,full mode,GPU X,2026-01-02T10:06:00+00:00"]
    path.write_text("\n".join([fields] + rows) + "\n")


def test_the_run_section_times_the_chapters_and_says_when_the_sizes_moved_on(tmp_path, monkeypatch):
    import helpers

    monkeypatch.setattr(make_readme, "H200", tmp_path / "results.csv")
    monkeypatch.setattr(make_readme, "REPRODUCED", tmp_path / "reproduce.csv")  # none: no reproduce table
    full = helpers.SIZES_BY_MODE["full"]
    _results(tmp_path / "results.csv", f"{full.new_tokens} new tokens, median of {full.rounds} shuffled rounds")
    text = make_readme.run_section()
    assert "2026-01-02, 10:00 to 10:06 UTC" in text  # from the first chapter's start to the last one's end
    assert "Chapters 1-8: 160 s; chapter 9: 200 s more." in text  # chapter 9 is outside the series' bar
    assert "| 01_setup | 60 s |" in text and "The code now times" not in text and "reproduce" not in text
    _results(tmp_path / "results.csv", f"{full.new_tokens + 1} new tokens, median of {full.rounds} shuffled rounds")
    assert f"The code now times {full.new_tokens}-token generations" in make_readme.run_section()


def test_the_run_section_counts_the_reproduced_ratios_within_the_bar():
    text = make_readme.run_section()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(make_readme._read(make_readme.REPRODUCED)) > 0
    within = sum(r["within 10%"] == "yes" for r in make_readme._read(make_readme.REPRODUCED).values())
    assert f"{within} of {len(rows)} came back within 10%" in text


def test_the_learner_path_opens_its_chapter_in_jupyter(tmp_path):
    """The README's learner path ends in `jupyter lab <chapter>`: that chapter exists, the path's virtual
    environment is ignored by git, and where JupyterLab is installed a headless server started as the README says
    serves the chapter."""
    import importlib.util
    import os
    import re
    import socket
    import subprocess
    import time
    import urllib.request

    import pytest

    readme = (ROOT / "README.md").read_text()
    venv = re.search(r"python3 -m venv (\S+)", readme)
    command = re.search(r"jupyter lab (notebooks/\S+\.ipynb)", readme)
    assert venv and command, "the README's learner path: a virtual environment, then `jupyter lab <chapter>`"
    chapter = command.group(1)
    assert (ROOT / chapter).is_file(), f"the README opens {chapter}, which does not exist"
    assert subprocess.run(["git", "check-ignore", "-q", f"{venv.group(1)}/"], cwd=ROOT).returncode == 0, \
        f"{venv.group(1)}/ (the README's virtual environment) is not ignored: git status would not stay clean"
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("JupyterLab is not installed here (the learner path installs it): the server is not started")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = ["--allow-root"] if os.geteuid() == 0 else []  # Jupyter refuses root without it (a container, not a learner)
    server = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", chapter, "--no-browser", f"--port={port}",
                               "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=readme", *root,
                               f"--ServerApp.runtime_dir={tmp_path}"], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path)))
    try:  # given a notebook, the server serves the notebook's folder and opens it
        url = f"http://127.0.0.1:{port}/api/contents/{Path(chapter).name}?content=1&token=readme"
        for _ in range(120):
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    notebook = json.load(response)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"jupyter lab {chapter} did not serve the chapter within a minute")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert notebook["type"] == "notebook" and notebook["content"]["cells"], notebook.get("name")
