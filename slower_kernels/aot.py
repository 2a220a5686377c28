"""Ahead-of-time compilation of every kernel, for a GPU we may not have (the T4 check).

``compile_specs(dtype)`` lists each @triton.jit kernel of the package with the argument types and
constexprs its launcher uses, in every tile configuration of ``TILE_CONFIGS`` (matmul) and a few row
lengths (row kernels). ``compile_spec(spec, cc)`` compiles one for ``GPUTarget("cuda", cc, 32)``:
Triton ships ptxas, so this works on a machine without a GPU, but not in the interpreter, which
replaces the compiler; run it in a process started with TRITON_INTERPRET=0:

    TRITON_INTERPRET=0 python -m slower_kernels.aot        # JSON report: T4 (sm_75) and H100/H200 (sm_90)
    TRITON_INTERPRET=0 python -m slower_kernels.aot --ptx  # what the compiler made: instruction mix, registers
    TRITON_INTERPRET=0 python -m slower_kernels.aot --ptx --with-text  # ... and each kernel's PTX

``compiler_table()`` reads what the compiler made of the teaching kernels (the add, both RMSNorms, the
matmul in every tile) for each target: the PTX instructions that matter (tensor-core ``mma`` against
``fma``, global loads and stores and how wide, shared-memory traffic), the registers per thread (ptxas,
the assembler Triton ships), the shared memory per program, and the programs per multiprocessor those
allow (``SM_LIMITS``).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import triton

from . import INTERPRET
from .add import add_kernel, empty_kernel
from .configs import ELEMENTWISE_BLOCK_SIZE, TILE_CONFIGS, row_block_size, row_num_warps
from .fast_attention import (
    MAX_HEAD_DIM,
    MAX_SPLITS,
    combine_meta,
    decode_attention_kernel,
    decode_combine_kernel,
    decode_meta,
    prefill_attention_kernel,
    prefill_meta,
)
from .fused import (
    SWIGLU_MIN_BLOCK_SIZE,
    add_rmsnorm_kernel,
    rmsnorm_rope_kernel,
    rope_kernel,
    rope_num_warps,
    swiglu_kernel,
    swiglu_num_warps,
)
from .folded_gemv import decode_gemv_kernel, decode_projections, rule_config, tuned_table, variant_flags
from .decoder import advance_kernel, rmsnorm_rope_cache_kernel
from .gemv import gemv_config, gemv_kernel
from .matmul import matmul_kernel
from .rmsnorm import rmsnorm_fused_kernel, rmsnorm_inv_rms_kernel, rmsnorm_scale_kernel
from .softmax import softmax_kernel

ROW_SIZES = (128, 1024, 8192)  # row lengths compiled for the row kernels (head dim, hidden, a long row)
T4_SHARED_MEMORY = 64 * 1024  # bytes of shared memory one block may use on sm_75
DEFAULT_TARGETS = ((75, "fp16"), (75, "fp32"), (90, "fp16"), (90, "fp32"))
ATTENTION_HEAD_DIMS = (64, 128, MAX_HEAD_DIM)  # the blog's, Qwen3-0.6B's, the largest allowed
# (M, N, K) whose gemv_config tiles are compiled: Qwen3-0.6B's decode shapes (lm_head, o/k/v, down, q,
# gate/up, fused qkv, fused gate-up) and small M
GEMV_SHAPES = ((1, 151936, 1024), (1, 1024, 1024), (1, 1024, 3072), (1, 2048, 1024), (1, 4096, 1024),
               (1, 6144, 1024), (4, 6144, 1024), (16, 151936, 1024))
# the decode step's projections (variant, N, K) whose decode_gemv tiles are compiled: Qwen3-0.6B's
DECODE_PROJECTIONS = decode_projections(hidden=1024, intermediate=3072, heads=16, kv_heads=8, head_dim=128, vocab=151936)


@dataclass(frozen=True)
class CompileSpec:
    """One kernel in one configuration, as triton.compile needs it."""

    kernel: object  # the @triton.jit function
    label: str  # the configuration, e.g. "m64_n64_k32" or "BLOCK_SIZE=1024"
    dtype: str  # "fp16" or "fp32": the element type of the data pointers
    signature: dict  # argument name -> "*fp16", "*fp32", "i32", "fp32" or "constexpr"
    constexprs: dict  # constexpr argument name -> value
    options: dict  # num_warps (and num_stages), as the launcher passes them

    @property
    def name(self) -> str:
        return self.kernel.fn.__name__


# The runtime argument types of each kernel, as its launcher passes them: "*T" points to the data
# (fp16 or fp32), "*fp32" to an fp32 buffer, "i32" a size or stride, "fp32" a Python float.
# Arguments not listed are constexprs.
_ROW = dict(n_cols="i32", stride_xm="i32", stride_om="i32")
_KV = dict(k_ptr="*T", v_ptr="*T", stride_kb="i32", stride_kh="i32", stride_kt="i32",
           stride_vb="i32", stride_vh="i32", stride_vt="i32")
_ROPE = dict(seq_len="i32", n_q_heads="i32", half_dim="i32",
             stride_qb="i32", stride_qh="i32", stride_qs="i32", stride_kb="i32", stride_kh="i32", stride_ks="i32",
             stride_qob="i32", stride_qoh="i32", stride_qos="i32", stride_kob="i32", stride_koh="i32", stride_kos="i32",
             stride_cb="i32", stride_cs="i32")
_ARG_TYPES = {
    add_kernel: dict(x_ptr="*T", y_ptr="*T", out_ptr="*T", n_elements="i32"),
    empty_kernel: dict(x_ptr="*T"),
    rmsnorm_fused_kernel: dict(x_ptr="*T", w_ptr="*T", out_ptr="*T", **_ROW, eps="fp32"),
    rmsnorm_inv_rms_kernel: dict(x_ptr="*T", inv_rms_ptr="*fp32", n_cols="i32", stride_xm="i32", eps="fp32"),
    rmsnorm_scale_kernel: dict(x_ptr="*T", w_ptr="*T", inv_rms_ptr="*fp32", out_ptr="*T", **_ROW),
    softmax_kernel: dict(x_ptr="*T", out_ptr="*T", **_ROW, scale="fp32"),
    matmul_kernel: dict(
        a_ptr="*T", b_ptr="*T", c_ptr="*T", M="i32", N="i32", K="i32",
        stride_am="i32", stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32",
    ),
    decode_attention_kernel: dict(
        q_ptr="*T", out_ptr="*T", part_ptr="*fp32", lse_ptr="*fp32", kv_len_ptr="*i64", n_keys="i32", chunk="i32",
        group="i32", qk_scale="fp32", stride_qb="i32", stride_qh="i32", **_KV,
    ),
    decode_combine_kernel: dict(part_ptr="*fp32", lse_ptr="*fp32", out_ptr="*T", num_splits="i32"),
    prefill_attention_kernel: dict(
        q_ptr="*T", out_ptr="*T", n_queries="i32", n_keys="i32", group="i32", qk_scale="fp32",
        stride_qb="i32", stride_qh="i32", stride_qs="i32", **_KV,
    ),
    gemv_kernel: dict(
        x_ptr="*T", w_ptr="*T", b_ptr="*T", y_ptr="*T", M="i32", N="i32", K="i32",
        stride_xm="i32", stride_wn="i32", stride_ym="i32",
    ),
    decode_gemv_kernel: dict(x_ptr="*T", norm_w_ptr="*T", w_ptr="*T", res_ptr="*T", y_ptr="*T", key_ptr="*i64",
                             N="i32", K="i32", stride_wn="i32", eps="fp32"),
    advance_kernel: dict(key_ptr="*i64", token_ptr="*i64", position_ptr="*i64", kv_len_ptr="*i64", out_ptr="*i64",
                         embed_ptr="*T", x_ptr="*T", hidden="i32"),
    swiglu_kernel: dict(gate_ptr="*T", up_ptr="*T", out_ptr="*T", n_cols="i32", stride_gm="i32", stride_um="i32",
                        stride_om="i32"),
    add_rmsnorm_kernel: dict(x_ptr="*T", res_ptr="*T", w_ptr="*T", y_ptr="*T", r_ptr="*T", n_cols="i32",
                             stride_xm="i32", stride_resm="i32", stride_ym="i32", stride_rm="i32", eps="fp32"),
    rope_kernel: dict(q_ptr="*T", k_ptr="*T", cos_ptr="*T", sin_ptr="*T", q_out_ptr="*T", k_out_ptr="*T", **_ROPE),
    rmsnorm_rope_kernel: dict(q_ptr="*T", k_ptr="*T", q_w_ptr="*T", k_w_ptr="*T", cos_ptr="*T", sin_ptr="*T",
                              q_out_ptr="*T", k_out_ptr="*T", **_ROPE, eps="fp32"),
    rmsnorm_rope_cache_kernel: dict(q_ptr="*T", k_ptr="*T", v_ptr="*T", q_w_ptr="*T", k_w_ptr="*T", cos_ptr="*T",
                                    sin_ptr="*T", q_out_ptr="*T", k_cache_ptr="*T", v_cache_ptr="*T", pos_ptr="*i64",
                                    n_q_heads="i32", max_len="i32", half_dim="i32", stride_qs="i32", stride_qh="i32",
                                    stride_ks="i32", stride_kh="i32", stride_vs="i32", stride_vh="i32", eps="fp32"),
}  # fmt: skip


def _spec(kernel, label: str, dtype: str, constexprs: dict, **options) -> CompileSpec:
    """The full signature in argument order: the types above, "constexpr" for the rest."""
    types = {arg: f"*{dtype}" if t == "*T" else t for arg, t in _ARG_TYPES[kernel].items()}
    signature = {arg: types.get(arg, "constexpr") for arg in kernel.arg_names}
    missing = {arg for arg, t in signature.items() if t == "constexpr" and arg not in constexprs}
    assert not missing, f"{kernel.fn.__name__}: no value for the constexprs {missing}"
    return CompileSpec(kernel, label, dtype, signature, constexprs, options)


def _meta_spec(kernel, label: str, dtype: str, meta: dict, **constexprs) -> CompileSpec:
    """A spec from a launcher's meta dict (constexprs, num_warps, num_stages), plus more constexprs."""
    meta = dict(meta, **constexprs)
    options = {key: meta.pop(key) for key in ("num_warps", "num_stages") if key in meta}
    return _spec(kernel, label, dtype, meta, **options)


def compile_specs(dtype: str = "fp16") -> list[CompileSpec]:
    """Every kernel of the package in every configuration its launchers use, for fp16 or fp32 data."""
    if dtype not in ("fp16", "fp32"):
        raise ValueError(f"dtype must be 'fp16' or 'fp32', got {dtype!r}")
    block = ELEMENTWISE_BLOCK_SIZE
    specs = [_spec(add_kernel, f"BLOCK_SIZE={block}", dtype, dict(BLOCK_SIZE=block)),
             _spec(empty_kernel, "empty", dtype, {})]
    for n_cols in ROW_SIZES:
        block = row_block_size(n_cols)
        for kernel in (rmsnorm_fused_kernel, rmsnorm_inv_rms_kernel, rmsnorm_scale_kernel, softmax_kernel):
            specs.append(
                _spec(kernel, f"BLOCK_SIZE={block}", dtype, dict(BLOCK_SIZE=block), num_warps=row_num_warps(block))
            )
    block = ELEMENTWISE_BLOCK_SIZE  # swiglu: the block sizes swiglu_block_size can pick
    while block >= SWIGLU_MIN_BLOCK_SIZE:
        specs.append(_spec(swiglu_kernel, f"BLOCK_SIZE={block}", dtype, dict(BLOCK_SIZE=block),
                           num_warps=swiglu_num_warps(block)))
        block //= 2
    for n_cols in ROW_SIZES:
        block = row_block_size(n_cols)
        specs.append(_spec(add_rmsnorm_kernel, f"BLOCK_SIZE={block}", dtype, dict(BLOCK_SIZE=block),
                           num_warps=row_num_warps(block)))
    for head_dim in (16, 64, 128, 256):
        block = row_block_size(head_dim // 2)
        for kernel in (rope_kernel, rmsnorm_rope_kernel, rmsnorm_rope_cache_kernel):
            specs.append(_spec(kernel, f"BLOCK_HALF={block}", dtype, dict(BLOCK_HALF=block),
                               num_warps=rope_num_warps(block)))
    for tile in TILE_CONFIGS.values():
        blocks = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k)
        specs.append(
            _spec(matmul_kernel, tile.name, dtype, blocks, num_warps=tile.num_warps, num_stages=tile.num_stages)
        )
    for config in dict.fromkeys(gemv_config(*shape) for shape in GEMV_SHAPES):  # distinct tiles, in order
        blocks = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k)
        for has_bias in (False, True):
            specs.append(_spec(gemv_kernel, config.name + ("_bias" if has_bias else ""), dtype,
                               dict(blocks, HAS_BIAS=has_bias), num_warps=config.num_warps))
    # every tile the decode step may launch: gemv's rule for each projection, and every measured table's entry
    tiles = {(variant, rule_config(N, K)) for variant, N, K in DECODE_PROJECTIONS.values()}
    tiles |= {(variant, config) for (_, variant, _, _), config in tuned_table().items()}
    for variant, config in sorted(tiles, key=lambda t: (t[0], t[1].name)):
        specs.append(_spec(decode_gemv_kernel, f"{variant} {config.name}", dtype,
                           dict(BLOCK_N=config.block_n, BLOCK_K=config.block_k, PREFETCH=config.prefetch,
                                **variant_flags(variant)),
                           num_warps=config.num_warps, num_stages=config.num_stages))
    specs.append(_spec(advance_kernel, "BLOCK=1024", dtype, dict(BLOCK=1024)))
    torch_dtype = {"fp16": torch.float16, "fp32": torch.float32}[dtype]
    for D in ATTENTION_HEAD_DIMS:
        decode = decode_meta(D, torch_dtype)
        for split, on_device in ((False, False), (True, True)):  # each flag's both code paths
            specs.append(_meta_spec(decode_attention_kernel, f"D={D} split={split} kv_len_on_device={on_device}",
                                    dtype, decode, SPLIT=split, KV_LEN_ON_DEVICE=on_device))
        specs.append(_meta_spec(decode_combine_kernel, f"D={D} splits={MAX_SPLITS}", dtype,
                                combine_meta(D, MAX_SPLITS)))
        for causal in (True, False):
            specs.append(_meta_spec(prefill_attention_kernel, f"D={D} causal={causal}", dtype,
                                    prefill_meta(D, torch_dtype), CAUSAL=causal))
    return specs


def compile_spec(spec: CompileSpec, cc: int, divisible_ints: bool = False):
    """Compile one spec for ``GPUTarget("cuda", cc, 32)``; returns Triton's CompiledKernel
    (``.metadata.shared`` bytes of shared memory, ``.asm["ptx"]``, ``.asm["ttgir"]``, ...).
    ``divisible_ints``: tell the compiler every integer argument is a multiple of 16, as Triton's JIT does
    at run time when the sizes and strides are (the model's are: 1024, 3072, ...); without the hint a
    masked load cannot be vectorised."""
    if INTERPRET:
        raise RuntimeError(
            "slower_kernels.aot needs Triton's compiler, which TRITON_INTERPRET=1 replaces: "
            "run it in a process started with TRITON_INTERPRET=0"
        )
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    # data pointers from PyTorch are 16-byte aligned: the hint the JIT gives them at run time (and to
    # integers that are multiples of 16, with divisible_ints)
    divisible = [i for i, t in enumerate(spec.signature.values())
                 if t.startswith("*") or (divisible_ints and t == "i32")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in divisible}
    src = ASTSource(fn=spec.kernel, signature=spec.signature, constexprs=spec.constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", cc, 32), options=dict(spec.options))


def compile_report(targets=DEFAULT_TARGETS) -> list[dict]:
    """Compile every spec for every (compute capability, dtype) in ``targets``; one dict per compile:
    kernel, label, dtype, cc, ok, shared (bytes), num_warps, error."""
    results = []
    for cc, dtype in targets:
        for spec in compile_specs(dtype):
            row = dict(kernel=spec.name, label=spec.label, dtype=dtype, cc=cc, ok=False, shared=None)
            row.update(num_warps=spec.options.get("num_warps", 4), error="")
            try:
                compiled = compile_spec(spec, cc)
                row.update(ok=True, shared=compiled.metadata.shared)
            except Exception as exc:  # report every failure, not only the first
                row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            results.append(row)
    return results


# --- What the compiler made -----------------------------------------------------------------------
# Per streaming multiprocessor (SM), from NVIDIA's CUDA C++ Programming Guide (compute capability table):
# resident warps and programs (blocks), 32-bit registers, and shared memory one SM can hand out.
SM_LIMITS = {
    75: dict(gpu="T4 (sm_75)", max_warps=32, max_programs=16, registers=65536, shared=64 * 1024),
    90: dict(gpu="H100/H200 (sm_90)", max_warps=64, max_programs=32, registers=65536, shared=227 * 1024),
}
TEACHING_KERNELS = ("add_kernel", "rmsnorm_fused_kernel", "rmsnorm_inv_rms_kernel", "rmsnorm_scale_kernel",
                    "matmul_kernel")  # chapters 2, 3 and 4
TEACHING_ROW = 1024  # the row kernels at Qwen3-0.6B's hidden size
# PTX opcode prefixes -> what the instructions do (a program's work, in the words chapters 2-4 use)
INSTRUCTION_CLASSES = {
    "tensor-core mma": ("mma.", "wgmma.mma_async"),  # the multiplies: not wgmma's fence, commit and wait lines
    "fma": ("fma.",),
    "global loads": ("ld.global",),
    "global -> shared copies": ("cp.async",),  # sm_80 on: a load that lands in shared memory, asynchronously
    "global stores": ("st.global",),
    "shared loads": ("ld.shared", "ldmatrix"),
    "shared stores": ("st.shared", "stmatrix"),
}
_OPCODE = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)", re.M)


def instruction_mix(ptx: str) -> dict:
    """Count the PTX instructions of each class in ``INSTRUCTION_CLASSES`` (static counts: each
    instruction once, however often a loop runs it), and the widest global load (``v4``: 16 bytes, eight
    fp16 elements per instruction; "-" where every global load is a ``cp.async`` copy)."""
    opcodes = Counter(m.group(1) for m in _OPCODE.finditer(ptx))
    mix = {name: sum(n for op, n in opcodes.items() if op.startswith(prefixes))
           for name, prefixes in INSTRUCTION_CLASSES.items()}
    widths = [int(w) for op in opcodes if op.startswith("ld.global") for w in re.findall(r"\.v(\d)", op)]
    mix["widest global load"] = (f"v{max(widths)}" if widths else "scalar") if mix["global loads"] else "-"
    return mix


def _ptxas(arch: int) -> str:
    """The path of the ptxas that Triton ships for compute capability ``arch``."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        return get_ptxas(arch).path
    except (ImportError, AttributeError):  # an older layout
        from triton import knobs

        return knobs.nvidia.ptxas.path


def ptxas_usage(ptx: str) -> dict:
    """What ptxas (the assembler Triton ships) allocates for the PTX's target: registers per thread, and the
    bytes per thread spilled to local memory (device memory, cached) when the registers do not suffice."""
    target = re.search(r"^\.target\s+(sm_\w+)", ptx, re.M)
    if target is None:
        raise ValueError("ptx: no .target line")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(ptx)
        arch = int(re.sub(r"\D", "", target.group(1)))  # sm_90a -> 90
        done = subprocess.run([_ptxas(arch), "-v", f"--gpu-name={target.group(1)}", str(path),
                               "-o", str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True)
    report = done.stdout + done.stderr
    used = re.search(r"Used (\d+) registers", report)
    if done.returncode != 0 or used is None:
        raise RuntimeError(f"ptxas failed on {target.group(1)}: {(done.stderr or done.stdout)[-2000:]}")
    spills = re.search(r"(\d+) bytes spill stores", report)
    return {"registers": int(used.group(1)), "spill stores": int(spills.group(1)) if spills else 0}


def programs_per_sm(registers: int, shared: int, num_warps: int, cc: int) -> tuple[int, str]:
    """How many programs of a kernel one SM can hold at once, and which limit sets it (warps, programs,
    registers or shared memory). Registers are handed out per warp in blocks of 256 (8 per thread)."""
    limits = SM_LIMITS[cc]
    per_warp = -(-registers // 8) * 8 * 32
    bounds = {"warps": limits["max_warps"] // num_warps, "programs": limits["max_programs"],
              "registers": limits["registers"] // (per_warp * num_warps),
              "shared memory": limits["shared"] // shared if shared else limits["max_programs"]}
    limit = min(bounds, key=bounds.get)
    return bounds[limit], limit


UNIT_STRIDES = {matmul_kernel: ("stride_ak", "stride_bk")}  # a [M, K] row-major, b = w.t(): K is contiguous


def _as_launched(spec: CompileSpec) -> CompileSpec:
    """The spec as Triton's JIT specialises it at the model's shapes: a stride equal to 1 becomes a constant."""
    ones = UNIT_STRIDES.get(spec.kernel, ())
    signature = {arg: "constexpr" if arg in ones else t for arg, t in spec.signature.items()}
    return replace(spec, signature=signature, constexprs={**spec.constexprs, **dict.fromkeys(ones, 1)})


def compiler_table(ccs=tuple(SM_LIMITS), kernels=TEACHING_KERNELS, dtype: str = "fp16",
                   with_ptx: bool = False) -> list[dict]:
    """What the compiler made of ``kernels`` (row kernels at ``TEACHING_ROW`` columns, the matmul in every
    tile) for each compute capability in ``ccs``, specialised as the JIT does at the model's shapes (sizes
    and strides multiples of 16, unit strides constant): one dict per kernel, configuration and target, with
    the PTX itself under "ptx" when ``with_ptx``. The kernels compile at once, in threads (Triton's compiler
    releases the GIL, and caches them on disk), and so does ptxas, a process per kernel."""
    block = row_block_size(TEACHING_ROW)
    specs = [s for s in compile_specs(dtype) if s.name in kernels
             and (not s.label.startswith("BLOCK_SIZE=") or s.kernel is add_kernel or s.label == f"BLOCK_SIZE={block}")]
    jobs = [(spec, cc) for cc in ccs for spec in specs]

    def build(job):
        spec, cc = job
        compiled = compile_spec(_as_launched(spec), cc, divisible_ints=True)  # as at the model's shapes
        ptx = compiled.asm["ptx"]
        return spec, cc, compiled, ptx, ptxas_usage(ptx)

    with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        built = list(pool.map(build, jobs))
    rows = []
    for spec, cc, compiled, ptx, usage in built:
        warps = spec.options.get("num_warps", 4)
        programs, limit = programs_per_sm(usage["registers"], compiled.metadata.shared, warps, cc)
        rows.append(dict(kernel=spec.name, label=spec.label, cc=cc, gpu=SM_LIMITS[cc]["gpu"], num_warps=warps,
                         registers=usage["registers"], **{"spill stores": usage["spill stores"]},
                         shared=compiled.metadata.shared, programs_per_sm=programs, limited_by=limit,
                         **instruction_mix(ptx), **({"ptx": ptx} if with_ptx else {})))
    return rows


def ptx_text(kernel: str, label: str, cc: int, dtype: str = "fp16") -> str:
    """The PTX of one teaching kernel configuration (``compiler_table``'s kernel and label) for ``cc``,
    specialised as at the model's shapes."""
    specs = {(s.name, s.label): s for s in compile_specs(dtype)}
    if (kernel, label) not in specs:
        known = sorted(label_ for name, label_ in specs if name == kernel)
        raise ValueError(f"kernel, label: no spec {kernel!r} {label!r}; labels of {kernel!r}: {known}")
    if cc not in SM_LIMITS:
        raise ValueError(f"cc must be one of {sorted(SM_LIMITS)}, got {cc!r}")
    return compile_spec(_as_launched(specs[kernel, label]), cc, divisible_ints=True).asm["ptx"]


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--ptx-text"]:  # --ptx-text KERNEL LABEL CC: one kernel's PTX
        if len(args) != 4:
            raise SystemExit("usage: python -m slower_kernels.aot --ptx-text KERNEL LABEL CC")
        print(ptx_text(args[1], args[2], int(args[3])))
    else:
        print(json.dumps(compiler_table(with_ptx="--with-text" in args) if "--ptx" in args else compile_report(),
                         indent=1))
