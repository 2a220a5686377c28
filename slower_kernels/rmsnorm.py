"""RMSNorm over the last dim, fused (one launch) and deliberately un-fused (two launches).

Semantics are those of transformers' ``Qwen3RMSNorm``: the statistics in fp32, the normalised row
cast back to the input dtype, and only then multiplied by the weight (in the input dtype):

    y = weight * (x_fp32 * rsqrt(mean(x_fp32 ** 2) + eps)).to(x.dtype)
"""

import torch
import triton
import triton.language as tl

from ._checks import as_rows, check_like, check_number, check_row, check_shape, check_tensor
from .configs import row_block_size, row_num_warps
from .launches import record


@triton.jit
def rmsnorm_fused_kernel(
    x_ptr,  # input rows [n_rows, n_cols], last dim contiguous
    w_ptr,  # weight [n_cols]
    out_ptr,  # output rows [n_rows, n_cols], contiguous
    n_cols,  # length of a row (the hidden size)
    stride_xm,  # elements between two rows of x
    stride_om,  # elements between two rows of out
    eps,  # added to the mean square before the square root
    BLOCK_SIZE: tl.constexpr,  # next power of two >= n_cols: one whole row per program
):
    """One program per row: y = w * (x * rsqrt(sum(x^2) / n_cols + eps)), x read once, y written once."""
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # --- statistics in fp32 (masked columns load 0 and add nothing to the sum)
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    # --- normalise, cast to the input dtype, then scale by the weight in that dtype (as HF does)
    x_hat = (x * inv_rms).to(out_ptr.dtype.element_ty)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(out_ptr + row * stride_om + cols, w * x_hat, mask=mask)


@triton.jit
def rmsnorm_inv_rms_kernel(
    x_ptr,  # input rows [n_rows, n_cols], last dim contiguous
    inv_rms_ptr,  # output: one fp32 inverse RMS per row [n_rows]
    n_cols,  # length of a row
    stride_xm,  # elements between two rows of x
    eps,  # added to the mean square before the square root
    BLOCK_SIZE: tl.constexpr,  # next power of two >= n_cols
):
    """Pass 1, one program per row: inv_rms[row] = rsqrt(sum(x^2) / n_cols + eps)."""
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * stride_xm + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(inv_rms_ptr + row, tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps))


@triton.jit
def rmsnorm_scale_kernel(
    x_ptr,  # input rows [n_rows, n_cols], last dim contiguous (read a second time)
    w_ptr,  # weight [n_cols]
    inv_rms_ptr,  # fp32 inverse RMS per row, written by pass 1
    out_ptr,  # output rows [n_rows, n_cols], contiguous
    n_cols,  # length of a row
    stride_xm,  # elements between two rows of x
    stride_om,  # elements between two rows of out
    BLOCK_SIZE: tl.constexpr,  # next power of two >= n_cols
):
    """Pass 2, one program per row: y = w * (x * inv_rms[row])."""
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.load(inv_rms_ptr + row)
    x_hat = (x * inv_rms).to(out_ptr.dtype.element_ty)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(out_ptr + row * stride_om + cols, w * x_hat, mask=mask)


def _prepare(x: torch.Tensor, weight: torch.Tensor, eps) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Check the inputs; return x as 2-D rows with a contiguous last dim, the weight, and the output."""
    check_tensor(x, "x", min_ndim=1, dims="[..., hidden]")
    check_tensor(weight, "weight", ndim=1, dims="[hidden]")
    check_like(weight, "weight", x, "x")
    check_shape(weight, "weight", (x.shape[-1],), "[hidden] (the last dim of x)")
    check_row(x, "x")
    check_number(eps, "eps")
    rows = as_rows(x)  # a view, or a copy of x when it cannot be viewed as rows
    return rows, weight.contiguous(), torch.empty(rows.shape, dtype=x.dtype, device=x.device)


def rmsnorm_fused(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of x [..., hidden] in ONE launch, one program per row.

    Bytes (rows R, hidden H, element size e): reads x once (R*H*e) and the weight (H*e),
    writes y once (R*H*e): about 2*R*H*e.
    """
    rows, weight, out = _prepare(x, weight, eps)
    n_rows, n_cols = rows.shape
    BLOCK_SIZE = row_block_size(n_cols)
    record(rmsnorm_fused_kernel)
    rmsnorm_fused_kernel[(n_rows,)](
        rows, weight, out, n_cols, rows.stride(0), out.stride(0), float(eps),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=row_num_warps(BLOCK_SIZE),
    )  # fmt: skip
    return out.view(x.shape)


def rmsnorm_two_pass(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of x [..., hidden] in exactly TWO launches: the un-fused version, on purpose.

    Pass 1 reads x and writes each row's inverse RMS to an fp32 buffer in global memory;
    pass 2 reads x and that buffer again, scales by the weight, writes y.
    Bytes: pass 1 reads R*H*e, writes 4*R; pass 2 reads R*H*e + 4*R + H*e, writes R*H*e:
    about 3*R*H*e, x travels from memory twice.
    """
    rows, weight, out = _prepare(x, weight, eps)
    n_rows, n_cols = rows.shape
    BLOCK_SIZE = row_block_size(n_cols)
    num_warps = row_num_warps(BLOCK_SIZE)
    inv_rms = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    record(rmsnorm_inv_rms_kernel)
    rmsnorm_inv_rms_kernel[(n_rows,)](
        rows, inv_rms, n_cols, rows.stride(0), float(eps), BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps
    )
    record(rmsnorm_scale_kernel)
    rmsnorm_scale_kernel[(n_rows,)](
        rows, weight, inv_rms, out, n_cols, rows.stride(0), out.stride(0),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps,
    )  # fmt: skip
    return out.view(x.shape)
