"""Attention twice: with plain PyTorch ops, and the slow path built from this package's kernels.

Shapes: q [B, Hq, S, D], k and v [B, Hkv, T, D], output [B, Hq, S, D]. Grouped-query attention:
query head h reads kv head h // (Hq // Hkv). ``causal=True``: query i sees keys j <= i + T - S
(S == T is a prefill, S == 1 a decode step, 1 < S < T a chunk after a cache). ``attn_mask`` is a
bool mask (True = attend) or an additive float mask, broadcastable to [B, Hq, S, T], applied on
top of causality. Scores are ``q @ k^T * scale + additive_mask``, the order transformers uses.
"""

import torch

from ._checks import check_attention, check_number
from .matmul import matmul
from .softmax import softmax


def _masks(q, T, causal, attn_mask) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(keep, additive): the bool mask of attended keys (causal & bool attn_mask) and the float mask."""
    S = q.shape[2]
    keep = torch.ones(S, T, dtype=torch.bool, device=q.device).tril(diagonal=T - S) if causal else None
    additive = None
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        keep = attn_mask if keep is None else keep & attn_mask
    elif attn_mask is not None:
        additive = attn_mask.to(q.dtype)
    if keep is not None:
        keep = keep.expand(*q.shape[:2], S, T)  # (B, Hq, S, T), a view
    if additive is not None:
        additive = additive.expand(*q.shape[:2], S, T)
    return keep, additive


def attention_torch_ops(q, k, v, scale: float, causal: bool, attn_mask=None) -> torch.Tensor:
    """Attention with plain PyTorch ops, as transformers' eager attention computes it.

    matmul in the input dtype, scale, masks, softmax in fp32, matmul. A fully masked query row
    gives NaN here (as in torch.softmax), zeros in ``attention_slow``.
    Bytes: beyond reading q, k, v and writing the output, ``repeat_interleave`` copies k and v
    Hq / Hkv times, and the scores [B, Hq, S, T] are written by the first matmul, then read and
    written again by the scaling, each mask, the softmax (in fp32) and the cast back.
    """
    B, Hq, Hkv, S, T, D = check_attention(q, k, v, attn_mask)
    check_number(scale, "scale")
    k = k.repeat_interleave(Hq // Hkv, dim=1)  # (B, Hq, T, D): head h uses kv head h // (Hq // Hkv)
    v = v.repeat_interleave(Hq // Hkv, dim=1)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, Hq, S, T)
    keep, additive = _masks(q, T, causal, attn_mask)
    if additive is not None:
        scores = scores + additive
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(p, v)  # (B, Hq, S, D)


def attention_slow(q, k, v, scale: float, causal: bool, attn_mask=None) -> torch.Tensor:
    """The slow path: a Python loop over batch and heads, 3 kernel launches per (b, h).

    Per head: ``matmul`` for the scores q k^T (k^T as a strided view), the masks with PyTorch ops,
    the ``softmax`` kernel, ``matmul`` for p @ v. Without an additive mask the softmax kernel
    applies ``scale``; with one, the scores are scaled first (scores * scale + mask, as transformers
    does) and the softmax runs with scale 1, since scaling after the add would scale the mask too.
    A fully masked query row gives zeros. Launches: 3 * B * Hq.
    Bytes per head: q[b, h] and k[b, kv] read, scores [S, T] written; the masks read and write
    them; softmax reads them and writes p [S, T]; the second matmul reads p and v[b, kv] and
    writes [S, D], which is then copied into the output.
    """
    B, Hq, Hkv, S, T, D = check_attention(q, k, v, attn_mask)
    check_number(scale, "scale")
    group = Hq // Hkv
    keep, additive = _masks(q, T, causal, attn_mask)
    out = torch.empty_like(q)  # (B, Hq, S, D)
    for b in range(B):
        for h in range(Hq):
            kv = h // group
            scores = matmul(q[b, h], k[b, kv].t())  # (S, T), unscaled
            softmax_scale = scale
            if additive is not None:
                scores = scores * scale + additive[b, h]
                softmax_scale = 1.0
            if keep is not None:
                scores = scores.masked_fill(~keep[b, h], float("-inf"))
            p = softmax(scores, scale=softmax_scale)  # (S, T)
            out[b, h] = matmul(p, v[b, kv])  # (S, D)
    return out
