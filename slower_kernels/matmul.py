"""Tiled matrix multiplication, and nn.Linear built on it.

One program computes one BLOCK_M x BLOCK_N tile of C = A @ B, walking K in BLOCK_K chunks and
accumulating in fp32. A and B are addressed through their strides, so transposed or sliced views
(such as ``weight.t()``) are read in place, without a copy.
"""

import torch
import triton
import triton.language as tl

from ._checks import check_like, check_shape, check_tensor, check_tiles
from .launches import record


@triton.jit
def matmul_kernel(
    a_ptr,  # A [M, K]
    b_ptr,  # B [K, N]
    c_ptr,  # C [M, N], the output
    M,  # rows of A and C
    N,  # columns of B and C
    K,  # the reduction dimension
    stride_am, stride_ak,  # elements between consecutive rows / columns of A
    stride_bk, stride_bn,  # elements between consecutive rows / columns of B
    stride_cm, stride_cn,  # elements between consecutive rows / columns of C
    BLOCK_M: tl.constexpr,  # rows of the output tile
    BLOCK_N: tl.constexpr,  # columns of the output tile
    BLOCK_K: tl.constexpr,  # chunk of K loaded per step
):  # fmt: skip
    """C[m, n] = sum_k A[m, k] * B[k, n] for the tile (pid_m, pid_n), fp32 accumulation."""
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    # --- the tile's rows, columns, and the first K chunk
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    # --- walk K; out-of-range rows, columns and the ragged last chunk load zeros
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        if a.dtype == tl.float32:
            acc = tl.dot(a, b, acc, input_precision="ieee")  # exact fp32, not TF32
        else:
            acc = tl.dot(a, b, acc)  # fp16 inputs, fp32 accumulator
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # --- write the tile in the output dtype
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    block_m: int = 64,
    block_n: int = 64,
    block_k: int = 32,
    num_warps: int = 4,
    num_stages: int = 2,
) -> torch.Tensor:
    """a [M, K] @ b [K, N] -> [M, N] in the inputs' dtype; one program per output tile, 1 launch.

    a and b may be strided views (transposed, sliced): no copy is made. Tile sizes are powers of
    two in [16, 256] (see ``slower_kernels.TILE_CONFIGS``).
    Bytes: each program reads a BLOCK_M x K strip of a and a K x BLOCK_N strip of b, so a is read
    ceil(N / block_n) times and b ceil(M / block_m) times (caches soften this); C is written once.
    FLOPs: 2 * M * N * K.
    """
    check_tensor(a, "a", ndim=2, dims="[M, K]")
    check_tensor(b, "b", ndim=2, dims="[K, N]")
    check_like(b, "b", a, "a")
    (M, K), N = a.shape, b.shape[1]
    check_shape(b, "b", (K, N), "[K, N] (K = a.shape[1])")
    check_tiles(block_m, block_n, block_k, num_warps, num_stages)
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    record(matmul_kernel)
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return c


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, **tiles) -> torch.Tensor:
    """nn.Linear on x [..., in]: x @ weight[out, in].T (+ bias) -> [..., out], through ``matmul``.

    ``weight.t()`` is passed as a strided view (no copy). x's leading dims are flattened with
    ``reshape``: a view when they can be, otherwise one copy of x. The bias, if any, is added with
    one PyTorch op (Qwen3's projections have none). ``tiles``: matmul's block_m, block_n, block_k,
    num_warps, num_stages (e.g. ``**DEFAULT_TILE.kwargs()``).
    """
    check_tensor(x, "x", min_ndim=1, dims="[..., in_features]")
    check_tensor(weight, "weight", ndim=2, dims="[out_features, in_features]")
    check_like(weight, "weight", x, "x")
    out_features, in_features = weight.shape
    if x.shape[-1] != in_features:
        raise ValueError(f"x must have a last dim of in_features = {in_features}, got {x.shape[-1]}")
    if bias is not None:
        check_tensor(bias, "bias", ndim=1, dims="[out_features]")
        check_like(bias, "bias", x, "x")
        check_shape(bias, "bias", (out_features,), "[out_features]")
    out = matmul(x.reshape(-1, in_features), weight.t(), **tiles)
    if bias is not None:
        out += bias
    return out.view(*x.shape[:-1], out_features)
