"""The README's numbers come from the committed results, never from a keyboard."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_readme  # noqa: E402


def test_readme_matches_the_committed_results():
    text = make_readme.README.read_text()
    assert make_readme.render(text) == text, "README.md is stale: run python tools/make_readme.py"


def test_check_fails_when_a_number_is_edited(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    text = make_readme.README.read_text()
    start = text.index("<!-- results:start -->")
    readme.write_text(text[:start] + "<!-- results:start -->\n| typed by hand | 99 |\n<!-- results:end -->"
                      + text[text.index("<!-- results:end -->") + len("<!-- results:end -->"):])
    monkeypatch.setattr(make_readme, "README", readme)
    assert make_readme.render(readme.read_text()) != readme.read_text()


def test_readme_names_the_two_commands_and_ci_calls_the_second():
    text = make_readme.README.read_text()
    assert "python tools/run_series.py" in text and "bash tools/test.sh" in text
    assert "bash tools/test.sh" in (ROOT / ".ci" / "run").read_text()
