"""T4 compile check: every kernel, in every configuration its launchers use, compiles for sm_75 (T4)
and sm_90 (H100/H200), and fits the T4's 64 KiB of shared memory per block.

No GPU is needed: Triton ships ptxas. The interpreter replaces the compiler in-process, so the
compilation runs in a subprocess with TRITON_INTERPRET=0 (``import kernels`` switches the interpreter
on when there is no CUDA and the variable is unset) and reports JSON back (``python -m kernels.aot``).
"""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernels import TILE_CONFIGS
from kernels.aot import DEFAULT_TARGETS, T4_SHARED_MEMORY, compile_specs

ROOT = Path(__file__).resolve().parents[1]
KERNEL_MODULES = ["add", "rmsnorm", "matmul", "softmax", "attention", "fused", "gemv", "fast_attention"]
KERNEL_NAMES = {  # the names count_launches() reports, as the contract lists them
    "add_kernel",
    "empty_kernel",
    "rmsnorm_fused_kernel",
    "rmsnorm_inv_rms_kernel",
    "rmsnorm_scale_kernel",
    "matmul_kernel",
    "softmax_kernel",
    "swiglu_kernel",
    "add_rmsnorm_kernel",
    "rope_kernel",
    "rmsnorm_rope_kernel",
    "gemv_kernel",
    "decode_attention_kernel",
    "decode_combine_kernel",
    "prefill_attention_kernel",
}


def _fmt(rows) -> str:
    """One line per compilation: target, kernel, configuration, and the error or the shared bytes."""
    return "\n".join(
        f"  sm_{r['cc']} {r['dtype']} {r['kernel']} [{r['label']}]: {r['error'] or r['shared']}" for r in rows
    )


@pytest.fixture(scope="module")
def report() -> list[dict]:
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "kernels.aot"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"python -m kernels.aot failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def test_specs_cover_every_kernel():
    """Every @triton.jit function of the package has compile specs, and is one the contract names."""
    found = {
        name
        for module in KERNEL_MODULES
        for name, obj in vars(importlib.import_module(f"kernels.{module}")).items()
        if isinstance(obj, (JITFunction, InterpretedFunction)) and not name.startswith("_")  # _: device helpers
    }
    assert found == KERNEL_NAMES
    for dtype in ("fp16", "fp32"):
        specs = compile_specs(dtype)
        assert {s.name for s in specs} == KERNEL_NAMES
        assert {s.label for s in specs if s.name == "matmul_kernel"} == set(TILE_CONFIGS)


def test_every_kernel_compiles(report):
    expected = {(cc, dtype, s.name, s.label) for cc, dtype in DEFAULT_TARGETS for s in compile_specs(dtype)}
    assert {(r["cc"], r["dtype"], r["kernel"], r["label"]) for r in report} == expected
    failed = [r for r in report if not r["ok"]]
    assert not failed, f"{len(failed)} of {len(report)} compilations failed:\n{_fmt(failed)}"


def test_t4_shared_memory(report):
    t4 = [r for r in report if r["cc"] == 75 and r["ok"]]
    assert {r["dtype"] for r in t4} == {"fp16", "fp32"}
    over = [r for r in t4 if r["shared"] > T4_SHARED_MEMORY]
    assert not over, f"over the T4's {T4_SHARED_MEMORY} bytes of shared memory:\n{_fmt(over)}"
