"""A decode step of our own: the fast layers over a KV cache of our own, with no model library in the step.

transformers' ``StaticCache`` and the model's forward around our fused layers bring kernels that one sequence at
batch size 1 does not need: a write index per layer, masks built every step, the rotary table computed every step,
copies. Here the cache is two preallocated tensors per layer, written at a position that lives on the device by
the kernel that norms and rotates q and k (``rmsnorm_rope_cache``); the rotary table is computed once for every
position; decode attention reads the cache up to a length on the device; the greedy argmax and the next position
are computed on the device too. Nothing in ``step`` reads a value back to the host, so one step can be captured in
a CUDA graph and replayed once per token. From stage "fold" on, the RMSNorms, residual adds, SwiGLU and argmax run
inside the projections (``folded_gemv``) and one small kernel advances the state (``advance_kernel``).
"""

import torch
import triton
import triton.language as tl
from torch import nn
from torch.nn import functional as F

from .fast_attention import decode_attention, prefill_attention
from .folded_gemv import ARGMAX_EMPTY, decode_gemv
from .fused import add_rmsnorm, rmsnorm_rope, rope_num_warps
from .gemv import GemvLinear
from .launches import record
from .modules import FastDecoderLayer
from .rmsnorm import rmsnorm_fused


@triton.jit
def rmsnorm_rope_cache_kernel(
    q_ptr,  # q [S, Hq, D] of one sequence (a view of the fused q/k/v projection), last dim contiguous
    k_ptr,  # k [S, Hkv, D], the same
    v_ptr,  # v [S, Hkv, D], the same
    q_w_ptr,  # q_norm weight [D]
    k_w_ptr,  # k_norm weight [D]
    cos_ptr,  # the rotary table cos [max_len, D], contiguous
    sin_ptr,  # sin, the same
    q_out_ptr,  # normalised and rotated q [Hq, S, D], contiguous
    k_cache_ptr,  # this layer's keys [Hkv, max_len, D], contiguous: row (h, position + s) written
    v_cache_ptr,  # this layer's values, the same
    pos_ptr,  # the position of the first of the S tokens: a one-element tensor on the device
    n_q_heads,  # Hq: program heads [0, Hq) are q's, [Hq, Hq + Hkv) are k's (and v's)
    max_len,
    half_dim,  # D // 2
    stride_qs, stride_qh, stride_ks, stride_kh, stride_vs, stride_vh,  # elements between positions / heads
    eps,
    BLOCK_HALF: tl.constexpr,
):  # fmt: skip
    """One program per (token, head): q's heads are normalised (q_norm), rotated and written to q_out; k's heads
    are normalised (k_norm), rotated and written into the key cache at their position, and the value head of
    the same index copied into the value cache there. The position and the rotary row are read on the device,
    so a CUDA graph replays this launch at every position. Rounding as ``rmsnorm_rope_kernel``."""
    s = tl.program_id(axis=0)
    head = tl.program_id(axis=1)
    position = tl.load(pos_ptr) + s
    offs = tl.arange(0, BLOCK_HALF)
    mask = offs < half_dim
    is_q = head < n_q_heads
    kv_head = head - n_q_heads
    if is_q:
        x_row = q_ptr + s * stride_qs + head * stride_qh
        w_row = q_w_ptr
        out_row = q_out_ptr + (head * (tl.num_programs(axis=0)) + s) * 2 * half_dim
    else:
        x_row = k_ptr + s * stride_ks + kv_head * stride_kh
        w_row = k_w_ptr
        out_row = k_cache_ptr + (kv_head * max_len + position) * 2 * half_dim
        v_row = v_ptr + s * stride_vs + kv_head * stride_vh
        v_out = v_cache_ptr + (kv_head * max_len + position) * 2 * half_dim
        tl.store(v_out + offs, tl.load(v_row + offs, mask=mask), mask=mask)
        tl.store(v_out + half_dim + offs, tl.load(v_row + half_dim + offs, mask=mask), mask=mask)
    x1 = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    out_ty = q_out_ptr.dtype.element_ty
    inv_rms = tl.rsqrt((tl.sum(x1 * x1, axis=0) + tl.sum(x2 * x2, axis=0)) / (2 * half_dim) + eps)
    n1 = (tl.load(w_row + offs, mask=mask) * (x1 * inv_rms).to(out_ty)).to(tl.float32)
    n2 = (tl.load(w_row + half_dim + offs, mask=mask) * (x2 * inv_rms).to(out_ty)).to(tl.float32)
    c_off = position * 2 * half_dim
    cos1 = tl.load(cos_ptr + c_off + offs, mask=mask, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_ptr + c_off + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_ptr + c_off + offs, mask=mask, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_ptr + c_off + half_dim + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_row + offs, (n1 * cos1 - n2 * sin1).to(out_ty), mask=mask)
    tl.store(out_row + half_dim + offs, (n2 * cos2 + n1 * sin2).to(out_ty), mask=mask)


def rmsnorm_rope_cache(q, k, v, q_weight, k_weight, eps, cos, sin, k_cache, v_cache, position):
    """``rmsnorm_rope`` of q [S, Hq, D] and k [S, Hkv, D] with k (and v [S, Hkv, D] as it is) written into
    ``k_cache`` / ``v_cache`` [Hkv, max_len, D] at rows ``position[0]`` .. + S - 1, in ONE launch; cos and sin are
    the whole rotary tables [max_len, D], read at those rows. Returns q_out [1, Hq, S, D]. Nothing is read back
    to the host: ``position`` is a one-element tensor on the device (unchecked against max_len, as a CUDA graph
    requires; the caller keeps it inside the cache)."""
    S, Hq, D = q.shape
    Hkv, max_len = k_cache.shape[0], k_cache.shape[1]
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must have a contiguous last dim (stride 1), got strides {t.stride()}")
    if k.shape != (S, Hkv, D) or v.shape != (S, Hkv, D):
        raise ValueError(f"k and v must be [S, Hkv, D] = {(S, Hkv, D)}, got {tuple(k.shape)} and {tuple(v.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("cos", cos), ("sin", sin)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    q_out = torch.empty(Hq, S, D, dtype=q.dtype, device=q.device)
    BLOCK_HALF = max(16, triton.next_power_of_2(D // 2))
    record(rmsnorm_rope_cache_kernel)
    rmsnorm_rope_cache_kernel[(S, Hq + Hkv)](
        q, k, v, q_weight, k_weight, cos, sin, q_out, k_cache, v_cache, position, Hq, max_len, D // 2,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), float(eps),
        BLOCK_HALF=BLOCK_HALF, num_warps=rope_num_warps(BLOCK_HALF),
    )  # fmt: skip
    return q_out[None]


STAGES = ("cache", "write", "fold", "tune")  # the own decode step, one fix at a time (``OwnCacheModel``'s stage)


@triton.jit
def advance_kernel(
    key_ptr,  # int64 [1]: the argmax key the lm_head folded its logits into (reset here for the next step)
    token_ptr,  # [1, 1]: the token the next step reads
    position_ptr,  # [1]: its position
    kv_len_ptr,  # [1]: keys in the cache once the next step has written its own: position + 1
    out_ptr,  # [max_len]: every generated token, by position
    embed_ptr,  # the embedding table [vocab, hidden], contiguous
    x_ptr,  # [hidden]: the next step's input row, the next token's embedding
    hidden,
    BLOCK: tl.constexpr,  # hidden rounded up to a power of two
):
    """One program: the greedy token out of the argmax key, written where the next step reads it (token, output at
    the next position, its embedding row), the position and key count advanced, the key reset."""
    key = tl.load(key_ptr)
    token = 4294967295 - (key & 4294967295)
    position = tl.load(position_ptr) + 1
    tl.store(position_ptr, position)
    tl.store(kv_len_ptr, position + 1)
    tl.store(out_ptr + position, token)
    tl.store(token_ptr, token)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(embed_ptr + token * hidden + offs, mask=offs < hidden), mask=offs < hidden)
    tl.store(key_ptr, ARGMAX_EMPTY_KEY)


ARGMAX_EMPTY_KEY = tl.constexpr(ARGMAX_EMPTY)


class OwnCacheModel(nn.Module):
    """Greedy decoding of a transformers Qwen3-style causal LM through our fast layers and a KV cache of our own.

    State on the device: ``token`` [1, 1] (the token the next step reads), ``position`` [1] (its position),
    ``kv_len`` [1] (keys in the cache once it is written: position + 1) and ``out`` [max_len] (every generated
    token, by position). ``prefill(ids)`` runs the prompt and leaves its next token in place; ``step()`` decodes
    one token and advances, without a host synchronisation, and keeps its logits as ``last_logits`` [1, vocab]. Shares the model's weights (the fused q/k/v and
    gate/up weights are copies made once, as ``FastDecoderLayer`` makes them); the model itself is not modified.

    ``stage`` (``STAGES``), each one fix over the one before, for the same tokens:
      "cache": the fast layers over our own cache: q/k norm + RoPE (``rmsnorm_rope``), then k and v copied into
               the cache at the device position (two PyTorch launches); the rotary rows gathered once per step;
      "write": the cache write done by the kernel that norms and rotates (``rmsnorm_rope_cache``);
      "fold":  the RMSNorms, residual adds, the SwiGLU and the argmax folded into the projections around them
               (``decode_gemv``), the next token's bookkeeping in one kernel (``advance_kernel``): 6 launches per
               layer and 2 after the last;
      "tune":  "fold" with the tiles measured per shape on this GPU (``gemv_tuned.csv``) where the table has them.
    The prompt (``prefill``) runs the same way at every stage: the layers of "write", one launch per kernel.
    """

    def __init__(self, model: nn.Module, max_len: int, stage: str = "tune"):
        super().__init__()
        if not isinstance(max_len, int) or max_len < 2:
            raise ValueError(f"max_len must be an int >= 2 (prompt + new tokens), got {max_len!r}")
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        decoder, config = model.model, model.config
        swapped = [type(layer).__name__ for layer in decoder.layers if not hasattr(layer, "input_layernorm")]
        if swapped:
            raise ValueError(f"model: its decoder layers are already swapped ({swapped[0]}); build an OwnCacheModel "
                             "from the original model (outside patched(..., layer='fused')): it brings its own layers")
        self.stage = stage
        self.embed = decoder.embed_tokens.weight
        self.layers = nn.ModuleList(FastDecoderLayer.from_hf(layer, _run_by_the_model) for layer in decoder.layers)
        self.norm_weight, self.norm_eps = decoder.norm.weight, decoder.norm.variance_epsilon
        self.lm_head = GemvLinear.from_linear(model.lm_head)
        device, dtype = self.embed.device, self.embed.dtype
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        # the KV cache: keys and values of every layer, [layers, 1, Hkv, max_len, D] each
        self.keys = torch.zeros(len(self.layers), 1, config.num_key_value_heads, max_len, head_dim, dtype=dtype,
                                device=device)
        self.values = torch.zeros_like(self.keys)
        with torch.no_grad():  # the rotary table of every position, computed once
            positions = torch.arange(max_len, device=device)[None]
            cos, sin = decoder.rotary_emb(self.embed[:1][None], positions)
        self.cos, self.sin = cos[0].contiguous(), sin[0].contiguous()  # [max_len, head_dim]
        self.max_len = max_len
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.kv_len = torch.ones(1, dtype=torch.long, device=device)
        self.start = torch.zeros(1, dtype=torch.long, device=device)  # where a prompt is written: position 0
        self.out = torch.zeros(max_len, dtype=torch.long, device=device)
        self.x = torch.zeros(1, self.embed.shape[1], dtype=dtype, device=device)  # "fold": the next step's input
        self.key = torch.full((1,), ARGMAX_EMPTY, dtype=torch.long, device=device)  # "fold": the argmax key

    def _layer(self, i: int, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Decoder layer ``i`` on x [1, S, hidden], the first token at ``position[0]``: 10 launches for one token
        at stage "write" (RMSNorm; q/k/v; q/k norm + RoPE + the cache write; attention, and its combine when split;
        o_proj; residual add + RMSNorm; gate/up; SwiGLU; down; residual add), 12 at "cache" (norm + RoPE, then two
        copies into the cache)."""
        layer = self.layers[i]
        attn = layer.self_attn
        S, D = x.shape[1], attn.head_dim
        q, k, v = attn.qkv(rmsnorm_fused(x, layer.input_weight, layer.input_eps))
        keys, values = self.keys[i], self.values[i]
        if self.stage == "cache" and S == 1:  # norm + RoPE, then the cache write as two PyTorch copies
            q, k = rmsnorm_rope(q.view(1, 1, -1, D).transpose(1, 2), k.view(1, 1, -1, D).transpose(1, 2),
                                attn.q_weight, attn.k_weight, attn.eps, self.step_cos, self.step_sin)
            keys.index_copy_(2, position, k)
            values.index_copy_(2, position, v.view(1, 1, -1, D).transpose(1, 2))
        else:
            q = rmsnorm_rope_cache(q.view(S, -1, D), k.view(S, -1, D), v.view(S, -1, D), attn.q_weight,
                                   attn.k_weight, attn.eps, self.cos, self.sin, keys[0], values[0], position)
        if S == 1:
            out = decode_attention(q, keys, values, scale=attn.scaling, kv_len=self.kv_len)
        else:  # a prompt, written from position 0: it attends causally to its own keys
            out = prefill_attention(q, keys[:, :, :S], values[:, :, :S], scale=attn.scaling, causal=True)
        a = attn.o_proj(out.transpose(1, 2).reshape(1, S, -1))
        x2, residual = add_rmsnorm(a, x, layer.post_weight, layer.post_eps)
        return residual + layer.mlp(x2)

    def _folded_layer(self, i: int, x: torch.Tensor) -> torch.Tensor:
        """Decoder layer ``i`` for one token x [1, hidden] at ``position``, in 6 launches: q/k/v with the input
        RMSNorm; q/k norm + RoPE + the cache write; attention (and its combine when split); o_proj with the residual
        add; gate/up with the post-attention RMSNorm and the SwiGLU; down with the residual add."""
        layer = self.layers[i]
        attn = layer.self_attn
        D, tuned = attn.head_dim, self.stage == "tune"
        q, k, v = decode_gemv(x, attn.qkv.weight, norm_weight=layer.input_weight, eps=layer.input_eps,
                              tuned=tuned).split(attn.qkv.out_features, dim=-1)
        q = rmsnorm_rope_cache(q.view(1, -1, D), k.view(1, -1, D), v.view(1, -1, D), attn.q_weight, attn.k_weight,
                               attn.eps, self.cos, self.sin, self.keys[i, 0], self.values[i, 0], self.position)
        out = decode_attention(q, self.keys[i], self.values[i], scale=attn.scaling, kv_len=self.kv_len)
        h = decode_gemv(out.view(1, -1), attn.o_proj.weight, residual=x, tuned=tuned)
        act = decode_gemv(h, layer.mlp.gate_up.weight, norm_weight=layer.post_weight, eps=layer.post_eps, gated=True,
                          tuned=tuned)
        return decode_gemv(act, layer.mlp.down.weight, residual=h, tuned=tuned)

    def _logits(self, ids: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        """Logits [1, 1, vocab] of the last of ``ids`` [1, S], the first at ``position[0]``, writing their keys and
        values into the cache."""
        if self.stage == "cache" and ids.shape[1] == 1:  # the rotary rows of this step's position
            self.step_cos, self.step_sin = self.cos.index_select(0, position)[None], self.sin.index_select(0, position)[None]
        x = F.embedding(ids, self.embed)
        for i in range(len(self.layers)):
            x = self._layer(i, x, position)
        return self.lm_head(rmsnorm_fused(x[:, -1:], self.norm_weight, self.norm_eps))

    @torch.inference_mode()
    def prefill(self, ids: torch.Tensor) -> None:
        """Run the prompt ``ids`` [1, P] (the cache is overwritten from position 0) and leave its next token,
        position and key count in place."""
        if ids.dim() != 2 or ids.shape[0] != 1:
            raise ValueError(f"ids must be [1, prompt_len] (batch size 1), got shape {tuple(ids.shape)}")
        P = ids.shape[1]
        if not 1 <= P < self.max_len:
            raise ValueError(f"the prompt must be 1 to max_len - 1 = {self.max_len - 1} tokens, got {P}")
        logits = self._logits(ids, self.start)
        self.token.copy_(logits[:, -1].argmax(dim=-1, keepdim=True))
        self.position.fill_(P)
        self.kv_len.fill_(P + 1)
        self.out.zero_()
        self.out[P] = self.token[0, 0]
        self.x.copy_(F.embedding(self.token[0], self.embed))
        self.key.fill_(ARGMAX_EMPTY)

    @torch.inference_mode()
    def set_next(self, token: int) -> None:
        """Make ``token`` the one the next step reads, in place of the prefill's own pick (a step given the same
        tokens as another model, to compare their logits); ``last_logits`` then holds that step's logits."""
        self.token.fill_(token)
        self.out[self.position] = token
        self.x.copy_(F.embedding(self.token[0], self.embed))

    @torch.inference_mode()
    def step(self) -> None:
        """One decode step on the device: the token at ``position`` in, the next one stored at position + 1."""
        if self.stage in ("fold", "tune"):
            x = self.x
            for i in range(len(self.layers)):
                x = self._folded_layer(i, x)
            self.last_logits = decode_gemv(x, self.lm_head.weight, norm_weight=self.norm_weight, eps=self.norm_eps,
                                           argmax_key=self.key, tuned=self.stage == "tune")  # [1, vocab]
            hidden = self.x.shape[1]
            record(advance_kernel)
            advance_kernel[(1,)](self.key, self.token, self.position, self.kv_len, self.out, self.embed, self.x,
                                 hidden, BLOCK=triton.next_power_of_2(hidden))
            return
        logits = self._logits(self.token, self.position)
        self.last_logits = logits[:, -1]  # [1, vocab]
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
        self.position.add_(1)
        self.kv_len.add_(1)
        self.out.index_copy_(0, self.position, nxt[0])
        self.token.copy_(nxt)


def _run_by_the_model(*args, **kwargs):
    """The attention function of the layers an ``OwnCacheModel`` holds: it runs them itself (``_layer``)."""
    raise RuntimeError("OwnCacheModel runs its layers itself; they are not called as transformers layers")
