"""The path a fresh Colab runtime takes: the notebook arrives alone, its first cell fetches the rest."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import colab_setup  # noqa: E402

NEEDED = ["helpers.py", "colab_setup.py", "requirements.txt", "slower_kernels", "slower_harness", "data"]


@pytest.fixture
def local_remote(tmp_path):
    """A git repository standing in for GitHub, holding this working tree's code."""
    remote = tmp_path / "remote"
    remote.mkdir()
    for name in NEEDED:
        src = ROOT / name
        (shutil.copytree(src, remote / name, ignore=shutil.ignore_patterns("__pycache__"))
         if src.is_dir() else shutil.copy(src, remote / name))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(remote)]
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(git + cmd, check=True)
    return remote


def test_setup_cell_fetches_the_repository_when_absent(local_remote, tmp_path):
    runtime = tmp_path / "content"  # Colab's working directory, with nothing in it
    runtime.mkdir()
    script = colab_setup.SETUP_CELL + "\nimport helpers, slower_kernels\nprint('ROOT', ROOT)\nprint('MODE', helpers.MODE)\n"
    env = dict(os.environ, SLOWER_REPO_URL=str(local_remote), SLOWER_MODE="cpu")
    done = subprocess.run([sys.executable, "-c", script], cwd=runtime, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    clone = runtime / colab_setup.REPO_DIR
    assert (clone / "helpers.py").is_file() and (clone / ".git").is_dir()
    assert f"ROOT {clone}" in done.stdout and "MODE cpu" in done.stdout
    # a second run (Colab's "Run all" again) reuses the clone instead of fetching again
    again = subprocess.run([sys.executable, "-c", script], cwd=runtime, env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr


def test_setup_cell_uses_the_repository_it_sits_in():
    done = subprocess.run([sys.executable, "-c", colab_setup.SETUP_CELL + "\nprint(ROOT)"], cwd=ROOT / "notebooks",
                          env=dict(os.environ, SLOWER_REPO_URL="/nonexistent", SLOWER_MODE="cpu"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(ROOT)


def test_torch_and_triton_are_never_installed(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("torch>=999\ntriton>=999\nnumpy>=1.0\nsurely-not-installed-pkg>=1.0\npytest>=999  # too old\n")
    assert colab_setup.missing_requirements(req) == ["surely-not-installed-pkg>=1.0", "pytest>=999"]


def test_ranges_caps_and_pre_releases_use_packaging(tmp_path, monkeypatch):
    import importlib.metadata

    have = {"pkg-a": "5.0.0rc1", "pkg-b": "2.4.0", "pkg-c": "1.5", "numpy": "9.0"}
    monkeypatch.setattr(importlib.metadata, "version", lambda name: have[name])
    req = tmp_path / "requirements.txt"
    req.write_text("pkg-a>=5.0\npkg-b>=1.0,<2.4  # capped\npkg-c~=1.4\nnumpy<2.4\n")
    assert colab_setup.missing_requirements(req) == ["pkg-a>=5.0", "pkg-b>=1.0,<2.4", "numpy<2.4"]
    # on a GPU an installed numpy stays: its cap only guards Triton's interpreter
    assert colab_setup.missing_requirements(req, gpu=True) == ["pkg-a>=5.0", "pkg-b>=1.0,<2.4"]


def test_a_failed_clone_says_what_to_change(tmp_path):
    done = subprocess.run([sys.executable, "-c", colab_setup.SETUP_CELL], cwd=tmp_path,
                          env=dict(os.environ, SLOWER_REPO_URL=str(tmp_path / "no-such-repo")),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "Could not clone" in done.stderr and "REPO_URL" in done.stderr, done.stderr


def test_a_failed_install_fails_loudly(tmp_path, monkeypatch):
    req = tmp_path / "requirements.txt"
    req.write_text("surely-not-installed-pkg\n")
    monkeypatch.setattr(subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 1, stdout="", stderr="No matching distribution"))
    with pytest.raises(RuntimeError, match="surely-not-installed-pkg"):
        colab_setup.prepare(req)


def test_requirements_txt_is_satisfied_here():
    """CI installs requirements.txt, so the notebooks' setup cell installs nothing on a prepared machine."""
    import torch

    assert colab_setup.missing_requirements(gpu=torch.cuda.is_available()) == []  # as prepare() asks


def test_the_setup_cell_is_folded_in_colab_and_on_the_site():
    """Plumbing out of the reader's way: Colab shows the setup cell as a form (its #@title line, code hidden), and
    the site folds its code (the cell's hide-input tag, which MyST-NB reads)."""
    import json

    assert colab_setup.SETUP_CELL.startswith("#@title ") and 'display-mode: "form"' in colab_setup.SETUP_CELL.split("\n")[0]
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        setup = [c for c in cells if "".join(c["source"]) == colab_setup.SETUP_CELL.rstrip("\n")]
        assert len(setup) == 1, f"{path.name}: its setup cell is not the current one (python tools/sync_notebooks.py)"
        assert "hide-input" in setup[0]["metadata"].get("tags", []), f"{path.name}: the setup cell is not folded"
