"""A decode step of our own: the fast layers over a KV cache of our own, with no model library in the step.

transformers' ``StaticCache`` and the model's forward around our fused layers bring kernels that one sequence at
batch size 1 does not need: a write index per layer, masks built every step, the rotary table computed every step,
copies. Here the cache is two preallocated tensors per layer, written at a position that lives on the device; the
rotary table is computed once for every position; decode attention reads the cache up to a length on the device;
the greedy argmax and the next position are computed on the device too. Nothing in ``step`` reads a value back to
the host, so one step can be captured in a CUDA graph and replayed once per token.
"""

import torch
from torch import nn
from torch.nn import functional as F

from .fast_attention import decode_attention, prefill_attention
from .gemv import GemvLinear
from .modules import FastDecoderLayer
from .rmsnorm import rmsnorm_fused


class OwnKVCache:
    """Keys and values of every layer, [layers, 1, Hkv, max_len, D] each, written at ``positions`` (a device
    tensor set by the caller before each forward). ``update`` has transformers' signature, so the fast layers
    write through it as they write through a transformers cache."""

    def __init__(self, layers: int, kv_heads: int, max_len: int, head_dim: int, dtype, device):
        self.keys = torch.zeros(layers, 1, kv_heads, max_len, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros_like(self.keys)
        self.positions = None

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int):
        self.keys[layer_idx].index_copy_(2, self.positions, k)
        self.values[layer_idx].index_copy_(2, self.positions, v)
        return self.keys[layer_idx], self.values[layer_idx]


class OwnCacheModel(nn.Module):
    """Greedy decoding of a transformers Qwen3-style causal LM through our fast layers and our own KV cache.

    State on the device: ``token`` [1, 1] (the token the next step reads), ``position`` [1] (its position),
    ``kv_len`` [1] (keys in the cache once it is written: position + 1) and ``out`` [max_len] (every generated
    token, by position). ``prefill(ids)`` runs the prompt and leaves its next token in place; ``step()`` decodes
    one token and advances, without a host synchronisation. Shares the model's weights (the fused q/k/v and
    gate/up weights are copies made once, as ``FastDecoderLayer`` makes them); the model itself is not modified.
    """

    def __init__(self, model: nn.Module, max_len: int):
        super().__init__()
        if not isinstance(max_len, int) or max_len < 2:
            raise ValueError(f"max_len must be an int >= 2 (prompt + new tokens), got {max_len!r}")
        decoder, config = model.model, model.config
        self.embed = decoder.embed_tokens.weight
        self.layers = nn.ModuleList(FastDecoderLayer.from_hf(layer, self._attention) for layer in decoder.layers)
        self.norm_weight, self.norm_eps = decoder.norm.weight, decoder.norm.variance_epsilon
        self.lm_head = GemvLinear.from_linear(model.lm_head)
        device, dtype = self.embed.device, self.embed.dtype
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.cache = OwnKVCache(len(self.layers), config.num_key_value_heads, max_len, head_dim, dtype, device)
        with torch.no_grad():  # the rotary table of every position, once: [1, max_len, head_dim] each
            positions = torch.arange(max_len, device=device)[None]
            self.cos, self.sin = decoder.rotary_emb(self.embed[:1][None], positions)
        self.max_len = max_len
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.kv_len = torch.ones(1, dtype=torch.long, device=device)
        self.out = torch.zeros(max_len, dtype=torch.long, device=device)

    def _attention(self, module, q, k, v, attention_mask, scaling=None, **kwargs):
        """The layers' attention function: one query reads the cache up to ``kv_len`` (on the device); a prompt
        of S queries attends causally to its own S keys, the first S of the cache."""
        S = q.shape[-2]
        if S == 1:
            out = decode_attention(q, k, v, scale=scaling, kv_len=self.kv_len)
        else:
            out = prefill_attention(q, k[:, :, :S], v[:, :, :S], scale=scaling, causal=True)
        return out.transpose(1, 2).contiguous(), None

    def _logits(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits [1, 1, vocab] of the last of ``ids`` [1, S], at ``positions`` [S], writing their keys and values."""
        x = F.embedding(ids, self.embed)
        cos, sin = self.cos.index_select(1, positions), self.sin.index_select(1, positions)
        self.cache.positions = positions
        for layer in self.layers:
            x = layer(x, None, (cos, sin), cache=self.cache)
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
        logits = self._logits(ids, torch.arange(P, device=ids.device))
        self.token.copy_(logits[:, -1].argmax(dim=-1, keepdim=True))
        self.position.fill_(P)
        self.kv_len.fill_(P + 1)
        self.out.zero_()
        self.out[P] = self.token[0, 0]

    @torch.inference_mode()
    def step(self) -> None:
        """One decode step on the device: the token at ``position`` in, the next one stored at position + 1."""
        logits = self._logits(self.token, self.position)
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
        self.position.add_(1)
        self.kv_len.add_(1)
        self.out.index_copy_(0, self.position, nxt[0])
        self.token.copy_(nxt)
