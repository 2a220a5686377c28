"""The README's two commands: what they install, and that they leave every tracked file alone."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import install  # noqa: E402

from packaging.requirements import Requirement  # noqa: E402


def requirement_lines(path: Path) -> dict:
    """name -> Requirement for every requirement line of ``path`` (``-r`` followed)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            out.update(requirement_lines(path.parent / line[3:].strip()))
        elif line:
            req = Requirement(line)
            out[req.name.lower()] = req
    return out


@pytest.mark.parametrize("versions", ["pinned", "colab"])
def test_the_pins_satisfy_the_requirement_ranges(versions):
    """Each constraints file must be installable with requirements*.txt: each pin inside its range."""
    ranges = requirement_lines(install.TEST_REQUIREMENTS)
    pins = requirement_lines(install.VERSIONS[versions])
    assert {"torch", "triton", "transformers"} <= set(pins)
    for name, pin in pins.items():
        (version,) = [s.version for s in pin.specifier if s.operator == "=="]
        assert ranges[name].specifier.contains(version), f"{name}=={version} is outside {ranges[name]}"


def test_every_cap_says_why():
    """A cap (<, <=, ~=, ==) in a requirements file stands only for a known break, named on its line."""
    for path in (install.REQUIREMENTS, install.TEST_REQUIREMENTS):
        for line in path.read_text().splitlines():
            spec, _, why = line.partition("#")
            if spec.strip() and not spec.startswith("-r") and any(
                    s.operator in ("<", "<=", "~=", "==") for s in Requirement(spec.strip()).specifier):
                assert why.strip(), f"{path.name}: {spec.strip()} caps a version without saying why"


def test_pinned_reads_the_constraints_file():
    assert install.pinned("torch").startswith("torch==") and install.pinned("triton").startswith("triton==")
    assert install.pinned("torch", install.VERSIONS["colab"]) == "torch==2.11.0"
    with pytest.raises(KeyError, match="pins no"):
        install.pinned("surely-not-pinned")


def test_versions_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("SLOWER_VERSIONS", raising=False)
    assert install.versions() == "pinned"
    monkeypatch.setenv("SLOWER_VERSIONS", " Newest ")
    assert install.versions() == "newest" and install.VERSIONS["newest"] is None
    monkeypatch.setenv("SLOWER_VERSIONS", "latest")
    with pytest.raises(SystemExit, match="SLOWER_VERSIONS must be one of pinned, colab, newest, got 'latest'"):
        install.versions()


def test_newest_holds_torch_while_it_upgrades_the_rest(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(install, "pip", lambda *args: calls.append(args))
    monkeypatch.setattr(install, "ROOT", tmp_path)
    monkeypatch.delenv("SLOWER_TORCH_INDEX", raising=False)
    install.install_newest(gpu=False, reqs=install.REQUIREMENTS)
    assert "--upgrade" in calls[0] and "--no-deps" in calls[0] and install.CPU_INDEX in calls[0]
    held = Path(calls[1][calls[1].index("-c") + 1])
    assert "--upgrade" in calls[1] and held.read_text().startswith("torch==")
    assert not any(path.endswith(".txt") and "constraints" in path for path in calls[1])


def test_without_a_gpu_torch_comes_from_the_cpu_index(monkeypatch):
    calls = []
    monkeypatch.setattr(install, "pip", lambda *args: calls.append(args))
    monkeypatch.delenv("SLOWER_TORCH_INDEX", raising=False)
    install.install_torch(gpu=False)
    assert install.CPU_INDEX in calls[0] and "--no-deps" in calls[0]  # torch alone from the CPU index
    assert install.pinned("triton") in calls[1] and install.CPU_INDEX not in calls[1]
    calls.clear()
    install.install_torch(gpu=True)  # the public CUDA build, which brings its Triton
    assert len(calls) == 1 and install.CPU_INDEX not in calls[0] and install.pinned("torch") in calls[0]
    calls.clear()
    monkeypatch.setenv("SLOWER_TORCH_INDEX", "")
    install.install_torch(gpu=False)
    assert len(calls) == 1 and "--extra-index-url" not in calls[0]


def test_hidden_gpus_count_as_none(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert install.gpu_present() is False


def tracked_copy(tmp_path: Path) -> Path:
    """A git repository holding this working tree as it would be committed (tracked and new files)."""
    clone = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True)
    for name in filter(None, files.stdout.split("\0")):
        src = ROOT / name
        if src.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            (clone / name).write_bytes(src.read_bytes())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(clone)]
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + cmd, check=True)
    return clone


def test_command_1_touches_no_tracked_file(tmp_path):
    """`python tools/run_series.py` (one chapter of it, in CPU mode) leaves `git status` clean."""
    clone = tracked_copy(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "SLOWER_RESULTS_ROOT")}
    env["SLOWER_MODE"] = "cpu"
    done = subprocess.run([sys.executable, "tools/run_series.py", "--only", "02"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", f"command 1 changed the working tree:\n{status}"
    assert (clone / "runs" / "cpu" / "runtimes.csv").is_file()
    executed = json.loads((clone / "runs" / "cpu" / "notebooks" / "02_add_kernel.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert "mode: cpu" in printed, "runs/cpu/notebooks/ holds no output of this run (the committed run's is full mode)"


def test_the_series_runs_the_summary_chapter_last():
    """Chapter 8 sums up every other chapter (chapter 9 included), so the series runner runs it last."""
    sys.path.insert(0, str(ROOT / "tools"))
    import run_series

    order = [c.stem for c in run_series.in_order(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))]
    assert order[-1] == run_series.SUMMARY == "08_lessons"
    assert order[:-1] == sorted(order[:-1]) and "09_faster_on_purpose" in order
