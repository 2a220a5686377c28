"""Ahead-of-time compilation of every kernel, for a GPU we may not have (the T4 check).

``compile_specs(dtype)`` lists each @triton.jit kernel of the package with the argument types and
constexprs its launcher uses, in every tile configuration of ``TILE_CONFIGS`` (matmul) and a few row
lengths (row kernels). ``compile_spec(spec, cc)`` compiles one for ``GPUTarget("cuda", cc, 32)``:
Triton ships ptxas, so this works on a machine without a GPU, but not in the interpreter, which
replaces the compiler; run it in a process started with TRITON_INTERPRET=0:

    TRITON_INTERPRET=0 python -m kernels.aot      # JSON report: T4 (sm_75) and H100/H200 (sm_90)
"""

import json
from dataclasses import dataclass

import triton

from . import INTERPRET
from .add import add_kernel, empty_kernel
from .configs import ELEMENTWISE_BLOCK_SIZE, TILE_CONFIGS, row_block_size, row_num_warps
from .matmul import matmul_kernel
from .rmsnorm import rmsnorm_fused_kernel, rmsnorm_inv_rms_kernel, rmsnorm_scale_kernel
from .softmax import softmax_kernel

ROW_SIZES = (128, 1024, 8192)  # row lengths compiled for the row kernels (head dim, hidden, a long row)
T4_SHARED_MEMORY = 64 * 1024  # bytes of shared memory one block may use on sm_75
DEFAULT_TARGETS = ((75, "fp16"), (75, "fp32"), (90, "fp16"), (90, "fp32"))


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
}  # fmt: skip


def _spec(kernel, label: str, dtype: str, constexprs: dict, **options) -> CompileSpec:
    """The full signature in argument order: the types above, "constexpr" for the rest."""
    types = {arg: f"*{dtype}" if t == "*T" else t for arg, t in _ARG_TYPES[kernel].items()}
    signature = {arg: types.get(arg, "constexpr") for arg in kernel.arg_names}
    missing = {arg for arg, t in signature.items() if t == "constexpr" and arg not in constexprs}
    assert not missing, f"{kernel.fn.__name__}: no value for the constexprs {missing}"
    return CompileSpec(kernel, label, dtype, signature, constexprs, options)


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
    for tile in TILE_CONFIGS.values():
        blocks = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k)
        specs.append(
            _spec(matmul_kernel, tile.name, dtype, blocks, num_warps=tile.num_warps, num_stages=tile.num_stages)
        )
    return specs


def compile_spec(spec: CompileSpec, cc: int):
    """Compile one spec for ``GPUTarget("cuda", cc, 32)``; returns Triton's CompiledKernel
    (``.metadata.shared`` bytes of shared memory, ``.asm["ptx"]``, ``.asm["ttgir"]``, ...)."""
    if INTERPRET:
        raise RuntimeError(
            "kernels.aot needs Triton's compiler, which TRITON_INTERPRET=1 replaces: "
            "run it in a process started with TRITON_INTERPRET=0"
        )
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    # data pointers from PyTorch are 16-byte aligned: the hint the JIT gives them at run time
    pointers = [i for i, t in enumerate(spec.signature.values()) if t.startswith("*")]
    attrs = {(i,): [["tt.divisibility", 16]] for i in pointers}
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


if __name__ == "__main__":
    print(json.dumps(compile_report(), indent=1))
