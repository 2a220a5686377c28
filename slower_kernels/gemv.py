"""Matrix-vector products for decoding (M = 1 and small M), and the projections built on them.

At batch size 1 a decode step multiplies ONE row of activations by every weight matrix of the
model: y = x @ w.T with x [1, K] and w [N, K]. Each weight element is used once, for one
multiply-add, so the time is the time to read w from memory (2 bytes per element in fp16): the
kernel is memory-bound, and a tiled matmul (``slower_kernels.matmul``) wastes its BLOCK_M rows on one real
row. ``gemv`` is written for bandwidth instead:

* one program owns BLOCK_N rows of w (BLOCK_N outputs) and walks K in BLOCK_K chunks. w is read in
  place in the nn.Linear layout [N, K]: its contiguous dim K is the fast dim of every load, so a
  warp reads long contiguous runs of each row (16-byte vectors, full cache lines);
* the chunk of x (all M rows, [BLOCK_M, BLOCK_K]) is loaded once per step and reused for the
  BLOCK_N rows of w; each w element is reused for the M rows of x;
* products accumulate in a [BLOCK_M, BLOCK_N, BLOCK_K] fp32 tile, element by element, and the sum
  over K happens once, after the loop (no cross-thread reduction inside it);
* the bias (if any) is added in fp32 before the single cast to the output dtype;
* ``gemv_config`` shrinks BLOCK_N until there are at least ``MIN_PROGRAMS`` programs, down to one
  row of w per program, so even N = 1024 gives every SM of an H200 (132) or a T4 (40) several
  programs. That is why there is no split-K here: it would add a second launch (a reduction over
  an fp32 workspace) to save a fraction of a microsecond on these shapes. ONE launch, always, and
  no atomics: the result is deterministic.

Above ``GEMV_MAX_M`` rows the tile of fp32 accumulators no longer fits the registers with useful
BLOCK_N and BLOCK_K, and a tiled matmul reuses weights better: ``gemv`` refuses such inputs and
points to ``slower_kernels.matmul``; the modules ``GemvLinear`` and ``FusedLinear`` switch to it.
"""

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import nn

from ._checks import as_rows, check_like, check_shape, check_tensor
from .launches import record
from .matmul import linear

GEMV_MAX_M = 16  # most rows of x that gemv accepts; beyond it use slower_kernels.matmul / slower_kernels.linear
TILE_ELEMENTS = 8192  # fp32 accumulators per program: 64 registers per thread at 4 warps
MIN_BLOCK_K, MAX_BLOCK_K = 64, 4096  # a K chunk: >= 128 bytes of a row in fp16, at most 8 KiB
MIN_PROGRAMS = 1024  # enough programs to fill the GPU: ~8 per SM on an H200 (132 SMs), ~25 on a T4
INTERPRETER_MIN_PROGRAMS = 4  # the interpreter runs programs one after another: fewer, larger ones are faster
_TILE_LIMIT = 4 * TILE_ELEMENTS  # largest tile a hand-made GemvConfig may ask for


@dataclass(frozen=True)
class GemvConfig:
    """One gemv launch configuration: a program computes BLOCK_M x BLOCK_N outputs, K in BLOCK_K chunks."""

    block_m: int  # rows of x per program: all of them, the next power of two >= M
    block_n: int  # rows of w (outputs) per program
    block_k: int  # chunk of K loaded per step
    num_warps: int  # warps (32 threads each) per program

    def __post_init__(self):
        for name, low, high in (("block_m", 1, GEMV_MAX_M), ("block_n", 1, 8192), ("block_k", 16, 8192),
                                ("num_warps", 1, 16)):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
            if not (low <= value <= high and value & (value - 1) == 0):
                raise ValueError(f"{name} must be a power of two between {low} and {high}, got {value}")
        if self.block_m * self.block_n * self.block_k > _TILE_LIMIT:
            raise ValueError(
                f"block_m * block_n * block_k must be at most {_TILE_LIMIT} fp32 accumulators, got "
                f"{self.block_m} * {self.block_n} * {self.block_k} = {self.block_m * self.block_n * self.block_k}"
            )

    @property
    def name(self) -> str:
        return f"m{self.block_m}_n{self.block_n}_k{self.block_k}_w{self.num_warps}"


def gemv_config(M: int, N: int, K: int, min_programs: int = MIN_PROGRAMS) -> GemvConfig:
    """The tile sizes gemv uses for x [M, K] @ w[N, K].T, from the shape alone.

    1. BLOCK_M = next power of two >= M: every program holds all rows of x.
    2. The program's tile holds TILE_ELEMENTS fp32 accumulators. BLOCK_K = TILE_ELEMENTS / BLOCK_M**2,
       kept in [MIN_BLOCK_K, MAX_BLOCK_K] and no longer than K needs, and BLOCK_N takes the rest:
       BLOCK_N ~ BLOCK_M, so an element of x is reused about as often (BLOCK_N rows of w) as an
       element of w (BLOCK_M rows of x). At M = 1 this gives long rows: 8 x 1024 at K = 1024.
    3. Halve BLOCK_N (down to 1) until there are ``min_programs`` programs (MIN_PROGRAMS): small N still
       fills the GPU. ``gemv`` asks for INTERPRETER_MIN_PROGRAMS on the CPU, where programs run one by one.
    4. num_warps: one warp per 512 accumulators (16 per thread), at most 4.

    M = 1: lm_head (N 151936, K 1024) -> m1_n8_k1024_w4, 18992 programs; q/k/v/o and down_proj
    (N 1024-2048) -> one or two rows per program, 1024 programs.
    """
    block_m = triton.next_power_of_2(M)
    block_k = min(max(TILE_ELEMENTS // block_m**2, MIN_BLOCK_K), MAX_BLOCK_K)
    block_k = min(block_k, max(16, triton.next_power_of_2(K)))
    block_n = TILE_ELEMENTS // (block_m * block_k)
    while block_n > 1 and triton.cdiv(N, block_n) < min_programs:
        block_n //= 2
    num_warps = min(4, max(1, block_m * block_n * block_k // 512))
    return GemvConfig(block_m, block_n, block_k, num_warps)


@triton.jit
def gemv_kernel(
    x_ptr,  # x [M, K], last dim contiguous
    w_ptr,  # w [N, K], last dim contiguous (the nn.Linear layout)
    b_ptr,  # bias [N] (any pointer when HAS_BIAS is False: it is not read)
    y_ptr,  # y [M, N], the output, contiguous
    M,  # rows of x and y (1 <= M <= BLOCK_M)
    N,  # rows of w, columns of y
    K,  # the reduction dimension
    stride_xm,  # elements between two rows of x
    stride_wn,  # elements between two rows of w
    stride_ym,  # elements between two rows of y
    BLOCK_M: tl.constexpr,  # rows of x per program: all of them (power of two >= M)
    BLOCK_N: tl.constexpr,  # rows of w (outputs) per program
    BLOCK_K: tl.constexpr,  # chunk of K loaded per step
    HAS_BIAS: tl.constexpr,  # add b[n] to every row of y
):
    """y[m, n] = sum_k x[m, k] * w[n, k] (+ b[n]) for the BLOCK_N outputs n of this program, fp32 accumulation."""
    pid = tl.program_id(axis=0)
    # --- this program's rows of w, all rows of x. Out-of-range rows wrap around (% N, % M) so that
    # every load is in bounds and the loads need a mask on K only; those results are never stored.
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rows_x = offs_m % M
    rows_w = (offs_n % N).to(tl.int64)  # 64-bit offsets: N * stride_wn may pass 2**31 elements
    # The tiles are loaded as 3-D blocks that broadcast straight into the accumulator: the compiler
    # then gives w's load the accumulator's own layout (16-byte vectors along K per thread), and w
    # never moves between threads or through shared memory (a 2-D load followed by w[None] does).
    x_ptrs = x_ptr + rows_x[:, None, None] * stride_xm + offs_k[None, None, :]  # (BLOCK_M, 1, BLOCK_K)
    w_ptrs = w_ptr + rows_w[None, :, None] * stride_wn + offs_k[None, None, :]  # (1, BLOCK_N, BLOCK_K)
    # --- walk K: products pile up element-wise in fp32, the sum over K comes once, after the loop
    acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        in_k = offs_k[None, None, :] < K - k0  # the ragged last chunk loads zeros
        x = tl.load(x_ptrs, mask=in_k, other=0.0).to(tl.float32)  # once per chunk, for all BLOCK_N rows
        w = tl.load(w_ptrs, mask=in_k, other=0.0).to(tl.float32)  # each element read once, used M times
        acc += x * w  # (BLOCK_M, BLOCK_N, BLOCK_K)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    y = tl.sum(acc, axis=2)  # (BLOCK_M, BLOCK_N)
    if HAS_BIAS:
        y += tl.load(b_ptr + offs_n % N).to(tl.float32)[None, :]
    # --- one cast to the output dtype, one store
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def gemv(
    x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, config: GemvConfig | None = None
) -> torch.Tensor:
    """y = x @ w.T (+ bias) for x [..., K] with at most GEMV_MAX_M (16) rows, w [N, K] -> y [..., N].

    ONE launch (``gemv_kernel``), no atomics, no workspace. fp32 accumulation, y in x's dtype.
    w is read in place (no transpose, no copy): its last dim must be contiguous (stride 1), as an
    nn.Linear weight is; its row stride may be anything (e.g. a slice of rows of a larger weight).
    x's leading dims are flattened into M rows (a view when they can be; otherwise, or when its last
    dim is strided, one small PyTorch copy of x); a bias that is not contiguous is copied too.
    ``config``: tile sizes; default ``gemv_config(M, N, K)`` (with INTERPRETER_MIN_PROGRAMS in the
    interpreter).
    Bytes (element size e): w once (N*K*e), x once per program from cache (M*K*e from memory),
    bias N*e, y written once (M*N*e): about N*K*e at small M. FLOPs: 2*M*N*K.
    """
    check_tensor(x, "x", min_ndim=1, dims="[..., K]")
    check_tensor(w, "w", ndim=2, dims="[N, K]")
    check_like(w, "w", x, "x")
    N, K = w.shape
    if x.shape[-1] != K:
        raise ValueError(f"x must have a last dim of K = w.shape[1] = {K}, got {x.shape[-1]}")
    if bias is not None:
        check_tensor(bias, "bias", ndim=1, dims="[N]")
        check_like(bias, "bias", x, "x")
        check_shape(bias, "bias", (N,), "[N] (N = w.shape[0])")
    if w.stride(1) != 1:
        raise ValueError(
            f"w must have a contiguous last dim (stride 1, the nn.Linear layout [N, K]), got strides {w.stride()}"
        )
    if N == 0 or K == 0:
        raise ValueError(f"w must have at least one row and one column, got shape {tuple(w.shape)}")
    M = x.shape[:-1].numel()
    if not 1 <= M <= GEMV_MAX_M:
        raise ValueError(
            f"x must have between 1 and {GEMV_MAX_M} rows (the product of its leading dims) for gemv, got {M}: "
            "use slower_kernels.matmul (slower_kernels.linear) for more rows"
        )
    if config is None:
        config = gemv_config(M, N, K, MIN_PROGRAMS if x.is_cuda else INTERPRETER_MIN_PROGRAMS)
    elif not isinstance(config, GemvConfig):
        raise TypeError(f"config must be a GemvConfig or None, got {type(config).__name__}")
    elif config.block_m < M:
        raise ValueError(f"config.block_m must be at least M = {M} (x's rows), got {config.block_m}")
    rows = as_rows(x)  # (M, K), unit last stride
    if bias is not None:
        # The kernel reads bias[n] at b_ptr + n (unit stride). A strided or broadcast bias (a slice
        # [::2], an expand with stride 0) is copied: N elements, next to the N * K of w, and a copy
        # only then; a contiguous bias (every nn.Linear's) is passed as it is.
        bias = bias.contiguous()
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(N, config.block_n),)
    record(gemv_kernel)
    gemv_kernel[grid](
        rows, w, y if bias is None else bias, y, M, N, K, rows.stride(0), w.stride(0), y.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, HAS_BIAS=bias is not None,
        num_warps=config.num_warps,
    )  # fmt: skip
    return y.view(*x.shape[:-1], N)


def small_m_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """nn.Linear on x [..., in]: ``gemv`` for at most GEMV_MAX_M rows (decode), else ``slower_kernels.linear``
    (the tiled matmul, default tile; a prefill). One launch of this package's kernels either way
    (with a bias, ``slower_kernels.linear`` adds it with one PyTorch op). Each checks its own inputs.
    A weight whose last dim is not contiguous goes to ``slower_kernels.linear`` at any M (read in place)."""
    check_tensor(x, "x", min_ndim=1, dims="[..., in_features]")
    check_tensor(weight, "weight", ndim=2, dims="[out_features, in_features]")
    # gemv reads weight in place only in the nn.Linear layout (last dim contiguous); any other layout
    # (e.g. ``w.t()`` of a [in, out] tensor) goes to the tiled matmul, which reads it through its
    # strides with no copy, so that decode and prefill accept the same weights.
    if x.shape[:-1].numel() <= GEMV_MAX_M and weight.stride(1) == 1:
        return gemv(x, weight, bias)
    return linear(x, weight, bias)


class GemvLinear(nn.Module):
    """Drop-in for one nn.Linear (lm_head, o_proj, down_proj) through ``small_m_linear``.

    Holds the wrapped module's weight and bias Parameters themselves, not copies.
    """

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter | None = None):
        super().__init__()
        self.weight = weight  # [out_features, in_features], shared with the wrapped module
        self.register_parameter("bias", bias)  # bias may be None
        self.out_features, self.in_features = weight.shape

    @classmethod
    def from_linear(cls, lin: nn.Linear) -> "GemvLinear":
        """Wrap an ``nn.Linear``, sharing its weight and bias Parameters."""
        if not isinstance(lin, nn.Linear):
            raise TypeError(f"lin must be an nn.Linear, got {type(lin).__name__}")
        return cls(lin.weight, lin.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return small_m_linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class FusedLinear(nn.Module):
    """Several nn.Linear layers that read the same input (q, k, v; or gate, up) as ONE projection.

    Their weights are concatenated once, at construction, into one [sum(out_features), in_features]
    tensor; ``forward`` runs ONE ``small_m_linear`` on it and returns the outputs as a tuple of
    views (slices of the last dim of one result), in the order of the layers. That saves a launch
    per extra layer, and x is read once instead of once per layer.

    Memory: the concatenated weight is a copy, made once and kept (not one per step), so the
    originals stay untouched and putting them back restores the model exactly. It costs
    sum(out_features) * in_features elements: on Qwen3-0.6B in fp16, 8 MiB (q, k, v) + 12 MiB
    (gate, up) per layer, 560 MiB for 28 layers while both copies are alive. The concatenated
    weight and bias are non-persistent buffers: they follow ``.to()``, but are not Parameters of
    the model and not saved in its state_dict.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, out_features: tuple[int, ...]):
        super().__init__()
        check_tensor(weight, "weight", ndim=2, dims="[sum(out_features), in_features]")
        out_features = tuple(out_features)
        if not out_features or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in out_features):
            raise ValueError(f"out_features must be a non-empty sequence of positive ints, got {out_features}")
        check_shape(weight, "weight", (sum(out_features), weight.shape[1]), "[sum(out_features), in_features]")
        if bias is not None:
            check_tensor(bias, "bias", ndim=1, dims="[sum(out_features)]")
            check_like(bias, "bias", weight, "weight")
            check_shape(bias, "bias", (weight.shape[0],), "[sum(out_features)]")
        self.register_buffer("weight", weight, persistent=False)
        self.register_buffer("bias", bias, persistent=False)
        self.out_features = out_features
        self.in_features = weight.shape[1]

    @classmethod
    def from_linears(cls, *linears: nn.Linear) -> "FusedLinear":
        """Concatenate the weights (and biases) of ``linears``, which must share in_features, dtype and
        device. A layer without a bias contributes zeros to the fused bias when another has one."""
        if not linears:
            raise ValueError("from_linears needs at least one nn.Linear")
        for i, lin in enumerate(linears):
            if not isinstance(lin, nn.Linear):
                raise TypeError(f"linears[{i}] must be an nn.Linear, got {type(lin).__name__}")
            check_like(lin.weight, f"linears[{i}].weight", linears[0].weight, "linears[0].weight")
            if lin.in_features != linears[0].in_features:
                raise ValueError(
                    f"linears[{i}] has in_features = {lin.in_features} but linears[0] has "
                    f"{linears[0].in_features}: fused layers must read the same input"
                )
        with torch.no_grad():  # a plain tensor, not part of any autograd graph
            weight = torch.cat([lin.weight for lin in linears])  # (sum(out_features), in_features), a copy
            bias = None
            if any(lin.bias is not None for lin in linears):
                zeros = [torch.zeros_like(lin.weight[:, 0]) for lin in linears]
                bias = torch.cat([z if lin.bias is None else lin.bias for z, lin in zip(zeros, linears)])
        return cls(weight, bias, tuple(lin.out_features for lin in linears))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = small_m_linear(x, self.weight, self.bias)  # (..., sum(out_features)): ONE launch
        return y.split(self.out_features, dim=-1)  # views, in the order of the layers

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
