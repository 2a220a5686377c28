"""Shared pytest setup.

# --- kernels tests (tests/test_kernels.py, tests/test_compile.py) -------------------------------
Without CUDA, Triton kernels run in the interpreter, which must be switched on before any
@triton.jit function is defined (``import slower_kernels`` does the same).
"""

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `pytest` (not only `python -m pytest`) finds slower_kernels/ and helpers.py
    sys.path.insert(0, str(ROOT))

ON_GPU = torch.cuda.is_available() and os.environ.get("SLOWER_MODE", "").strip().lower() != "cpu"
if not ON_GPU:  # SLOWER_MODE=cpu forces the interpreter on a GPU machine too, as it does for helpers
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where the kernels run: the GPU, else the CPU through Triton's interpreter."""
    return torch.device("cuda" if ON_GPU else "cpu")


# --- end of kernels tests' setup -----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _unprofiled():
    """Each test starts as a process that has not profiled: the harness refuses host-clock timings after a
    profile (``slower_harness.timing_order.host_clock_free``), and tests time only to check what the timings
    return. ``helpers.PROFILED_BY`` is the same list, re-exported."""
    timing_order = sys.modules.get("slower_harness.timing_order")
    if timing_order is not None:
        timing_order.PROFILED_BY.clear()
    yield
