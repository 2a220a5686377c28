"""Where this run happens: the mode (from ``SLOWER_MODE`` and whether a GPU is visible), the device and dtype,
the GPU's short name, where results and figures go, the sizes of this mode, and the versions recorded beside
every number. The process-wide side effects (Triton's interpreter in CPU mode, CPU pinning, matplotlib's
backend outside a notebook) all happen in ``setup``, called once below, before anything imports Triton."""
from __future__ import annotations

import atexit
import json
import os
import platform
import resource
import re
import sys
from pathlib import Path

import torch

from slower_harness.modes import MODE_NOTES, SIZES_BY_MODE, TOLERANCE, pin_cpus, resolve_mode

ROOT = Path(__file__).resolve().parents[1]
MODE = resolve_mode(os.environ.get("SLOWER_MODE"), torch.cuda.is_available())
HAS_GPU = MODE != "cpu"


def peak_memory() -> dict:
    """This process's peak memory so far, in bytes: what PyTorch's allocator reserved on the GPU (0 if CUDA was
    never used; the CUDA context and Triton's own allocations come on top) and the host's resident set."""
    gpu = torch.cuda.max_memory_reserved() if torch.cuda.is_available() and torch.cuda.is_initialized() else 0
    return {"gpu_bytes": gpu, "host_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}  # Linux: KiB


def _write_peak_memory(path: str) -> None:
    Path(path).write_text(json.dumps(peak_memory()))


def setup() -> set[int] | None:
    """The process-wide effects of choosing a mode, in one place: Triton's interpreter in CPU mode (before any
    @triton.jit function is defined), CPU pinning (``SLOWER_PIN_CPUS``), matplotlib's Agg backend outside
    a notebook (scripts never open windows), and, where ``SLOWER_PEAK_FILE`` names a file (``tools/run_series.py``
    sets it for each chapter's kernel), this process's peak memory written there at exit and, in a notebook, after
    every cell. Returns the pinned
    cores, or None."""
    if not HAS_GPU:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if os.environ.get("SLOWER_PEAK_FILE"):
        path = os.environ["SLOWER_PEAK_FILE"]
        atexit.register(_write_peak_memory, path)
        if "ipykernel" in sys.modules:  # and after every cell: a kernel stopped without a normal exit runs no atexit
            from IPython import get_ipython

            shell = get_ipython()
            if shell is not None:
                shell.events.register("post_run_cell", lambda *_: _write_peak_memory(path))
    if "ipykernel" not in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
    return pin_cpus(os.environ.get("SLOWER_PIN_CPUS", "").strip())


PINNED_CPUS = setup()
IN_NOTEBOOK = "ipykernel" in sys.modules
DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
DTYPE = torch.float16 if HAS_GPU else torch.float32  # a T4 has no bf16; the interpreter prefers fp32


def tolerance(kind: str, dtype: torch.dtype = DTYPE) -> float:
    """The chapters' tolerance of ``kind`` (a key of ``TOLERANCE``) for ``dtype``."""
    return TOLERANCE[kind][dtype]


def _gpu_name() -> str:
    return torch.cuda.get_device_name(0) if HAS_GPU else "cpu"


def hardware_slug(gpu_name: str | None = None) -> str:
    """'Tesla T4' -> 't4', 'NVIDIA H200' -> 'h200', 'NVIDIA A100-SXM4-80GB' -> 'a100'; no GPU -> 'cpu'."""
    name = (gpu_name if gpu_name is not None else _gpu_name()).lower()
    if name == "cpu":
        return "cpu"
    for known in ("h200", "h100", "gh200", "a100", "a10g", "a10", "l40s", "l4", "t4", "v100", "p100"):
        if re.search(rf"\b{known}\b", name.replace("-", " ")):
            return known
    name = re.sub(r"^(nvidia|tesla|geforce)\s+", "", name).replace("geforce ", "")
    return re.sub(r"[^a-z0-9]+", "", name) or "gpu"


SLUG = hardware_slug()
# Where this run's results and figures go: runs/<slug> (ignored by git), or figures/<slug> where the run
# is meant to be committed (``python tools/run_series.py --commit`` sets SLOWER_RESULTS_ROOT=figures).
RESULTS_ROOT = Path(os.environ.get("SLOWER_RESULTS_ROOT") or ROOT / "runs")
TRACES_DIR = ROOT / "runs" / "traces"  # profiler traces (step_timeline's keep_trace): large, never committed
RESULTS_DIR = RESULTS_ROOT / (SLUG if MODE == "full" else "cpu" if MODE == "cpu" else f"{SLUG}-quick")
COMMITTED_DIR = ROOT / "figures"  # the committed runs: figures/h200 (full run), figures/cpu/runtimes.csv
SIZES = SIZES_BY_MODE[MODE]


def env_info() -> dict:
    """Hardware, mode and library versions: recorded beside every number."""
    import transformers
    import triton

    info = {"gpu": _gpu_name(), "slug": SLUG, "mode": MODE}
    if HAS_GPU:
        props = torch.cuda.get_device_properties(0)
        info.update(compute_capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    else:
        info.update(compute_capability="-", memory_gib="-", cuda="-")
    info.update(python=platform.python_version(), torch=torch.__version__, triton=triton.__version__,
                transformers=transformers.__version__,
                pinned=f"cores {','.join(map(str, sorted(PINNED_CPUS)))}" if PINNED_CPUS else "no")
    return info


def show_env() -> None:
    """Print where this run happens (hardware, mode, versions) and how to read its timings."""
    print(" | ".join(f"{k}: {v}" for k, v in env_info().items()))
    print(MODE_NOTES[MODE])
