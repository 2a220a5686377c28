"""Fused elementwise kernels of a Qwen3 decoder layer: SwiGLU, residual add + RMSNorm, RoPE (+ q/k norm).

Each replaces a chain of PyTorch ops (one launch and one trip through memory each) by ONE launch
that reads its inputs once and writes its outputs once. The math is done in fp32 inside the kernel
and the results are stored in the input dtype, rounded where transformers' Qwen3 modules round, so
that a fast model can swap them in:

    swiglu(gate, up)              = act_fn(gate) * up              Qwen3MLP, before down_proj
    add_rmsnorm(x, residual, w)   = (norm(residual + x), residual + x)   Qwen3DecoderLayer
    rope(q, k, cos, sin)          = apply_rotary_pos_emb(q, k, cos, sin)  Qwen3Attention
    rmsnorm_rope(q, k, wq, wk, ..) = apply_rotary_pos_emb(q_norm(q), k_norm(k), cos, sin)

Inputs are addressed through their strides wherever a layout can arise in the model (rows of a
sliced or transposed view, the gate and up halves of one fused projection, q and k as transformers
hands them over: [B, S, H, D] buffers viewed as [B, H, S, D]); a copy is made only when a tensor's
last dim is not contiguous or its leading dims cannot be flattened into rows.
"""

import torch
import triton
import triton.language as tl

from ._checks import as_rows, check_like, check_number, check_row, check_shape, check_tensor
from .configs import ELEMENTWISE_BLOCK_SIZE, row_block_size, row_num_warps
from .launches import record

# ------------------------------------------------------------------------------------------------
# SwiGLU

SWIGLU_MIN_PROGRAMS = 128  # about one program per SM of an H100/H200 (132 SMs); a T4 has 40
SWIGLU_MIN_BLOCK_SIZE = 256  # one warp, 8 elements (16 bytes of fp16) per thread


def swiglu_block_size(n_rows: int, n_cols: int) -> int:
    """Elements of one row handled by one ``swiglu_kernel`` program: a power of two in [256, 1024].

    Start from ``ELEMENTWISE_BLOCK_SIZE`` (1024) and halve it while the grid would have fewer than
    ``SWIGLU_MIN_PROGRAMS`` programs, so that a decode step (one row of 3,072 on Qwen3-0.6B: 3
    programs of 1024) is spread over 12 SMs instead of 3; large inputs keep the big blocks.
    """
    block = ELEMENTWISE_BLOCK_SIZE
    while block > SWIGLU_MIN_BLOCK_SIZE and n_rows * triton.cdiv(n_cols, block) < SWIGLU_MIN_PROGRAMS:
        block //= 2
    return block


def swiglu_num_warps(block_size: int) -> int:
    """One warp per 256 elements: each thread loads 8 contiguous elements (16 bytes of fp16)."""
    return max(1, block_size // 256)


@triton.jit
def swiglu_kernel(
    gate_ptr,  # gate rows [n_rows, n_cols], last dim contiguous
    up_ptr,  # up rows [n_rows, n_cols], last dim contiguous
    out_ptr,  # output rows [n_rows, n_cols], contiguous
    n_cols,  # length of a row (the intermediate size)
    stride_gm,  # elements between two rows of gate (2 * n_cols when gate and up are one packed tensor)
    stride_um,  # elements between two rows of up
    stride_om,  # elements between two rows of out
    BLOCK_SIZE: tl.constexpr,  # elements of a row per program (swiglu_block_size)
):
    """out = silu(gate) * up for the BLOCK_SIZE columns (program_id(1)) of one row (program_id(0)).

    Rounded as transformers does: ``act_fn(gate)`` is a tensor of the input dtype (PyTorch computes
    silu(g) = g / (1 + exp(-g)) in fp32 and rounds it), multiplied by ``up`` in that dtype.
    """
    row = tl.program_id(axis=0)
    cols = tl.program_id(axis=1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    g = tl.load(gate_ptr + row * stride_gm + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + row * stride_um + cols, mask=mask, other=0.0).to(tl.float32)
    # --- silu in fp32, rounded to the input dtype (PyTorch's formula: exp(-g) overflows to inf -> -0)
    act = (g / (1.0 + tl.exp(-g))).to(out_ptr.dtype.element_ty)
    # --- the product of two fp16 values is exact in fp32, so one rounding gives PyTorch's fp16 product
    tl.store(out_ptr + row * stride_om + cols, (act.to(tl.float32) * u).to(out_ptr.dtype.element_ty), mask=mask)


def _swiglu_rows(gate: torch.Tensor, up: torch.Tensor, shape: tuple) -> torch.Tensor:
    """Launch ``swiglu_kernel`` on gate and up rows [R, I] (unit last stride); output of ``shape``."""
    n_rows, n_cols = gate.shape
    out = torch.empty((n_rows, n_cols), dtype=gate.dtype, device=gate.device)
    block = swiglu_block_size(n_rows, n_cols)
    record(swiglu_kernel)
    swiglu_kernel[(n_rows, triton.cdiv(n_cols, block))](
        gate, up, out, n_cols, gate.stride(0), up.stride(0), out.stride(0),
        BLOCK_SIZE=block, num_warps=swiglu_num_warps(block),
    )  # fmt: skip
    return out.view(shape)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for two tensors [..., I] of one shape, dtype and device; 1 launch.

    Replaces ``act_fn(gate_proj(x)) * up_proj(x)`` of ``Qwen3MLP`` (2 PyTorch kernels, and the
    silu output written and read back). Bytes: reads gate and up once, writes the output once:
    3 * R * I * e (rows R, element size e).
    """
    check_tensor(gate, "gate", min_ndim=1, dims="[..., intermediate]")
    check_tensor(up, "up", min_ndim=1, dims="[..., intermediate]")
    check_like(up, "up", gate, "gate")
    check_shape(up, "up", gate.shape, "the shape of gate")
    return _swiglu_rows(as_rows(gate), as_rows(up), gate.shape)


def swiglu_packed(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up where gate_up [..., 2 * I] holds gate (first I columns) and up (last I); 1 launch.

    This is the output of ONE fused gate/up projection (weights ``cat([gate_proj.weight,
    up_proj.weight])``): the kernel reads both halves in place, through the row stride 2 * I, with
    no copy. Returns [..., I]. Bytes as ``swiglu``: 3 * R * I * e.
    """
    check_tensor(gate_up, "gate_up", min_ndim=1, dims="[..., 2 * intermediate]")
    if gate_up.shape[-1] % 2:
        raise ValueError(
            f"gate_up must have an even last dim [..., 2 * intermediate] (gate, then up), got {gate_up.shape[-1]}"
        )
    rows = as_rows(gate_up)  # [R, 2I], a view when gate_up can be viewed as rows
    n_cols = rows.shape[1] // 2
    return _swiglu_rows(rows[:, :n_cols], rows[:, n_cols:], (*gate_up.shape[:-1], n_cols))


# ------------------------------------------------------------------------------------------------
# Residual add + RMSNorm


@triton.jit
def add_rmsnorm_kernel(
    x_ptr,  # sublayer output rows [n_rows, n_cols], last dim contiguous
    res_ptr,  # residual rows [n_rows, n_cols], last dim contiguous
    w_ptr,  # norm weight [n_cols]
    y_ptr,  # output: normalised rows [n_rows, n_cols]
    r_ptr,  # output: the new residual rows [n_rows, n_cols] (res_ptr itself for the in-place variant)
    n_cols,  # length of a row (the hidden size)
    stride_xm,  # elements between two rows of x
    stride_resm,  # elements between two rows of the residual
    stride_ym,  # elements between two rows of y
    stride_rm,  # elements between two rows of r
    eps,  # added to the mean square before the square root
    BLOCK_SIZE: tl.constexpr,  # next power of two >= n_cols: one whole row per program
):
    """One program per row: r = residual + x (rounded to the input dtype), y = Qwen3RMSNorm(r).

    The statistics are taken from r as stored (rounded), as transformers normalises the tensor
    ``residual + hidden_states``. The row is loaded and kept in registers before anything is
    stored, so r may overwrite the residual row it was computed from.
    """
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # --- the residual add, rounded to the input dtype like PyTorch's fp16 add
    x = tl.load(x_ptr + row * stride_xm + cols, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row * stride_resm + cols, mask=mask, other=0.0).to(tl.float32)
    r = (x + res).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * stride_rm + cols, r, mask=mask)
    # --- RMSNorm of r: statistics in fp32 (masked columns are 0), normalised row cast, times weight
    r = r.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(r * r, axis=0) / n_cols + eps)
    r_hat = (r * inv_rms).to(y_ptr.dtype.element_ty)
    w = tl.load(w_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride_ym + cols, w * r_hat, mask=mask)


def _add_rmsnorm(x, residual, weight, eps, r_rows: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``add_rmsnorm_kernel``; r goes to ``r_rows`` (residual's rows) or to new rows.

    Returns (y shaped like x, r as rows [R, hidden]).
    """
    x_rows, res_rows = as_rows(x), as_rows(residual)
    n_rows, n_cols = x_rows.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    r = torch.empty_like(y) if r_rows is None else r_rows
    BLOCK_SIZE = row_block_size(n_cols)
    record(add_rmsnorm_kernel)
    add_rmsnorm_kernel[(n_rows,)](
        x_rows, res_rows, weight, y, r, n_cols,
        x_rows.stride(0), res_rows.stride(0), y.stride(0), r.stride(0), float(eps),
        BLOCK_SIZE=BLOCK_SIZE, num_warps=row_num_warps(BLOCK_SIZE),
    )  # fmt: skip
    return y.view(x.shape), r


def _check_add_rmsnorm(x, residual, weight, eps) -> None:
    check_tensor(x, "x", min_ndim=1, dims="[..., hidden]")
    check_tensor(residual, "residual", min_ndim=1, dims="[..., hidden]")
    check_tensor(weight, "weight", ndim=1, dims="[hidden]")
    check_like(residual, "residual", x, "x")
    check_like(weight, "weight", x, "x")
    check_shape(residual, "residual", x.shape, "the shape of x")
    check_shape(weight, "weight", (x.shape[-1],), "[hidden] (the last dim of x)")
    check_row(x, "x")
    check_number(eps, "eps")


def add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, r) with r = residual + x and y = RMSNorm(r) (``Qwen3RMSNorm``), in ONE launch, one program per row.

    In ``Qwen3DecoderLayer``: ``r = residual + attn_out`` then ``post_attention_layernorm(r)``, and
    likewise ``residual + mlp_out`` then the next layer's ``input_layernorm``. x, residual [..., hidden],
    weight [hidden], all of one dtype. r is rounded to the input dtype before the norm reads it;
    y = weight * (r_fp32 * rsqrt(mean(r_fp32 ** 2) + eps)).to(dtype), as in ``slower_kernels/rmsnorm.py``.
    Returns new tensors; x and residual are not modified (see ``add_rmsnorm_`` for in place).
    Bytes: reads x, residual (2*R*H*e) and the weight (H*e), writes y and r (2*R*H*e): about
    4*R*H*e, against 5*R*H*e in 2 launches for PyTorch's add then ``rmsnorm_fused`` (and more for
    transformers' own chain of ops in Qwen3RMSNorm).
    """
    _check_add_rmsnorm(x, residual, weight, eps)
    y, r = _add_rmsnorm(x, residual, weight.contiguous(), eps, None)
    return y, r.view(x.shape)


def add_rmsnorm_(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """In-place ``add_rmsnorm``: writes r = residual + x INTO residual's storage; returns (y, residual).

    Saves allocating r: the residual stream is updated where it lives, as vLLM's
    ``fused_add_rms_norm`` does. residual must be viewable as rows [R, hidden] with a contiguous
    last dim (any row stride that keeps rows apart: not an expanded tensor), so that the kernel can
    write to it; other layouts raise ValueError. x may be any layout. x is not modified (unless it
    is residual itself, in which case residual becomes 2 * residual).
    """
    _check_add_rmsnorm(x, residual, weight, eps)
    if residual.stride(-1) != 1:
        raise ValueError(
            f"residual must have a contiguous last dim to be written in place, got strides {residual.stride()}"
        )
    try:
        res_rows = residual.view(-1, residual.shape[-1])
    except RuntimeError:
        raise ValueError(
            f"residual must be viewable as rows [R, hidden] to be written in place, got shape "
            f"{tuple(residual.shape)} with strides {residual.stride()}"
        ) from None
    if res_rows.shape[0] > 1 and res_rows.stride(0) < res_rows.shape[1]:
        # an expanded (broadcast) residual: its rows share memory, and every program would write its
        # row of r over the others (PyTorch refuses in-place writes to such a tensor too)
        raise ValueError(
            f"residual must not have rows that share memory (an expanded or broadcast tensor) to be written "
            f"in place, got shape {tuple(residual.shape)} with strides {residual.stride()}: pass "
            "residual.contiguous(), or use add_rmsnorm"
        )
    y, _ = _add_rmsnorm(x, res_rows, weight.contiguous(), eps, res_rows)
    return y, residual


# ------------------------------------------------------------------------------------------------
# RoPE, and q_norm / k_norm + RoPE


def rope_num_warps(block_half: int) -> int:
    """Warps of a RoPE program, which owns one head row (2 * block_half elements): one per 128 elements.

    head_dim 128 (Qwen3) gets one warp, 4 elements per thread; a bigger program would idle threads.
    """
    return max(1, block_half // 64)


@triton.jit
def rope_kernel(
    q_ptr,  # q [B, Hq, S, D], last dim contiguous
    k_ptr,  # k [B, Hkv, S, D], last dim contiguous
    cos_ptr,  # cos [B, S, D] (row stride 0 over B when broadcast from [1, S, D]), last dim contiguous
    sin_ptr,  # sin, same shape and strides as cos
    q_out_ptr,  # rotated q [B, Hq, S, D]
    k_out_ptr,  # rotated k [B, Hkv, S, D]
    seq_len,  # S
    n_q_heads,  # Hq: program heads [0, Hq) are q's, [Hq, Hq + Hkv) are k's
    half_dim,  # D // 2
    stride_qb, stride_qh, stride_qs,  # elements between consecutive batches / heads / positions of q
    stride_kb, stride_kh, stride_ks,  # ... of k
    stride_qob, stride_qoh, stride_qos,  # ... of q_out
    stride_kob, stride_koh, stride_kos,  # ... of k_out
    stride_cb, stride_cs,  # ... of cos and sin (batches, positions)
    BLOCK_HALF: tl.constexpr,  # next power of two >= half_dim
):  # fmt: skip
    """One program per (token, head) row x of length D = 2 * half_dim, q's heads and k's in one grid.

    x = [x1, x2] (two halves); rotate_half(x) = [-x2, x1]; out = x * cos + rotate_half(x) * sin:
        out1 = x1 * cos1 - x2 * sin1,   out2 = x2 * cos2 + x1 * sin2       (fp32, one rounding)
    """
    token = tl.program_id(axis=0)  # b * S + s
    head = tl.program_id(axis=1)
    b = token // seq_len
    s = token % seq_len
    # --- this program's row: a head of q, or of k
    if head < n_q_heads:
        x_row = q_ptr + b * stride_qb + head * stride_qh + s * stride_qs
        out_row = q_out_ptr + b * stride_qob + head * stride_qoh + s * stride_qos
    else:
        x_row = k_ptr + b * stride_kb + (head - n_q_heads) * stride_kh + s * stride_ks
        out_row = k_out_ptr + b * stride_kob + (head - n_q_heads) * stride_koh + s * stride_kos
    offs = tl.arange(0, BLOCK_HALF)
    mask = offs < half_dim
    x1 = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    # --- the token's cos and sin (both halves: transformers' tables repeat, but any table works)
    c_off = b * stride_cb + s * stride_cs
    cos1 = tl.load(cos_ptr + c_off + offs, mask=mask, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_ptr + c_off + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_ptr + c_off + offs, mask=mask, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_ptr + c_off + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    # --- rotate
    out_ty = q_out_ptr.dtype.element_ty
    tl.store(out_row + offs, (x1 * cos1 - x2 * sin1).to(out_ty), mask=mask)
    tl.store(out_row + half_dim + offs, (x2 * cos2 + x1 * sin2).to(out_ty), mask=mask)


@triton.jit
def rmsnorm_rope_kernel(
    q_ptr,  # q [B, Hq, S, D] before q_norm, last dim contiguous
    k_ptr,  # k [B, Hkv, S, D] before k_norm, last dim contiguous
    q_w_ptr,  # q_norm weight [D]
    k_w_ptr,  # k_norm weight [D]
    cos_ptr,  # cos [B, S, D] (row stride 0 over B when broadcast from [1, S, D]), last dim contiguous
    sin_ptr,  # sin, same shape and strides as cos
    q_out_ptr,  # normalised and rotated q [B, Hq, S, D]
    k_out_ptr,  # normalised and rotated k [B, Hkv, S, D]
    seq_len,  # S
    n_q_heads,  # Hq: program heads [0, Hq) are q's, [Hq, Hq + Hkv) are k's
    half_dim,  # D // 2
    stride_qb, stride_qh, stride_qs,  # elements between consecutive batches / heads / positions of q
    stride_kb, stride_kh, stride_ks,  # ... of k
    stride_qob, stride_qoh, stride_qos,  # ... of q_out
    stride_kob, stride_koh, stride_kos,  # ... of k_out
    stride_cb, stride_cs,  # ... of cos and sin (batches, positions)
    eps,  # added to the mean square before the square root
    BLOCK_HALF: tl.constexpr,  # next power of two >= half_dim
):  # fmt: skip
    """One program per (token, head) row x of length D: n = Qwen3RMSNorm(x), then RoPE of n.

    n = w * (x * rsqrt(mean(x^2) + eps)).to(dtype), rounded as q_norm / k_norm return it, then
    out1 = n1 * cos1 - n2 * sin1, out2 = n2 * cos2 + n1 * sin2 in fp32 (see ``rope_kernel``).
    The whole row is in registers, so the norm's statistics and the rotation's partner element
    (i +- D/2) cost no second read.
    """
    token = tl.program_id(axis=0)  # b * S + s
    head = tl.program_id(axis=1)
    b = token // seq_len
    s = token % seq_len
    # --- this program's row and norm weight: a head of q, or of k
    if head < n_q_heads:
        x_row = q_ptr + b * stride_qb + head * stride_qh + s * stride_qs
        out_row = q_out_ptr + b * stride_qob + head * stride_qoh + s * stride_qos
        w_row = q_w_ptr
    else:
        x_row = k_ptr + b * stride_kb + (head - n_q_heads) * stride_kh + s * stride_ks
        out_row = k_out_ptr + b * stride_kob + (head - n_q_heads) * stride_koh + s * stride_kos
        w_row = k_w_ptr
    offs = tl.arange(0, BLOCK_HALF)
    mask = offs < half_dim
    x1 = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    # --- RMSNorm over the head dim: statistics in fp32, normalised row cast, times the weight
    out_ty = q_out_ptr.dtype.element_ty
    inv_rms = tl.rsqrt((tl.sum(x1 * x1, axis=0) + tl.sum(x2 * x2, axis=0)) / (2 * half_dim) + eps)
    n1 = (tl.load(w_row + offs, mask=mask) * (x1 * inv_rms).to(out_ty)).to(tl.float32)
    n2 = (tl.load(w_row + half_dim + offs, mask=mask) * (x2 * inv_rms).to(out_ty)).to(tl.float32)
    # --- the token's cos and sin, then rotate
    c_off = b * stride_cb + s * stride_cs
    cos1 = tl.load(cos_ptr + c_off + offs, mask=mask, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_ptr + c_off + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_ptr + c_off + offs, mask=mask, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_ptr + c_off + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_row + offs, (n1 * cos1 - n2 * sin1).to(out_ty), mask=mask)
    tl.store(out_row + half_dim + offs, (n2 * cos2 + n1 * sin2).to(out_ty), mask=mask)


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    """t itself when its last dim is contiguous, else a contiguous copy (the kernels need stride 1 there)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _prepare_rope(q, k, cos, sin):
    """Check q, k, cos, sin; return them with unit last strides, cos and sin expanded to [B, S, D]."""
    check_tensor(q, "q", ndim=4, dims="[B, Hq, S, head_dim]")
    check_tensor(k, "k", ndim=4, dims="[B, Hkv, S, head_dim]")
    check_like(k, "k", q, "q")
    B, _, S, D = q.shape
    check_shape(k, "k", (B, k.shape[1], S, D), "[B, Hkv, S, head_dim] (batch, positions and head_dim of q)")
    if D % 2:
        raise ValueError(f"q must have an even head_dim (rotate_half splits it in two halves), got {D}")
    check_tensor(cos, "cos", ndim=3, dims="[B, S, head_dim]")
    check_tensor(sin, "sin", ndim=3, dims="[B, S, head_dim]")
    check_like(cos, "cos", q, "q")
    check_like(sin, "sin", q, "q")
    if tuple(cos.shape) not in ((B, S, D), (1, S, D)):
        raise ValueError(
            f"cos must have shape [B, S, head_dim] = {(B, S, D)} (or [1, S, head_dim]), got {tuple(cos.shape)}"
        )
    check_shape(sin, "sin", cos.shape, "the shape of cos")
    cos, sin = _unit_last(cos).expand(B, S, D), _unit_last(sin).expand(B, S, D)
    if cos.stride() != sin.stride():  # one pair of strides addresses both tables
        cos, sin = cos.contiguous(), sin.contiguous()
    return _unit_last(q), _unit_last(k), cos, sin


def _launch_rope(kernel, q, k, cos, sin, weights=(), scalars=()):
    """Launch ``kernel`` over (B * S tokens, Hq + Hkv heads); returns new (q_out, k_out).

    ``weights`` are rmsnorm_rope_kernel's arguments between k_ptr and cos_ptr (q_w, k_w),
    ``scalars`` the ones after the strides (eps); rope_kernel has neither.
    """
    B, Hq, S, D = q.shape
    Hkv = k.shape[1]
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)  # q's layout when it is dense, else contiguous
    BLOCK_HALF = row_block_size(D // 2)
    record(kernel)
    kernel[(B * S, Hq + Hkv)](
        q, k, *weights, cos, sin, q_out, k_out, S, Hq, D // 2,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        q_out.stride(0), q_out.stride(1), q_out.stride(2), k_out.stride(0), k_out.stride(1), k_out.stride(2),
        cos.stride(0), cos.stride(1), *scalars,
        BLOCK_HALF=BLOCK_HALF, num_warps=rope_num_warps(BLOCK_HALF),
    )  # fmt: skip
    return q_out, k_out


def rope(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary embeddings of q [B, Hq, S, D] and k [B, Hkv, S, D] in ONE launch (q's heads and k's).

    transformers' ``apply_rotary_pos_emb(q, k, cos, sin)`` (unsqueeze_dim=1): cos and sin are
    [B, S, D] (or [1, S, D], shared by the batch) in q's dtype, as ``Qwen3RotaryEmbedding`` returns
    them; out = x * cos + rotate_half(x) * sin, computed in fp32 and rounded once (transformers
    rounds x * cos, rotate_half(x) * sin and their sum: at most about one unit in the last place
    apart in fp16). Returns new tensors (q_out, k_out), in q's and k's layout when those are dense;
    q and k are not modified. Any q/k layout with a contiguous head_dim is read in place.
    Bytes: reads q and k, writes them once: about 2 * B * S * (Hq + Hkv) * D * e (the two tables,
    2 * B * S * D * e, are read by every head, mostly from cache). transformers moves about 5 times
    that in 10 kernels (per tensor: x * cos, -x2, cat, * sin, +).
    """
    q, k, cos, sin = _prepare_rope(q, k, cos, sin)
    return _launch_rope(rope_kernel, q, k, cos, sin)


def rmsnorm_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``apply_rotary_pos_emb(q_norm(q), k_norm(k), cos, sin)`` in ONE launch, one program per (token, head).

    ``Qwen3Attention`` normalises each head of q and k over head_dim (``Qwen3RMSNorm`` with
    q_weight / k_weight [D], statistics in fp32, normalised row rounded to the input dtype, times
    the weight in that dtype) BEFORE RoPE; here the normalised row stays in registers and is
    rotated at once (see ``rope`` for the rotation's rounding). Shapes, layouts and outputs as
    ``rope``; q and k are not modified.
    Bytes: as ``rope`` (plus 2 weights of D): q and k travel once, instead of once per PyTorch op
    of q_norm and of apply_rotary_pos_emb.
    """
    q, k, cos, sin = _prepare_rope(q, k, cos, sin)
    D = q.shape[-1]
    check_tensor(q_weight, "q_weight", ndim=1, dims="[head_dim]")
    check_tensor(k_weight, "k_weight", ndim=1, dims="[head_dim]")
    check_like(q_weight, "q_weight", q, "q")
    check_like(k_weight, "k_weight", q, "q")
    check_shape(q_weight, "q_weight", (D,), "[head_dim] (the last dim of q)")
    check_shape(k_weight, "k_weight", (D,), "[head_dim] (the last dim of q)")
    check_number(eps, "eps")
    weights = (q_weight.contiguous(), k_weight.contiguous())
    return _launch_rope(rmsnorm_rope_kernel, q, k, cos, sin, weights, (float(eps),))
