"""Install what the series (or, with --test, the test command) needs and this Python lacks.

    python tools/install.py              # what the chapters need
    python tools/install.py --notebooks  # also nbmake and its kernel: what tools/run_series.py needs (it calls this)
    python tools/install.py --test       # also the test runners, the notebook toolchain and the website

Both commands of the README call this first. What it does:

* **PyTorch missing, a GPU present** (``nvidia-smi`` lists one): the public wheels of PyTorch, whose
  Linux build brings the Triton it was built with, at the versions pinned in ``constraints-ci.txt``.
* **PyTorch missing, no GPU**: a CPU build of PyTorch (a few hundred MB instead of several GB of CUDA
  libraries) from PyTorch's CPU wheel index, or from a local wheel that pip already finds (its
  ``--find-links``), plus Triton for its interpreter; all at the pinned versions.
* **Everything else** in ``requirements.txt`` (``requirements-notebooks.txt`` with --notebooks,
  ``requirements-test.txt`` with --test) that is absent or
  outside its range; where PyTorch was missing, or under ``CI=true`` on a machine without a GPU, all of
  it at the pinned versions, so that a fresh environment and CI run what the pins say.

An installed PyTorch is never replaced (except by CPU CI): Colab's, or your own CUDA build, stays.
Set ``SLOWER_TORCH_INDEX`` to use another CPU wheel index, or to an empty string to use only the default
index. Linux only: Triton publishes no wheels for macOS or Windows (see the README).

``SLOWER_VERSIONS`` picks the versions (CI's jobs set it; a fresh virtual environment can too):

* ``pinned`` (the default): ``constraints-ci.txt``, as above.
* ``colab``: ``constraints-colab.txt``, the versions Colab's GPU image ships (PyTorch, Triton, transformers).
* ``newest``: no constraints file at all: the newest PyTorch (CPU build without a GPU), then the newest
  release of everything else that ``requirements*.txt`` admits, so that a new release that breaks the
  series breaks this job first.

``colab`` and ``newest`` always install, replacing what is there: they exist to test those versions.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import colab_setup  # noqa: E402

REQUIREMENTS = ROOT / "requirements.txt"
NOTEBOOK_REQUIREMENTS = ROOT / "requirements-notebooks.txt"
TEST_REQUIREMENTS = ROOT / "requirements-test.txt"
CONSTRAINTS = ROOT / "constraints-ci.txt"
# SLOWER_VERSIONS -> the constraints file those versions are pinned in (None: the newest that the ranges admit)
VERSIONS = {"pinned": CONSTRAINTS, "colab": ROOT / "constraints-colab.txt", "newest": None}
CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's own index of CPU-only builds
KERNELS = ROOT / "build" / "jupyter"  # nbmake's "python3" kernel for this Python (--test); JUPYTER_PATH finds it


def gpu_present() -> bool:
    """Whether an NVIDIA GPU is attached, asked of the driver (PyTorch may not be installed yet)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return done.returncode == 0 and "GPU" in done.stdout


def versions() -> str:
    """The versions asked for in ``SLOWER_VERSIONS`` (``pinned`` when unset): a key of ``VERSIONS``."""
    chosen = os.environ.get("SLOWER_VERSIONS", "").strip().lower() or "pinned"
    if chosen not in VERSIONS:
        raise SystemExit(f"SLOWER_VERSIONS must be one of {', '.join(VERSIONS)}, got {chosen!r}")
    return chosen


def pinned(name: str, constraints: Path = CONSTRAINTS) -> str:
    """``name==version`` from a constraints file (the one place those versions are written)."""
    for line in constraints.read_text().splitlines():
        spec = line.split("#")[0].strip()
        if spec.split("==")[0].strip().lower() == name:
            return spec
    raise KeyError(f"{constraints.name} pins no {name}")


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True)


def install_torch(gpu: bool, constraints: Path = CONSTRAINTS) -> None:
    """The pinned PyTorch and Triton for this machine: the public CUDA build with a GPU, a CPU build without."""
    index = os.environ.get("SLOWER_TORCH_INDEX", CPU_INDEX)
    torch_pin = pinned("torch", constraints)
    if not gpu and index:
        # "torch==X" matches both the default index's CUDA build "X" and the CPU index's "X+cpu"; pip prefers
        # the "+cpu" local version, which needs no CUDA libraries. Only torch itself is looked up there.
        pip("--quiet", "--no-deps", torch_pin, "--extra-index-url", index)
    # its dependencies (and, with a GPU, the CUDA build itself) from the default index; an installed
    # "X+cpu" satisfies "torch==X", so it stays
    pip("--quiet", torch_pin, pinned("triton", constraints), "-c", str(constraints))


def install_newest(gpu: bool, reqs: Path) -> None:
    """The newest PyTorch (a CPU build without a GPU, as above), then the newest release of everything else
    that ``reqs`` admits, with PyTorch held where it is (an upgrade would otherwise trade a CPU build for the
    default index's CUDA build)."""
    index = os.environ.get("SLOWER_TORCH_INDEX", CPU_INDEX)
    pip("--quiet", "--upgrade", *(("--no-deps", "torch", "--extra-index-url", index) if not gpu and index
                                  else ("torch",)))
    import importlib.metadata

    held = ROOT / "build" / "torch-held.txt"
    held.parent.mkdir(exist_ok=True)
    held.write_text(f"torch=={importlib.metadata.version('torch')}\n")
    pip("--quiet", "--upgrade", "-r", str(reqs), "-c", str(held))


def install_kernel() -> None:
    """A "python3" Jupyter kernel for this very Python under build/ (the user's own kernels stay as they are);
    JUPYTER_PATH must name ``KERNELS / "share" / "jupyter"`` for nbmake to find it."""
    subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(KERNELS), "--name", "python3"],
                   check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", action="store_true", help="also nbmake and its kernel (tools/run_series.py)")
    parser.add_argument("--test", action="store_true", help="also what the test command needs")
    args = parser.parse_args(argv)
    if platform.system() != "Linux":
        print(f"warning: {platform.system()} has no Triton wheels; use Colab or Linux (see the README)")
    ci = os.environ.get("CI") == "true"
    gpu = gpu_present()
    reqs = TEST_REQUIREMENTS if args.test else NOTEBOOK_REQUIREMENTS if args.notebooks else REQUIREMENTS
    chosen = versions()
    constraints = VERSIONS[chosen]
    # A fresh environment gets the pinned stack throughout, and so does CPU CI (it tests what the pins
    # say); an environment that has its own PyTorch (Colab's, a GPU runner's) keeps it, unless another
    # set of versions is asked for.
    pinned_stack = chosen != "pinned" or (ci and not gpu) or importlib.util.find_spec("torch") is None
    if constraints is None:
        print(f"installing the newest versions that {reqs.name} admits ({'GPU' if gpu else 'CPU'} build of PyTorch)")
        install_newest(gpu, reqs)
    elif pinned_stack:
        print(f"installing PyTorch and Triton ({'GPU build' if gpu else 'CPU build'}) at the versions in "
              f"{constraints.name}")
        install_torch(gpu, constraints)
        pip("--quiet", "-r", str(reqs), "-c", str(constraints))
    else:
        missing = colab_setup.missing_requirements(reqs, gpu)
        if missing:
            print("installing what is missing:", " ".join(missing))
            pip("--quiet", *missing)
    if args.test or args.notebooks:
        install_kernel()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
