"""Fast attention: fused decode attention (with flash-decoding) and a flash-attention prefill.

Shapes as in ``slower_kernels.attention``: q [B, Hq, S, D], k and v [B, Hkv, T, D], output [B, Hq, S, D]
(contiguous, in the input dtype). Grouped-query attention: query head h reads kv head
h // (Hq // Hkv). Both kernels never write the scores [S, T] to memory: each program walks the keys
in tiles of BLOCK_N and keeps an *online softmax* in fp32 (Milakov & Gimelshein 2018; FlashAttention):

    m  = running max of the scores seen so far         (per query row)
    l  = running sum of exp(score - m)                 (per query row)
    acc = running sum of exp(score - m) * v            (per query row, [D])

When a tile raises the max from m to m', the old l and acc are rescaled by exp(m - m'). At the end
out = acc / l. Scores are computed as (q . k) * scale * log2(e) so that ``exp2`` (one instruction)
replaces ``exp``: exp(x) = 2^(x * log2(e)).

``decode_attention``: one query per head (S == 1). A program handles ALL the query heads of one kv
head (the "group": 2 on Qwen3-0.6B, 1 for multi-head attention), so each K/V tile is loaded once per
group, and the group's queries form the rows of a ``tl.dot`` (BLOCK_H = 16 rows, tl.dot's minimum;
a group of more than 16 heads spans several programs).
When the B * Hkv programs are too few to keep the GPU busy (8 on Qwen3 at batch 1, on 132 SMs),
the keys are split into ``num_splits`` chunks, one program each (flash-decoding); each writes its
partial output and log-sum-exp in fp32, and a second small kernel combines them.

``prefill_attention``: FlashAttention's forward, one program per (query head, BLOCK_M queries),
BLOCK_M x BLOCK_N tiles through ``tl.dot``; causal with the queries aligned to the END of the keys.

Launches: decode 1 (``decode_attention_kernel``) or 2 with split-KV (+ ``decode_combine_kernel``);
prefill 1 (``prefill_attention_kernel``).
"""

import functools
import math

import torch
import triton
import triton.language as tl

from ._checks import check_attention, check_number, check_tensor
from .launches import record

# --- the launch policy: one place for every size, read by the launchers and the compile check
SM_COUNT = 132  # streaming multiprocessors of the H200; on a GPU the launcher reads the real count (a T4: 40)
TARGET_PROGRAMS = 2 * SM_COUNT  # decode programs wanted in flight: two per SM hide memory latency
MIN_SPLIT_KEYS = 64  # a split-KV program gets at least this many keys (one BLOCK_N tile), or no split
MAX_SPLITS = 64  # the combine kernel holds [next_power_of_2(num_splits), D] partial outputs in registers
MAX_HEAD_DIM = 256  # D is padded to a power of two >= 16 in registers; 256 is the largest that fits
BLOCK_H = 16  # decode: query heads per program, the rows of its tl.dot (16 is tl.dot's smallest M)
LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)


def head_block(head_dim: int) -> int:
    """BLOCK_D: the head dim padded to a power of two, at least 16 (``tl.dot``'s smallest K)."""
    return max(16, triton.next_power_of_2(head_dim))


@functools.cache  # asked on every decode launch (28 per token): ask the driver once per device
def target_programs(device: torch.device) -> int:
    """Decode programs wanted in flight on ``device``: two per streaming multiprocessor (TARGET_PROGRAMS
    where there is no GPU to ask, as in the interpreter)."""
    if device.type == "cuda":
        return 2 * torch.cuda.get_device_properties(device).multi_processor_count
    return TARGET_PROGRAMS


def decode_num_splits(n_keys: int, programs: int, target: int = TARGET_PROGRAMS) -> int:
    """How many chunks the keys are split into (1 = no split), for ``programs`` programs per split
    (B * Hkv * ceil(group / BLOCK_H): B * Hkv for any group up to 16).

    Enough splits to reach ``target`` programs in all (``target_programs(device)``: two per SM), but at
    least MIN_SPLIT_KEYS keys per split and at most MAX_SPLITS splits:

        splits = min(ceil(target / programs), n_keys // MIN_SPLIT_KEYS, MAX_SPLITS), >= 1

    Qwen3-0.6B at batch 1 (8 kv heads): 1,024 keys -> 16 splits of 64 keys (128 programs);
    127 keys -> 1 (one launch: there is too little work for a second launch to pay off).
    Batch 64 (512 programs, more than TARGET_PROGRAMS) never splits.
    """
    if programs >= target:
        return 1
    return max(1, min(triton.cdiv(target, programs), n_keys // MIN_SPLIT_KEYS, MAX_SPLITS))


def decode_meta(head_dim: int, dtype: torch.dtype) -> dict:
    """The constexprs and launch options of ``decode_attention_kernel`` (the compile check uses it too).

    BLOCK_N keys per tile: 64, halved (down to 16) while the Q tile and one K tile,
    elem * BLOCK_D * (BLOCK_H + BLOCK_N) bytes, pass 24 KiB: fp16 64 up to D = 128 and 32 at
    D = 256; fp32 64 at D = 64, 32 at D = 128, 16 at D = 256. ``slower_kernels.aot`` measures at most
    48 KiB of shared memory for these on a T4 (64 KiB per block).
    """
    block_d = head_block(head_dim)
    elem = torch.finfo(dtype).bits // 8
    block_n = 64
    while block_n > 16 and elem * block_d * (BLOCK_H + block_n) > 24 * 1024:
        block_n //= 2
    return dict(HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_H=BLOCK_H, BLOCK_N=block_n, num_warps=4, num_stages=2)


def combine_meta(head_dim: int, num_splits: int) -> dict:
    """The constexprs and launch options of ``decode_combine_kernel``."""
    return dict(HEAD_DIM=head_dim, BLOCK_D=head_block(head_dim), BLOCK_S=triton.next_power_of_2(num_splits),
                num_warps=4)  # fmt: skip


def prefill_meta(head_dim: int, dtype: torch.dtype) -> dict:
    """The constexprs and launch options of ``prefill_attention_kernel``.

    A program keeps a [BLOCK_M, BLOCK_D] tile of Q and loads [BLOCK_N, BLOCK_D] tiles of K and V:
    the largest of 64, 32, 16 with a Q tile of at most 16 KiB and K, V tiles of at most 8 KiB each
    (Qwen3's D = 128 in fp16: 64 x 32). The compiler needs shared memory beyond the tiles for its
    layout conversions: ``slower_kernels.aot`` measures at most 48 KiB for these on a T4 (64 KiB per
    block), where 64 x 64 at D = 128 in fp16 would take all 64 KiB.
    """
    block_d = head_block(head_dim)
    row_bytes = block_d * torch.finfo(dtype).bits // 8  # one query or key
    block_m = next(b for b in (64, 32, 16) if b * row_bytes <= 16 * 1024 or b == 16)
    block_n = next(b for b in (64, 32, 16) if b * row_bytes <= 8 * 1024 or b == 16)
    return dict(HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4, num_stages=2)


# ------------------------------------------------------------------------------------------------
# the shared tile loop


@triton.jit
def _attend_tiles(
    acc, l_i, m_i,  # running output [ROWS, BLOCK_D], sum [ROWS] and max [ROWS], fp32 (log2 units)
    q,  # the queries [ROWS, BLOCK_D], in the input dtype
    q_last_key,  # [ROWS] int: the last key each query row may see (only read when CAUSAL)
    k_base, v_base,  # k[b, kv_head, 0, 0] and v[b, kv_head, 0, 0]
    stride_kt, stride_vt,  # elements between two keys of k / of v
    offs_d, d_mask,  # [BLOCK_D] head-dim offsets, and which are < HEAD_DIM
    start, end,  # walk the keys start <= j < end, BLOCK_N at a time
    n_valid,  # keys j >= n_valid are masked out (only read when MASKED)
    qk_scale,  # scale * log2(e)
    BLOCK_N: tl.constexpr,  # keys per tile
    MASKED: tl.constexpr,  # apply j < n_valid (and causality): needed for ragged and diagonal tiles
    CAUSAL: tl.constexpr,  # apply j <= q_last_key
):  # fmt: skip
    """The online-softmax loop over key tiles, shared by the decode and prefill kernels.

    Each tile: scores s = q k^T * qk_scale (fp32 accumulation), masked to -inf where a key is out of
    range or in the future; m' = max(m, rowmax(s)); p = exp2(s - m'); l = l * exp2(m - m') + rowsum(p);
    acc = acc * exp2(m - m') + p @ v. Every tile it is given holds at least one visible key for every
    row that matters, so m' is finite after the first tile and exp2 never sees (-inf) - (-inf).
    """
    offs_n = tl.arange(0, BLOCK_N)
    for n0 in range(start, end, BLOCK_N):
        keys = n0 + offs_n
        if MASKED:
            load_mask = (keys[:, None] < n_valid) & d_mask[None, :]
        else:
            load_mask = d_mask[None, :]
        # --- K and V tiles [BLOCK_N, BLOCK_D]: each key's row of D elements is contiguous (coalesced)
        k = tl.load(k_base + keys[:, None] * stride_kt + offs_d[None, :], mask=load_mask, other=0.0)
        v = tl.load(v_base + keys[:, None] * stride_vt + offs_d[None, :], mask=load_mask, other=0.0)
        if k.dtype == tl.float32:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")  # exact fp32, not TF32
        else:
            s = tl.dot(q, tl.trans(k))  # fp16 inputs, fp32 accumulator
        s = s * qk_scale
        if MASKED:
            visible = keys[None, :] < n_valid
            if CAUSAL:
                visible = visible & (keys[None, :] <= q_last_key[:, None])
            s = tl.where(visible, s, -float("inf"))
        # --- online softmax: rescale what was accumulated when the running max grows
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        if v.dtype == tl.float32:
            acc = tl.dot(p, v, acc * alpha[:, None], input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])  # p in [0, 1] rounds well to fp16
        m_i = m_new
    return acc, l_i, m_i


# ------------------------------------------------------------------------------------------------
# decode


@triton.jit
def decode_attention_kernel(
    q_ptr,  # queries [B, Hq, 1, D], last dim contiguous
    k_ptr, v_ptr,  # keys and values [B, Hkv, T, D], last dim contiguous
    out_ptr,  # output [B, Hq, 1, D], contiguous (written when not SPLIT)
    part_ptr,  # fp32 partial outputs [B, Hq, num_splits, D], contiguous (written when SPLIT)
    lse_ptr,  # fp32 log2-sum-exp2 of each split's scores [B, Hq, num_splits] (written when SPLIT)
    kv_len_ptr,  # one int32/int64 on the device: keys to attend (read when KV_LEN_ON_DEVICE)
    n_keys,  # keys to attend; with KV_LEN_ON_DEVICE the buffer length T, an upper bound for *kv_len_ptr
    chunk,  # keys per split (n_keys when not SPLIT)
    group,  # query heads per kv head, Hq // Hkv
    qk_scale,  # scale * log2(e): the scores in log2 units, for exp2
    stride_qb, stride_qh,  # elements between batches / heads of q
    stride_kb, stride_kh, stride_kt,  # elements between batches / heads / keys of k
    stride_vb, stride_vh, stride_vt,  # elements between batches / heads / keys of v
    HEAD_DIM: tl.constexpr,  # D
    BLOCK_D: tl.constexpr,  # D padded to a power of two >= 16
    BLOCK_H: tl.constexpr,  # query heads per program: the rows of the score tile (>= 16 for tl.dot)
    BLOCK_N: tl.constexpr,  # keys per tile
    SPLIT: tl.constexpr,  # write fp32 partial output + lse (combined later) instead of the output
    KV_LEN_ON_DEVICE: tl.constexpr,  # read the number of keys from kv_len_ptr
):  # fmt: skip
    """One program per (kv head, batch, split): the ``group`` query heads of the kv head (BLOCK_H
    at a time), keys [split * chunk, min((split + 1) * chunk, n_keys)).

    Grid (Hkv * ceil(group / BLOCK_H), B, num_splits). A split with no keys (its chunk starts past
    kv_len) writes zeros and lse = -inf, which the combine kernel weighs by exp2(-inf) = 0.
    """
    head_blocks = tl.cdiv(group, BLOCK_H)  # programs per kv head: 1 for any group up to BLOCK_H
    kv_head = tl.program_id(axis=0) // head_blocks
    b = tl.program_id(axis=1)
    split = tl.program_id(axis=2)
    # --- the keys of this split
    if KV_LEN_ON_DEVICE:
        # clamped to [1, T]: never read outside the buffer, never divide by an empty sum
        n_keys = tl.minimum(tl.maximum(tl.load(kv_len_ptr).to(tl.int32), 1), n_keys)
    start = split * chunk
    end = tl.minimum(start + chunk, n_keys)
    # --- the group's queries, one row per query head: [BLOCK_H, BLOCK_D]
    in_group = (tl.program_id(axis=0) % head_blocks) * BLOCK_H + tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    h_mask = in_group < group
    d_mask = offs_d < HEAD_DIM
    head = kv_head * group + in_group  # query heads kv_head * group ... + group - 1
    q_ptrs = q_ptr + b * stride_qb + head[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptrs, mask=h_mask[:, None] & d_mask[None, :], other=0.0)
    # --- walk the keys: every tile holds at least one key < end, so no row is ever all -inf
    acc = tl.zeros((BLOCK_H, BLOCK_D), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    m_i = tl.full((BLOCK_H,), -float("inf"), dtype=tl.float32)
    acc, l_i, m_i = _attend_tiles(
        acc, l_i, m_i, q, in_group,  # in_group stands in for q_last_key, unread since CAUSAL=False
        k_ptr + b * stride_kb + kv_head * stride_kh, v_ptr + b * stride_vb + kv_head * stride_vh,
        stride_kt, stride_vt, offs_d, d_mask, start, end, end, qk_scale,
        BLOCK_N=BLOCK_N, MASKED=True, CAUSAL=False,
    )  # fmt: skip
    # --- write: rows of the contiguous [B, Hq, ...] outputs are (b * Hq + head)
    row = b * (tl.num_programs(axis=0) // head_blocks * group) + head  # Hq = Hkv * group
    store_mask = h_mask[:, None] & d_mask[None, :]
    if SPLIT:
        num_splits = tl.num_programs(axis=2)
        has_keys = l_i > 0.0  # False for padding rows and empty splits
        l_safe = tl.where(has_keys, l_i, 1.0)
        out = acc / l_safe[:, None]
        lse = tl.where(has_keys, m_i + tl.log2(l_safe), -float("inf"))
        part_ptrs = part_ptr + (row[:, None] * num_splits + split) * HEAD_DIM + offs_d[None, :]
        tl.store(part_ptrs, out, mask=store_mask)
        tl.store(lse_ptr + row * num_splits + split, lse, mask=h_mask)
    else:
        out = (acc / l_i[:, None]).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], out, mask=store_mask)


@triton.jit
def decode_combine_kernel(
    part_ptr,  # fp32 partial outputs [B * Hq, num_splits, D], contiguous
    lse_ptr,  # fp32 log2-sum-exp2 of each split [B * Hq, num_splits]
    out_ptr,  # output [B * Hq, D], contiguous, in the input dtype
    num_splits,  # splits per query head
    HEAD_DIM: tl.constexpr,  # D
    BLOCK_D: tl.constexpr,  # D padded to a power of two >= 16
    BLOCK_S: tl.constexpr,  # num_splits padded to a power of two
):
    """One program per (batch, query head): out = sum_s w_s part_s / sum_s w_s, w_s = exp2(lse_s - max lse).

    Split s divided its partial output by its own sum of 2^score, which is 2^lse_s; weighing it by
    2^lse_s / sum_s 2^lse_s restores its share of the full softmax. Split 0 always has keys, so
    max lse is finite and the weights of empty splits are exp2(-inf) = 0.
    """
    row = tl.program_id(axis=0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_mask = offs_s < num_splits
    lse = tl.load(lse_ptr + row * num_splits + offs_s, mask=s_mask, other=-float("inf"))
    w = tl.exp2(lse - tl.max(lse, axis=0))  # [BLOCK_S], 0 for padding and empty splits
    mask = s_mask[:, None] & (offs_d[None, :] < HEAD_DIM)
    part_ptrs = part_ptr + (row * num_splits + offs_s[:, None]) * HEAD_DIM + offs_d[None, :]
    part = tl.load(part_ptrs, mask=mask, other=0.0)  # [BLOCK_S, BLOCK_D]
    out = tl.sum(part * w[:, None], axis=0) / tl.sum(w, axis=0)
    tl.store(out_ptr + row * HEAD_DIM + offs_d, out.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)


# ------------------------------------------------------------------------------------------------
# prefill


@triton.jit
def prefill_attention_kernel(
    q_ptr,  # queries [B, Hq, S, D], last dim contiguous
    k_ptr, v_ptr,  # keys and values [B, Hkv, T, D], last dim contiguous
    out_ptr,  # output [B, Hq, S, D], contiguous
    n_queries,  # S
    n_keys,  # T
    group,  # query heads per kv head, Hq // Hkv
    qk_scale,  # scale * log2(e): the scores in log2 units, for exp2
    stride_qb, stride_qh, stride_qs,  # elements between batches / heads / queries of q
    stride_kb, stride_kh, stride_kt,  # elements between batches / heads / keys of k
    stride_vb, stride_vh, stride_vt,  # elements between batches / heads / keys of v
    HEAD_DIM: tl.constexpr,  # D
    BLOCK_D: tl.constexpr,  # D padded to a power of two >= 16
    BLOCK_M: tl.constexpr,  # queries per program
    BLOCK_N: tl.constexpr,  # keys per tile
    CAUSAL: tl.constexpr,  # query i sees keys j <= i + T - S
):  # fmt: skip
    """One program per (query head, batch, block of BLOCK_M queries); grid (Hq, B, cdiv(S, BLOCK_M)).

    The heads are the fastest grid axis, so the heads of one kv group run side by side and read the
    same K/V tiles from L2. Query blocks run last-first: under causality they have the most keys.
    Two loops over the keys: tiles every query of the block sees in full (no mask to compute), then
    the tiles on the diagonal and the ragged end (masked).
    """
    head = tl.program_id(axis=0)
    b = tl.program_id(axis=1)
    m0 = (tl.num_programs(axis=2) - 1 - tl.program_id(axis=2)) * BLOCK_M
    kv_head = head // group
    # --- Q tile [BLOCK_M, BLOCK_D], padding rows and columns are zeros
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    q_mask = (offs_m[:, None] < n_queries) & d_mask[None, :]
    q_base = q_ptr + b * stride_qb + head * stride_qh
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :], mask=q_mask, other=0.0)
    # --- which keys: query i sees j <= i + T - S (causal), else all T
    q_last_key = offs_m + (n_keys - n_queries)
    if CAUSAL:
        full_end = tl.minimum(m0 + (n_keys - n_queries) + 1, n_keys) // BLOCK_N * BLOCK_N
        end = tl.minimum(m0 + BLOCK_M + (n_keys - n_queries), n_keys)
    else:
        full_end = n_keys // BLOCK_N * BLOCK_N
        end = n_keys
    k_base = k_ptr + b * stride_kb + kv_head * stride_kh
    v_base = v_ptr + b * stride_vb + kv_head * stride_vh
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    # --- keys [0, full_end): every query of the block sees them all
    acc, l_i, m_i = _attend_tiles(
        acc, l_i, m_i, q, q_last_key, k_base, v_base, stride_kt, stride_vt, offs_d, d_mask,
        0, full_end, n_keys, qk_scale, BLOCK_N=BLOCK_N, MASKED=False, CAUSAL=CAUSAL,
    )  # fmt: skip
    # --- keys [full_end, end): the diagonal and the ragged last tile, masked
    acc, l_i, m_i = _attend_tiles(
        acc, l_i, m_i, q, q_last_key, k_base, v_base, stride_kt, stride_vt, offs_d, d_mask,
        full_end, end, n_keys, qk_scale, BLOCK_N=BLOCK_N, MASKED=True, CAUSAL=CAUSAL,
    )  # fmt: skip
    # --- write; every real query row saw key 0 at least, so l_i > 0
    out_ptrs = out_ptr + ((b * tl.num_programs(axis=0) + head) * n_queries + offs_m[:, None]) * HEAD_DIM
    tl.store(out_ptrs + offs_d[None, :], (acc / l_i[:, None]).to(out_ptr.dtype.element_ty), mask=q_mask)


# ------------------------------------------------------------------------------------------------
# launchers


def _check_qkv(q, k, v, scale) -> tuple[tuple[int, ...], float]:
    """Shapes, dtypes, devices, head counts and D; returns ((B, Hq, Hkv, S, T, D), scale)."""
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_tensor(t, name, ndim=4, dims="[B, H, S or T, D]")
        if 0 in t.shape:
            raise ValueError(f"{name} must not be empty, got shape {tuple(t.shape)}")
    dims = check_attention(q, k, v, None)
    D = dims[-1]
    if D > MAX_HEAD_DIM:
        raise ValueError(f"q must have a head dim D <= {MAX_HEAD_DIM}, got {D}")
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    check_number(scale, "scale")
    return dims, float(scale)


def _unit_last_stride(t: torch.Tensor) -> torch.Tensor:
    """The kernels read rows of D contiguous elements: a copy only when the last stride is not 1."""
    return t if t.stride(-1) == 1 else t.contiguous()


def _check_kv_len(kv_len, T: int, device: torch.device) -> tuple[int, bool]:
    """(n_keys, on_device): the keys to attend (T, an upper bound, when kv_len is a tensor), and
    whether the kernel reads kv_len from the device."""
    if kv_len is None:
        return T, False
    if isinstance(kv_len, torch.Tensor):
        if kv_len.dtype not in (torch.int32, torch.int64) or kv_len.numel() != 1:
            raise TypeError(
                f"kv_len must hold one int32 or int64 value, got {kv_len.dtype} of shape {tuple(kv_len.shape)}"
            )
        if kv_len.device != device:
            raise ValueError(f"kv_len is on {kv_len.device} but q is on {device}: use one device")
        return T, True
    if isinstance(kv_len, bool) or not isinstance(kv_len, int):
        raise TypeError(f"kv_len must be None, an int or an int tensor, got {type(kv_len).__name__}")
    if not 1 <= kv_len <= T:
        raise ValueError(f"kv_len must be between 1 and T = {T}, got {kv_len}")
    return kv_len, False


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    kv_len: int | torch.Tensor | None = None,
    num_splits: int | None = None,
) -> torch.Tensor:
    """Attention of one new query per head, q [B, Hq, 1, D], over k, v [B, Hkv, T, D] -> [B, Hq, 1, D].

    Equals ``F.scaled_dot_product_attention(q, k[:, :, :kv_len], v[:, :, :kv_len], scale=scale,
    enable_gqa=True)`` (the one query is the last position, so causality hides nothing).

    kv_len: attend only to the first kv_len keys (a static KV cache longer than its filled part).
      - None: all T keys.
      - an int in [1, T]: passed to the kernel by value (checked here).
      - a 0-dim or 1-element int32/int64 tensor on q's device: read INSIDE the kernel. A CUDA graph
        records a launch's arguments by value, so an int would be frozen at capture time; the tensor
        is read on every replay, and its value can be advanced on the device between replays. It is
        not checked on the host (that would synchronise with the GPU, which graph capture forbids);
        the kernel clamps it to [1, T], so it never reads outside k and v.
    num_splits: chunks of the keys processed by separate programs; None picks
      ``decode_num_splits(n, programs, target_programs(q.device))``, with n = kv_len for an int and T
      otherwise (a device kv_len is not known here, and a captured graph must keep its grid). Keys are
      assigned in chunks of
      ceil(n / num_splits); a chunk past kv_len does no work.
    Launches: 1 (``decode_attention_kernel``) when num_splits == 1; otherwise 2
    (+ ``decode_combine_kernel``).
    Bytes: k and v read once each (2 * B * Hkv * kv_len * D * e), q read and the output written once;
    split: + B * Hq * num_splits * (D + 1) * 4 bytes of partials written and read back.
    """
    (B, Hq, Hkv, S, T, D), scale = _check_qkv(q, k, v, scale)
    if S != 1:
        raise ValueError(f"q must hold one query per head (S == 1) for decode, got S = {S}: use prefill_attention")
    n_keys, kv_len_on_device = _check_kv_len(kv_len, T, q.device)
    group = Hq // Hkv
    head_programs = Hkv * triton.cdiv(group, BLOCK_H)  # Hkv for any group up to BLOCK_H
    if num_splits is None:
        num_splits = decode_num_splits(n_keys, B * head_programs, target_programs(q.device))
    elif isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"num_splits must be None or an int, got {type(num_splits).__name__}")
    elif not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be between 1 and {MAX_SPLITS}, got {num_splits}")
    q, k, v = _unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v)
    out = torch.empty((B, Hq, 1, D), dtype=q.dtype, device=q.device)
    split = num_splits > 1
    if split:  # fp32 partial outputs and log-sum-exps, combined below
        part = torch.empty((B, Hq, num_splits, D), dtype=torch.float32, device=q.device)
        lse = torch.empty((B, Hq, num_splits), dtype=torch.float32, device=q.device)
    else:  # unused: None becomes a compile-time constant
        part = lse = None
    record(decode_attention_kernel)
    decode_attention_kernel[(head_programs, B, num_splits)](
        q, k, v, out, part, lse, kv_len if kv_len_on_device else None,
        n_keys, triton.cdiv(n_keys, num_splits), group, scale * LOG2E,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        SPLIT=split, KV_LEN_ON_DEVICE=kv_len_on_device, **decode_meta(D, q.dtype),
    )  # fmt: skip
    if split:
        record(decode_combine_kernel)
        decode_combine_kernel[(B * Hq,)](part, lse, out, num_splits, **combine_meta(D, num_splits))
    return out


def prefill_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None, causal: bool = True
) -> torch.Tensor:
    """FlashAttention forward: q [B, Hq, S, D], k, v [B, Hkv, T, D] -> [B, Hq, S, D], in ONE launch.

    causal=True: query i sees keys j <= i + T - S (the queries are the LAST S positions, as in
    transformers with a cache; S == T is a plain prompt), so S <= T is required. Equals
    ``F.scaled_dot_product_attention(..., attn_mask=that mask, scale=scale, enable_gqa=True)``; with
    S == T that is ``is_causal=True``.
    Bytes: q read once and the output written once; each program reads the K/V tiles it needs, so k
    and v are read about ceil(S / BLOCK_M) * group times (half that with causality), largely from L2.
    FLOPs: 4 * B * Hq * S * T * D (halved by causality when S == T).
    """
    (B, Hq, Hkv, S, T, D), scale = _check_qkv(q, k, v, scale)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    if causal and S > T:
        raise ValueError(
            f"q has S = {S} queries but k only T = {T} keys: causal attention aligned to the end needs S <= T"
        )
    q, k, v = _unit_last_stride(q), _unit_last_stride(k), _unit_last_stride(v)
    out = torch.empty((B, Hq, S, D), dtype=q.dtype, device=q.device)
    meta = prefill_meta(D, q.dtype)
    grid = (Hq, B, triton.cdiv(S, meta["BLOCK_M"]))
    record(prefill_attention_kernel)
    prefill_attention_kernel[grid](
        q, k, v, out, S, T, Hq // Hkv, scale * LOG2E,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        CAUSAL=causal, **meta,
    )  # fmt: skip
    return out
