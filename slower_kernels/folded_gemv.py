"""One row times a weight matrix, with what surrounds it in a decoder layer folded in: the decode step's projections.

``gemv`` (``slower_kernels.gemv``) reads the weights once; the small kernels between two projections (an RMSNorm,
a residual add, the SwiGLU, the argmax over the logits) each read and write a row of a few KiB, and cost a launch
each. Here they become the prologue or the epilogue of the projection that reads or writes that row:

* ``norm_weight``: RMSNorm of x first. Every program takes x's sum of squares itself (x is a row of a few KiB that
  the L2 cache serves to all of them) and normalises each chunk of x as it loads it, rounded as
  ``rmsnorm_fused`` rounds it;
* ``residual``: y = residual + x @ w.T, the product rounded to x's dtype before the add, as PyTorch's two steps;
* ``gated``: w holds gate's rows then up's ([2N, K], the fused gate/up weight); each program reads the same N rows
  of both and writes silu(gate) * up, rounded as ``swiglu_kernel``;
* ``argmax``: each program folds its logits into one int64 per program (the fp16 logit's bits ordered as an
  integer in the high half, the complement of its index in the low half) and ``atomic_max`` es it into a one-element
  tensor: the largest logit, and the first index among equal ones, as ``torch.argmax``. The caller resets that
  tensor to ``ARGMAX_EMPTY`` before the launch.

M = 1 only (one sequence at batch size 1). One program owns BLOCK_N rows of w and walks K in BLOCK_K chunks, the
products piling up element-wise in fp32 and summed once after the loop, as ``gemv``. The tile sizes come from
``decode_gemv_config``: a table measured on the GPU it runs on (``gemv_tuned.csv``, written by
``tools/tune_gemv.py``) when it has the shape, otherwise ``gemv``'s rule (``gemv_config``).
"""

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

import torch
import triton
import triton.language as tl

from ._checks import check_like, check_shape, check_tensor
from .gemv import INTERPRETER_MIN_PROGRAMS, MIN_PROGRAMS, gemv_config
from .launches import record

TUNED_TABLE = Path(__file__).with_name("gemv_tuned.csv")  # measured tiles: gpu, variant, N, K -> config
ARGMAX_EMPTY = -(2**63)  # the argmax key before any logit: smaller than every packed (logit, index)
VARIANTS = ("plain", "norm", "residual", "norm+gated", "norm+argmax")  # the prologue/epilogue sets in use


@dataclass(frozen=True)
class DecodeGemvConfig:
    """One launch configuration: a program computes BLOCK_N outputs (with ``gated``, from 2 x BLOCK_N rows of w)
    and walks K in BLOCK_K chunks, with ``num_warps`` warps and Triton's ``num_stages``; ``prefetch`` loads each
    chunk of w one step ahead in the kernel's own code (the first before the RMSNorm prologue)."""

    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 1
    prefetch: bool = False  # load each chunk of w one step ahead, the first before the prologue

    def __post_init__(self):
        if not isinstance(self.prefetch, bool):
            raise TypeError(f"prefetch must be a bool, got {type(self.prefetch).__name__}")
        for name, low, high in (("block_n", 1, 256), ("block_k", 16, 8192), ("num_warps", 1, 16),
                                ("num_stages", 1, 8)):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if not low <= value <= high or (name != "num_stages" and value & (value - 1)):
                kind = "an int" if name == "num_stages" else "a power of two"
                raise ValueError(f"{name} must be {kind} between {low} and {high}, got {value}")
        if self.block_n * self.block_k > 32768:
            raise ValueError(f"block_n * block_k must be at most 32768 fp32 accumulators, got "
                             f"{self.block_n} * {self.block_k} = {self.block_n * self.block_k}")

    @property
    def name(self) -> str:
        return f"n{self.block_n}_k{self.block_k}_w{self.num_warps}_s{self.num_stages}" + "_p" * self.prefetch


def decode_projections(hidden: int, intermediate: int, heads: int, kv_heads: int, head_dim: int,
                       vocab: int) -> dict[str, tuple[str, int, int]]:
    """name -> (variant, N, K): the projections of one decode step of ``OwnCacheModel`` at stage "fold", each with
    what is folded into it (the one list the tuner, the compile check and the chapter read)."""
    return {"q/k/v": ("norm", (heads + 2 * kv_heads) * head_dim, hidden),
            "o": ("residual", hidden, heads * head_dim),
            "gate/up": ("norm+gated", intermediate, hidden),
            "down": ("residual", hidden, intermediate),
            "lm_head": ("norm+argmax", vocab, hidden)}  # fmt: skip


def variant_flags(variant: str) -> dict:
    """decode_gemv_kernel's constexprs for a variant name: NORM, RESIDUAL, GATED, ARGMAX."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    parts = variant.split("+")
    return {flag: flag.lower() in parts for flag in ("NORM", "RESIDUAL", "GATED", "ARGMAX")}


def variant_name(norm: bool, residual: bool, gated: bool, argmax: bool) -> str:
    """The table's name for a set of prologue/epilogue options: "plain", "norm", "norm+gated", ..."""
    parts = [name for name, on in (("norm", norm), ("residual", residual), ("gated", gated), ("argmax", argmax)) if on]
    return "+".join(parts) or "plain"


@functools.cache
def tuned_table(path: Path = TUNED_TABLE) -> dict:
    """(gpu name, variant, N, K) -> DecodeGemvConfig, from the measured table (empty where there is no file)."""
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {(row["gpu"], row["variant"], int(row["N"]), int(row["K"])):
                DecodeGemvConfig(int(row["block_n"]), int(row["block_k"]), int(row["num_warps"]), int(row["num_stages"]),
                                 row["prefetch"] == "True")
                for row in csv.DictReader(f)}  # fmt: skip


def rule_config(N: int, K: int, min_programs: int = MIN_PROGRAMS) -> DecodeGemvConfig:
    """``gemv``'s tiles at M = 1 (``gemv_config``): the configuration of a shape no table has measured."""
    config = gemv_config(1, N, K, min_programs)
    return DecodeGemvConfig(config.block_n, config.block_k, config.num_warps)


def decode_gemv_config(N: int, K: int, variant: str, device: torch.device, tuned: bool = True) -> DecodeGemvConfig:
    """The tiles for N outputs over K on ``device``: the measured table's entry for this GPU, variant and shape when
    ``tuned`` and there is one, else ``rule_config`` (few, large programs in the interpreter)."""
    if device.type != "cuda":
        return rule_config(N, K, INTERPRETER_MIN_PROGRAMS)
    if tuned:
        found = tuned_table().get((torch.cuda.get_device_name(device), variant, N, K))
        if found is not None:
            return found
    return rule_config(N, K)


@triton.jit
def decode_gemv_kernel(
    x_ptr,  # x [K], contiguous: the input row (the residual stream, with NORM)
    norm_w_ptr,  # RMSNorm weight [K] (read with NORM)
    w_ptr,  # weight [N, K] (with GATED [2N, K]: gate's rows, then up's), last dim contiguous
    res_ptr,  # residual [N], contiguous (read with RESIDUAL)
    y_ptr,  # output [N], contiguous
    key_ptr,  # int64 [1]: the running packed (logit, -index) maximum (with ARGMAX)
    N,  # outputs
    K,  # the reduction dimension
    stride_wn,  # elements between two rows of w
    eps,  # RMSNorm's epsilon (with NORM)
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    NORM: tl.constexpr,
    RESIDUAL: tl.constexpr,
    GATED: tl.constexpr,
    ARGMAX: tl.constexpr,
    PREFETCH: tl.constexpr,  # load each chunk of w one step ahead (the first before the prologue)
):
    """y[n] = sum_k xn[k] * w[n, k] for this program's BLOCK_N outputs, xn = RMSNorm(x) with NORM, else x; then
    the epilogue: + residual[n] (RESIDUAL), silu(gate) * up (GATED), the argmax fold (ARGMAX)."""
    pid = tl.program_id(axis=0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows = (offs_n % N).to(tl.int64)  # rows past N wrap: every load in bounds; their results are not stored
    dtype = x_ptr.dtype.element_ty
    w_ptrs = w_ptr + rows[:, None] * stride_wn + offs_k[None, :]  # (BLOCK_N, BLOCK_K)
    if PREFETCH:  # the first chunk of w is on its way from memory while the prologue runs
        w_next = tl.load(w_ptrs, mask=(offs_k < K)[None, :], other=0.0)
        if GATED:
            u_next = tl.load(w_ptrs + N * stride_wn, mask=(offs_k < K)[None, :], other=0.0)
    # --- the prologue: x's sum of squares, over all of K (served by the L2 cache to every program)
    inv_rms = 1.0
    if NORM:
        squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            xs = tl.load(x_ptr + k0 + offs_k, mask=offs_k < K - k0, other=0.0).to(tl.float32)
            squares += xs * xs
        inv_rms = tl.rsqrt(tl.sum(squares, axis=0) / K + eps)
    # --- walk K: products pile up element-wise in fp32, the sum over K comes once, after the loop
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc_up = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)  # GATED only (dead code otherwise)
    for k0 in range(0, K, BLOCK_K):
        in_k = offs_k < K - k0
        x = tl.load(x_ptr + k0 + offs_k, mask=in_k, other=0.0)
        if NORM:  # rounded as rmsnorm_fused: the normalised x cast to the dtype, times the weight in the dtype
            x = tl.load(norm_w_ptr + k0 + offs_k, mask=in_k, other=0.0) * (x.to(tl.float32) * inv_rms).to(dtype)
        x = x.to(tl.float32)[None, :]
        if PREFETCH:  # this chunk arrived during the last step; the next one is asked for now (none past K)
            in_next = (offs_k < K - k0 - BLOCK_K)[None, :]
            w = w_next
            w_next = tl.load(w_ptrs + BLOCK_K, mask=in_next, other=0.0)
            if GATED:
                u = u_next
                u_next = tl.load(w_ptrs + N * stride_wn + BLOCK_K, mask=in_next, other=0.0)
        else:
            w = tl.load(w_ptrs, mask=in_k[None, :], other=0.0)
            if GATED:
                u = tl.load(w_ptrs + N * stride_wn, mask=in_k[None, :], other=0.0)
        acc += x * w.to(tl.float32)
        if GATED:
            acc_up += x * u.to(tl.float32)
        w_ptrs += BLOCK_K
    y = tl.sum(acc, axis=1).to(dtype)  # (BLOCK_N,), rounded as a projection's output
    in_n = offs_n < N
    # --- the epilogue
    if GATED:  # rounded as swiglu_kernel: silu(gate) in fp32 rounded, times up, rounded
        g = y.to(tl.float32)
        act = (g / (1.0 + tl.exp(-g))).to(dtype)
        y = (act.to(tl.float32) * tl.sum(acc_up, axis=1).to(dtype).to(tl.float32)).to(dtype)
    if RESIDUAL:  # PyTorch's fp16 add: exact in fp32, rounded once
        y = (y.to(tl.float32) + tl.load(res_ptr + offs_n, mask=in_n, other=0.0).to(tl.float32)).to(dtype)
    tl.store(y_ptr + offs_n, y, mask=in_n)
    if ARGMAX:
        # an fp32's bits, read as an int32, order like the float once the negatives' magnitude bits are flipped
        logit = tl.where(in_n, y.to(tl.float32), -float("inf"))
        bits = logit.to(tl.int32, bitcast=True)
        ordered = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
        packed = (ordered << 32) | (4294967295 - offs_n.to(tl.int64))  # ties: the smaller index is larger
        tl.atomic_max(key_ptr, tl.max(packed, axis=0))


def argmax_index(key: torch.Tensor) -> torch.Tensor:
    """The index that ``decode_gemv(..., argmax_key=key)`` folded into ``key`` (an int64 tensor, any shape)."""
    return 0xFFFFFFFF - (key & 0xFFFFFFFF)


def decode_gemv(
    x: torch.Tensor,
    w: torch.Tensor,
    *,
    norm_weight: torch.Tensor | None = None,
    eps: float = 1e-6,
    residual: torch.Tensor | None = None,
    gated: bool = False,
    argmax_key: torch.Tensor | None = None,
    config: DecodeGemvConfig | None = None,
    tuned: bool = True,
) -> torch.Tensor:
    """y = x @ w.T for one row x [..., K] (its leading dims multiply to 1), w [N, K] (gated: [2N, K]) -> y [..., N],
    with the options the module's docstring describes. ONE launch. ``config``: the tiles (default
    ``decode_gemv_config``, from the measured table when ``tuned``).
    Bytes: w once (N * K * e, twice that with gated), x once per program from the L2 cache, y written once."""
    check_tensor(x, "x", min_ndim=1, dims="[..., K] with one row")
    check_tensor(w, "w", ndim=2, dims="[N, K]")
    check_like(w, "w", x, "x")
    rows, K = w.shape
    if x.shape[:-1].numel() != 1:
        raise ValueError(f"x must hold one row (leading dims multiplying to 1), got shape {tuple(x.shape)}: "
                         "use slower_kernels.gemv for more rows")
    if x.shape[-1] != K:
        raise ValueError(f"x must have a last dim of K = w.shape[1] = {K}, got {x.shape[-1]}")
    if w.stride(1) != 1:
        raise ValueError(f"w must have a contiguous last dim (stride 1, the nn.Linear layout), got strides {w.stride()}")
    if gated and rows % 2:
        raise ValueError(f"w must have an even number of rows with gated=True (gate's, then up's), got {rows}")
    N = rows // 2 if gated else rows
    if norm_weight is not None:
        check_tensor(norm_weight, "norm_weight", ndim=1, dims="[K]")
        check_like(norm_weight, "norm_weight", x, "x")
        check_shape(norm_weight, "norm_weight", (K,), "[K] (K = w.shape[1])")
    if residual is not None:
        check_tensor(residual, "residual", min_ndim=1, dims="[..., N]")
        check_like(residual, "residual", x, "x")
        if residual.numel() != N:
            raise ValueError(f"residual must hold N = {N} elements (one row of the output), got shape "
                             f"{tuple(residual.shape)}")
    if argmax_key is not None:
        if not isinstance(argmax_key, torch.Tensor) or argmax_key.dtype != torch.int64 or argmax_key.numel() != 1:
            raise TypeError("argmax_key must be a one-element int64 tensor (reset to ARGMAX_EMPTY before the call)")
        if argmax_key.device != x.device:
            raise ValueError(f"argmax_key is on {argmax_key.device} but x is on {x.device}: use one device")
    variant = variant_name(norm_weight is not None, residual is not None, gated, argmax_key is not None)
    if config is None:
        config = decode_gemv_config(N, K, variant, x.device, tuned)
    elif not isinstance(config, DecodeGemvConfig):
        raise TypeError(f"config must be a DecodeGemvConfig or None, got {type(config).__name__}")
    x_row = x.reshape(K).contiguous()
    y = torch.empty(N, dtype=x.dtype, device=x.device)
    res = residual.reshape(N).contiguous() if residual is not None else None
    record(decode_gemv_kernel)
    decode_gemv_kernel[(triton.cdiv(N, config.block_n),)](
        x_row, norm_weight, w, res, y, argmax_key, N, K, w.stride(0), float(eps),
        BLOCK_N=config.block_n, BLOCK_K=config.block_k, NORM=norm_weight is not None, RESIDUAL=residual is not None,
        GATED=gated, ARGMAX=argmax_key is not None, PREFETCH=config.prefetch, num_warps=config.num_warps,
        num_stages=config.num_stages,
    )  # fmt: skip
    return y.view(*x.shape[:-1], N)
