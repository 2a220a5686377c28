"""Thin nn.Module wrappers that hold a model's weights and call the launchers (inference only)."""

import torch
from torch import nn

from .configs import DEFAULT_TILE, TILE_CONFIGS, TileConfig
from .fused import add_rmsnorm, rmsnorm_rope, swiglu_packed
from .gemv import FusedLinear, GemvLinear, small_m_linear
from .matmul import linear
from .rmsnorm import rmsnorm_fused, rmsnorm_two_pass

_RMSNORMS = {"fused": rmsnorm_fused, "two_pass": rmsnorm_two_pass}


def layer_cache(cache=None, past_key_values=None):
    """The KV cache a transformers decoder passes to its layers: named ``cache`` from transformers 5.25 on,
    ``past_key_values`` before. A block that read only one name would miss the other's cache without an
    error (every decode step then attends to its own token alone), so both are read, and two different
    caches at once are refused."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("cache and past_key_values name two different KV caches: pass one")
    return cache if cache is not None else past_key_values


class TritonRMSNorm(nn.Module):
    """RMSNorm through ``rmsnorm_fused`` (1 launch) or ``rmsnorm_two_pass`` (2 launches)."""

    def __init__(self, weight: nn.Parameter, eps: float = 1e-6, mode: str = "fused"):
        super().__init__()
        if mode not in _RMSNORMS:
            raise ValueError(f"mode must be one of {sorted(_RMSNORMS)}, got {mode!r}")
        self.weight = weight  # the caller's Parameter itself, not a copy
        self.eps = eps
        self.mode = mode

    @classmethod
    def from_hf(cls, hf_norm: nn.Module, mode: str = "fused") -> "TritonRMSNorm":
        """Wrap a transformers ``Qwen3RMSNorm``, sharing its weight Parameter and its eps."""
        return cls(hf_norm.weight, hf_norm.variance_epsilon, mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNORMS[self.mode](x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}, mode={self.mode}"


class TritonLinear(nn.Module):
    """nn.Linear through the Triton ``matmul`` with one tile configuration."""

    def __init__(
        self, weight: nn.Parameter, bias: nn.Parameter | None = None, tile: TileConfig | str = DEFAULT_TILE
    ):
        super().__init__()
        if isinstance(tile, str):
            if tile not in TILE_CONFIGS:
                raise ValueError(f"tile must be a TileConfig or one of {list(TILE_CONFIGS)}, got {tile!r}")
            tile = TILE_CONFIGS[tile]
        self.weight = weight  # [out_features, in_features], shared with the wrapped module
        self.register_parameter("bias", bias)  # bias may be None
        self.out_features, self.in_features = weight.shape
        self.tile = tile

    @classmethod
    def from_linear(cls, lin: nn.Linear, tile: TileConfig | str = DEFAULT_TILE) -> "TritonLinear":
        """Wrap an ``nn.Linear``, sharing its weight and bias Parameters."""
        return cls(lin.weight, lin.bias, tile)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, **self.tile.kwargs())

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, tile={self.tile.name}"
        )


class FastMLP(nn.Module):
    """Qwen3's MLP, ``down(silu(gate(x)) * up(x))``, in three launches: one fused gate/up projection
    (``FusedLinear``: the two weights concatenated once), one SwiGLU reading both halves in place
    (``swiglu_packed``), and the down projection (``GemvLinear``). PyTorch's eager MLP launches five
    kernels or more. The concatenated weight is a copy (2 x intermediate x hidden elements per layer);
    the wrapped module's own Parameters stay untouched, so restoring it is exact.
    """

    def __init__(self, gate_proj: nn.Linear, up_proj: nn.Linear, down_proj: nn.Linear):
        super().__init__()
        self.gate_up = FusedLinear.from_linears(gate_proj, up_proj)
        self.down = GemvLinear.from_linear(down_proj)

    @classmethod
    def from_hf(cls, mlp: nn.Module) -> "FastMLP":
        """Wrap a transformers ``Qwen3MLP`` (SiLU-gated: its config's ``hidden_act`` must be "silu")."""
        act = getattr(getattr(mlp, "config", None), "hidden_act", None)
        if act not in ("silu", "swish"):
            raise ValueError(f"mlp.config.hidden_act must be 'silu' (a SwiGLU MLP), got {act!r}")
        return cls(mlp.gate_proj, mlp.up_proj, mlp.down_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = small_m_linear(x, self.gate_up.weight, self.gate_up.bias)  # [..., 2 * I], one launch
        return self.down(swiglu_packed(gate_up))


class FastAttention(nn.Module):
    """Qwen3's attention block with its launches cut: q, k and v in ONE projection (``FusedLinear``),
    q_norm / k_norm and RoPE in ONE launch (``rmsnorm_rope``), the attention itself through
    ``attention_fn``, and o_proj through ``GemvLinear``. transformers' own block launches about 20
    kernels for the same (three projections, two RMSNorms of several ops each, ten for RoPE).

    ``attention_fn`` has transformers' attention-function signature, ``fn(module, q [B, Hq, S, D],
    k/v [B, Hkv, T, D], attention_mask, scaling=...) -> ([B, S, Hq, D], weights)``: the caller decides
    which kernel runs (this package knows no model library). The KV cache is the caller's too: any
    object with transformers' ``update(k, v, layer_idx)``. The fused q/k/v weight is a copy made once;
    the wrapped module's Parameters stay untouched, so restoring it is exact.
    """

    def __init__(self, q_proj: nn.Linear, k_proj: nn.Linear, v_proj: nn.Linear, o_proj: nn.Linear,
                 q_norm: nn.Module, k_norm: nn.Module, head_dim: int, layer_idx: int, scaling: float,
                 attention_fn, config=None):
        super().__init__()
        if not callable(attention_fn):
            raise TypeError(f"attention_fn must be callable, got {type(attention_fn).__name__}")
        self.qkv = FusedLinear.from_linears(q_proj, k_proj, v_proj)
        self.o_proj = GemvLinear.from_linear(o_proj)
        self.q_weight, self.k_weight = q_norm.weight, k_norm.weight  # the wrapped norms' Parameters
        self.eps = q_norm.variance_epsilon
        self.head_dim, self.layer_idx, self.scaling = head_dim, layer_idx, scaling
        self.attention_fn = attention_fn
        self.config = config  # what an attention function may read from its module
        self.is_causal = True

    @classmethod
    def from_hf(cls, attn: nn.Module, attention_fn) -> "FastAttention":
        """Wrap a transformers ``Qwen3Attention`` (q/k/v/o projections, q_norm and k_norm)."""
        return cls(attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, attn.q_norm, attn.k_norm, attn.head_dim,
                   attn.layer_idx, attn.scaling, attention_fn, getattr(attn, "config", None))

    def forward(self, hidden_states, position_embeddings, attention_mask=None, cache=None, past_key_values=None,
                **kwargs):
        cache = layer_cache(cache, past_key_values)
        B, S, _ = hidden_states.shape
        D = self.head_dim
        q, k, v = self.qkv(hidden_states)  # views of one [B, S, (Hq + 2 Hkv) * D] result: ONE launch
        q = q.view(B, S, -1, D).transpose(1, 2)  # (B, Hq, S, D), strided: read in place
        k = k.view(B, S, -1, D).transpose(1, 2)  # (B, Hkv, S, D)
        v = v.view(B, S, -1, D).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = rmsnorm_rope(q, k, self.q_weight, self.k_weight, self.eps, cos, sin)  # ONE launch
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        kwargs.pop("position_ids", None)
        kwargs.pop("use_cache", None)
        out, weights = self.attention_fn(self, q, k, v, attention_mask, scaling=self.scaling, **kwargs)
        return self.o_proj(out.reshape(B, S, -1)), weights


class FastDecoderLayer(nn.Module):
    """One Qwen3 decoder layer with the fast blocks: RMSNorm (1 launch), ``FastAttention``, the residual
    add fused with post_attention_layernorm (``add_rmsnorm``: 1 launch instead of 2), ``FastMLP`` and the
    last residual add (1 PyTorch launch). About 12 launches per layer and decode step, against about 55
    for transformers' layer. Shares the wrapped layer's norm weights; restoring the layer is exact.
    """

    def __init__(self, layer: nn.Module, attention_fn):
        super().__init__()
        self.input_weight, self.input_eps = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.post_weight = layer.post_attention_layernorm.weight
        self.post_eps = layer.post_attention_layernorm.variance_epsilon
        self.self_attn = FastAttention.from_hf(layer.self_attn, attention_fn)
        self.mlp = FastMLP.from_hf(layer.mlp)

    @classmethod
    def from_hf(cls, layer: nn.Module, attention_fn) -> "FastDecoderLayer":
        """Wrap a transformers ``Qwen3DecoderLayer``."""
        return cls(layer, attention_fn)

    def forward(self, hidden_states, attention_mask=None, position_embeddings=None, cache=None,
                past_key_values=None, **kwargs):
        cache = layer_cache(cache, past_key_values)
        if position_embeddings is None:
            raise ValueError("position_embeddings (cos, sin) must be given: the decoder model computes them once")
        x = rmsnorm_fused(hidden_states, self.input_weight, self.input_eps)
        a, _ = self.self_attn(x, position_embeddings, attention_mask, cache, **kwargs)
        x, residual = add_rmsnorm(a, hidden_states, self.post_weight, self.post_eps)  # residual + a, normed
        return residual + self.mlp(x)
