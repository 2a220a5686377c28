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
import re
import subprocess
import sys
from pathlib import Path

REPO_URL = "https://github.com/slower-on-purpose/slower-on-purpose"
REPO_DIR = "slower-on-purpose"  # the folder a fresh runtime clones into
BRANCH = "main"
NEVER_INSTALL = {"torch", "triton"}  # Colab ships matched builds; reinstalling breaks CUDA

SETUP_CELL = f'''\
# Setup: find the repository (or fetch it on a fresh Colab runtime), install what is missing.
# Written by tools/sync_notebooks.py from colab_setup.py: edit it there, not here.
import os, pathlib, subprocess, sys
REPO_URL = os.environ.get("SLOWER_REPO_URL", "{REPO_URL}")
ROOT = next((p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
             if (p / "helpers.py").is_file() and (p / "kernels").is_dir()), None)
if ROOT is None:  # the notebook came alone (Colab): clone the rest next to it
    ROOT = pathlib.Path("{REPO_DIR}").resolve()
    if not ROOT.exists():
        subprocess.run(["git", "clone", "--quiet", "--depth", "1", REPO_URL, str(ROOT)], check=True)
sys.path.insert(0, str(ROOT))
import colab_setup
colab_setup.prepare()'''


def colab_url(notebook: str) -> str:
    """The "Open in Colab" address of ``notebooks/<notebook>.ipynb`` on GitHub."""
    path = REPO_URL.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{path}/blob/{BRANCH}/notebooks/{notebook}.ipynb"


def badge(notebook: str) -> str:
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(notebook)})")


_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(?:>=\s*([0-9][0-9.]*))?")


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def missing_requirements(path: Path | str | None = None) -> list[str]:
    """Requirements (``name`` or ``name>=floor`` lines) that are absent or older than their floor."""
    path = Path(path) if path else Path(__file__).with_name("requirements.txt")
    missing = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            missing += missing_requirements(path.parent / line[3:].strip())
            continue
        m = _REQ.match(line)
        if not line or not m:
            continue
        name, floor = m.group(1), m.group(2)
        if name.lower() in NEVER_INSTALL:
            continue
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(line)
            continue
        if floor and _version_tuple(have) < _version_tuple(floor):
            missing.append(line)
    return missing


def prepare(requirements: Path | str | None = None) -> None:
    """Install what ``requirements.txt`` lists and this Python lacks; fail loudly if pip fails."""
    todo = missing_requirements(requirements)
    if todo:
        print("installing:", " ".join(todo))
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *todo],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not install {todo}:\n{done.stdout}\n{done.stderr}")
    try:
        import torch
    except ImportError as err:  # pragma: no cover - torch is the one thing we never install
        raise RuntimeError("PyTorch is missing: install it for your platform (https://pytorch.org)") from err
    if not torch.cuda.is_available() and os.environ.get("SLOWER_MODE") != "cpu":
        in_colab = "google.colab" in sys.modules
        print("No GPU found: the series runs in CPU mode (Triton's interpreter, a tiny model, small sizes).\n"
              + ("On Colab pick Runtime > Change runtime type > T4 GPU, then Runtime > Run all."
                 if in_colab else "Timings will be interpreter times, not GPU times."))
