"""Numerically stable softmax over the last dim, one row per program."""

import torch
import triton
import triton.language as tl

from ._checks import as_rows, check_number, check_row, check_tensor
from .configs import row_block_size, row_num_warps
from .launches import record


@triton.jit
def softmax_kernel(
    x_ptr,  # input rows [n_rows, n_cols], last dim contiguous
    out_ptr,  # output rows [n_rows, n_cols], contiguous
    n_cols,  # length of a row
    stride_xm,  # elements between two rows of x
    stride_om,  # elements between two rows of out
    scale,  # multiplies x before the softmax (attention's 1/sqrt(D))
    BLOCK_SIZE: tl.constexpr,  # next power of two >= n_cols: one whole row per program
):
    """out = exp(s - max(s)) / sum(exp(s - max(s))) with s = scale * x, in fp32.

    Subtracting the row max keeps exp() from overflowing. A row that is all -inf (fully masked)
    gives zeros instead of 0/0 = NaN.
    """
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # --- load the row; padding columns are -inf so they add exp(-inf) = 0
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=-float("inf"))
    s = x.to(tl.float32) * scale
    # --- subtract the max; an all -inf row keeps max 0 so that s - max stays -inf, not NaN
    s_max = tl.max(s, axis=0)
    s_max = tl.where(s_max == -float("inf"), 0.0, s_max)
    num = tl.exp(s - s_max)
    den = tl.sum(num, axis=0)
    den = tl.where(den == 0.0, 1.0, den)  # all -inf: 0 / 1 = 0
    tl.store(out_ptr + row * stride_om + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """softmax(scale * x) over the last dim of x [..., n], fp32 math, output in x's dtype; 1 launch.

    Bytes: reads x once and writes the output once (2 * rows * n * e); x is copied first only
    when it cannot be viewed as rows with a contiguous last dim.
    """
    check_tensor(x, "x", min_ndim=1, dims="[..., n]")
    check_row(x, "x")
    check_number(scale, "scale")
    rows = as_rows(x)
    out = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    n_rows, n_cols = rows.shape
    BLOCK_SIZE = row_block_size(n_cols)
    record(softmax_kernel)
    softmax_kernel[(n_rows,)](
        rows, out, n_cols, rows.stride(0), out.stride(0), float(scale),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=row_num_warps(BLOCK_SIZE),
    )  # fmt: skip
    return out.view(x.shape)
