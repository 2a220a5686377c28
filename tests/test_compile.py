"""T4 compile check: every kernel, in every configuration its launchers use, compiles for sm_75 (T4)
and sm_90 (H100/H200), and fits the T4's 64 KiB of shared memory per block.

No GPU is needed: Triton ships ptxas. The interpreter replaces the compiler in-process, so the
compilation runs in a subprocess with TRITON_INTERPRET=0 (``import slower_kernels`` switches the interpreter
on when there is no CUDA and the variable is unset) and reports JSON back (``python -m slower_kernels.aot``).
"""

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from slower_kernels import TILE_CONFIGS
from slower_kernels.aot import DEFAULT_TARGETS, T4_SHARED_MEMORY, compile_specs

ROOT = Path(__file__).resolve().parents[1]
KERNEL_MODULES = ["add", "rmsnorm", "matmul", "softmax", "attention", "fused", "gemv", "fast_attention", "decoder",
                  "folded_gemv"]
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
    "rmsnorm_rope_cache_kernel",
    "advance_kernel",
    "gemv_kernel",
    "decode_gemv_kernel",
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
        [sys.executable, "-m", "slower_kernels.aot"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"python -m slower_kernels.aot failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def test_specs_cover_every_kernel():
    """Every @triton.jit function of the package has compile specs, and is one the contract names."""
    found = {
        name
        for module in KERNEL_MODULES
        for name, obj in vars(importlib.import_module(f"slower_kernels.{module}")).items()
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


# --- What the compiler made (chapters 2-4): the PTX instruction mix, registers, programs per SM -------------
@pytest.fixture(scope="module")
def made() -> list[dict]:
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    proc = subprocess.run([sys.executable, "-m", "slower_kernels.aot", "--ptx"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, f"python -m slower_kernels.aot --ptx failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def test_tl_dot_is_fma_on_a_t4_and_tensor_cores_on_an_h200(made):
    """Chapter 4's finding, pinned: Triton compiles tl.dot to FMA instructions for sm_75 (no tensor-core mma),
    and to tensor-core mma for sm_90. A Triton upgrade that changes either must change chapter 4's reading."""
    import triton

    matmuls = [r for r in made if r["kernel"] == "matmul_kernel"]
    assert {r["label"] for r in matmuls} == set(TILE_CONFIGS) and {r["cc"] for r in matmuls} == {75, 90}
    for r in matmuls:
        if r["cc"] == 75:
            assert r["tensor-core mma"] == 0 and r["fma"] > 0, f"triton {triton.__version__}, sm_75 {r['label']}: {r}"
        else:
            assert r["tensor-core mma"] > 0 and r["fma"] == 0, f"triton {triton.__version__}, sm_90 {r['label']}: {r}"


def test_elementwise_kernels_load_16_bytes_at_a_time(made):
    for r in made:
        if r["kernel"] != "matmul_kernel":
            assert r["widest global load"] == "v4" and r["tensor-core mma"] == 0, r


def test_every_program_fits_its_multiprocessor(made):
    from slower_kernels.aot import SM_LIMITS

    for r in made:
        limits = SM_LIMITS[r["cc"]]
        assert 0 < r["registers"] <= 255 and 0 <= r["shared"] <= limits["shared"], r
        assert 1 <= r["programs_per_sm"] <= limits["max_programs"], r


def test_spills_are_reported_where_the_accumulator_outgrows_the_registers(made):
    import triton

    # On sm_75 tl.dot runs on FMA, so the fp32 accumulator (BLOCK_M x BLOCK_N over num_warps x 32 threads) and
    # the operands live in registers: a tile that takes the most a thread may hold (255), or no more than the
    # accumulator alone needs, has spilled (chapter 4 reads the compiler table this way); every other tile has not
    for r in made:
        assert r["spill stores"] >= 0, r
        if r["kernel"] == "matmul_kernel" and r["cc"] == 75:
            m, n = (int(re.search(rf"{d}(\d+)", r["label"]).group(1)) for d in ("m", "n"))
            accumulator = m * n // (r["num_warps"] * 32)
            assert (r["spill stores"] > 0) == (r["registers"] == 255 or r["registers"] <= accumulator), \
                f"triton {triton.__version__}: {r}"


def test_programs_per_sm_names_the_limit_that_binds():
    from slower_kernels.aot import programs_per_sm

    assert programs_per_sm(255, 0, 4, 75) == (2, "registers")  # 256 registers x 128 threads: 2 of 65,536
    assert programs_per_sm(16, 0, 4, 75) == (8, "warps")  # 32 warps per SM on a T4, 4 per program
    assert programs_per_sm(16, 48 * 1024, 1, 90) == (4, "shared memory")  # 227 KiB / 48 KiB
    assert programs_per_sm(16, 0, 1, 90) == (32, "programs")


def test_instruction_mix_reads_ptx():
    from slower_kernels.aot import instruction_mix

    ptx = """
	ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
	@%p1 ld.global.b16 { %rs1 }, [ %rd2 + 0 ];
	fma.rn.f32 %f3, %f1, %f2, %f3;
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %f1, %f2, %f3, %f4 }, { %r1 }, { %r2 }, { %f5 };
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 { %f1, %f2 }, %rd5, %rd6, 1, 1, 1, 0, 1;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	cp.async.cg.shared.global [ %r5 + 0 ], [ %rd3 + 0 ], 0x10, %r6;
	st.shared.b16 [ %r7 ], %rs1;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 { %r1, %r2, %r3, %r4 }, [ %r8 ];
	st.global.v2.b32 [ %rd4 + 0 ], { %r1, %r2 };
"""
    mix = instruction_mix(ptx)
    assert mix == {"tensor-core mma": 2, "fma": 1, "global loads": 2, "global -> shared copies": 1,
                   "global stores": 1, "shared loads": 1, "shared stores": 1, "widest global load": "v4"}


def test_ptx_text_gives_one_kernel_and_names_a_wrong_label():
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    run = [sys.executable, "-m", "slower_kernels.aot", "--ptx-text", "matmul_kernel"]
    ok = subprocess.run(run + ["m16_n16_k16", "75"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert ".target sm_75" in ok.stdout and "fma.rn.f32" in ok.stdout and "mma.sync" not in ok.stdout
    bad = subprocess.run(run + ["m1_n1_k1", "75"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "labels of 'matmul_kernel'" in bad.stderr and "m16_n16_k16" in bad.stderr
