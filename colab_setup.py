"""Everything a notebook needs before it can import the harness, kept in one place.

* ``REPO_URL`` is where the series lives. A fork changes it here, then runs
  ``python tools/sync_notebooks.py`` to rewrite each notebook's first cell and badge.
* ``SETUP_CELL`` is that first cell. It is deliberately self-contained (standard library only): on a
  fresh Colab runtime the notebook arrives alone and has to fetch the rest of the repository first.
* ``prepare()`` runs inside that cell once the repository is on the path: it installs what is missing
  from ``requirements.txt`` (never torch or triton, which Colab already ships and must not be
  replaced) and says what to do when no GPU is attached.
"""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

# Placeholder until the series is published: the badges and the clone only work once this names a public
# repository holding this code (DEVELOPING.md, "Open in Colab from your fork", says what to change).
REPO_URL = "https://github.com/slower-on-purpose/slower-on-purpose"
REPO_DIR = "slower-on-purpose"  # the folder a fresh runtime clones into
BRANCH = "main"
NEVER_INSTALL = {"torch", "triton"}  # Colab ships matched builds; reinstalling breaks CUDA
# Its cap in requirements.txt guards Triton 3.6's interpreter (CPU mode); on a GPU an installed one stays.
INTERPRETER_ONLY_CAPS = {"numpy"}

SETUP_CELL = f'''\
#@title Setup (run it first) {{ display-mode: "form" }}
# Setup: find the repository (or fetch it on a fresh Colab runtime), install what is missing.
# Written by tools/sync_notebooks.py from colab_setup.py: edit it there, not here.
import os, pathlib, subprocess, sys
REPO_URL = os.environ.get("SLOWER_REPO_URL", "{REPO_URL}")
BRANCH = os.environ.get("SLOWER_BRANCH", "{BRANCH}")
ROOT = next((p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
             if (p / "helpers.py").is_file() and (p / "slower_kernels").is_dir()), None)
if ROOT is None:  # the notebook came alone (Colab): clone the rest next to it
    ROOT = pathlib.Path("{REPO_DIR}").resolve()
    if not ROOT.exists():
        done = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", BRANCH, REPO_URL, str(ROOT)],
                              capture_output=True, text=True, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        if done.returncode != 0:
            raise SystemExit(f"Could not clone {{REPO_URL}} (branch {{BRANCH}}): {{done.stderr.strip()}}\\n"
                             "Is the address right and the repository public? A fork sets REPO_URL in "
                             "colab_setup.py (see the README), or SLOWER_REPO_URL before this cell.")
sys.path.insert(0, str(ROOT))
import colab_setup
colab_setup.prepare()'''


# Notebook metadata that makes Colab open a badge's notebook on a GPU runtime (a T4 on the free tier).
COLAB_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}


def colab_url(notebook: str) -> str:
    """The "Open in Colab" address of ``notebooks/<notebook>.ipynb`` on GitHub."""
    path = REPO_URL.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/{BRANCH}/notebooks/{notebook}.ipynb"


def badge(notebook: str) -> str:
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(notebook)})")


def _requirement(line: str):
    """A ``packaging`` Requirement (installed first where a bare virtual environment lacks it)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "packaging"], check=True)
        from packaging.requirements import Requirement
    return Requirement(line)


def missing_requirements(path: Path | str | None = None, gpu: bool = False) -> list[str]:
    """Lines of a requirements file whose package is absent or outside the line's version range.

    ``-r other.txt`` lines are followed; torch and triton are left out (see ``NEVER_INSTALL``), and on a
    ``gpu`` machine so is an installed numpy (see ``INTERPRETER_ONLY_CAPS``).
    A pre-release never satisfies a range (``5.0.0rc1`` is not ``>=5.0``).
    """
    path = Path(path) if path else Path(__file__).with_name("requirements.txt")
    missing = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            missing += missing_requirements(path.parent / line[3:].strip(), gpu)
            continue
        if not line:
            continue
        req = _requirement(line)
        if req.name.lower() in NEVER_INSTALL or (req.marker and not req.marker.evaluate()):
            continue
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(line)
            continue
        if gpu and req.name.lower() in INTERPRETER_ONLY_CAPS:
            continue
        if not req.specifier.contains(have, prereleases=False):
            missing.append(line)
    return missing


def prepare(requirements: Path | str | None = None) -> None:
    """Install what ``requirements.txt`` lists and this Python lacks; fail loudly if pip fails."""
    try:
        import torch
    except ImportError as err:  # torch is the one thing a notebook never installs
        raise RuntimeError("PyTorch is missing: run `python tools/install.py` in the repository (Linux), "
                           "or install PyTorch for your platform (https://pytorch.org)") from err
    gpu = torch.cuda.is_available()
    if not gpu or os.environ.get("SLOWER_MODE", "").strip().lower() == "cpu":
        # Triton reads TRITON_INTERPRET once, when it is first imported, and transformers imports it with a
        # model module: set here, before a chapter's first import (as helpers and slower_kernels do later)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    todo = missing_requirements(requirements, gpu)
    if todo:
        print("installing:", " ".join(todo))
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *todo],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {todo}:\n{done.stdout}\n{done.stderr}")
    if not gpu and os.environ.get("SLOWER_MODE", "") in ("", "cpu"):
        in_colab = "google.colab" in sys.modules
        print("No GPU found: the series runs in CPU mode (Triton's interpreter, a tiny model, small sizes).\n"
              + ("On Colab pick Runtime > Change runtime type > T4 GPU, then Runtime > Run all."
                 if in_colab else "Timings will be interpreter times, not GPU times."))
