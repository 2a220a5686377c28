"""Swapping our Triton modules into the model (``patched``) and back, and the configurations the chapters compare:
``ALL_CUSTOM``, ``ALL_FAST``, chapter 9's ``STAIRCASE``; ``generate_with`` runs one configuration."""
from __future__ import annotations

from slower_harness import env  # noqa: F401  (first: it settles TRITON_INTERPRET before Triton loads)

from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

import slower_kernels
from slower_harness.decoders import decoder_for


ATTENTION_NAMES = {"slow": "slower_triton_slow", "fast": "slower_triton_fast"}  # ours in AttentionInterface
PROJECTION_GROUPS = ("attention", "mlp", "lm_head")
# Every swap at once: the fully custom model of chapters 6 to 8 (``patched(model, **ALL_CUSTOM)``).
ALL_CUSTOM = dict(rmsnorm="two_pass", projections=set(PROJECTION_GROUPS), attention="slow")
# The fast kernels at once (issue "faster on purpose"): fused decoder layers (q/k/v in one projection, q/k norm
# + RoPE in one launch, residual add + RMSNorm, the MLP in three launches), flash-decoding attention, the final
# RMSNorm fused and lm_head as a matrix-vector product.
ALL_FAST = dict(layer="fused", attention="fast", rmsnorm="fused", projections={"lm_head"}, linear="gemv")


# Chapter 9's staircase: from the all-custom model, one fix at a time (each step's patched() arguments and
# decoder; compare_configs takes them as they are). The last step is the fast model replayed from a graph.
STAIRCASE = {
    "all custom": dict(ALL_CUSTOM),
    "1. fast attention": dict(ALL_CUSTOM, attention="fast"),
    "2. fused RMSNorm": dict(ALL_CUSTOM, attention="fast", rmsnorm="fused"),
    "3. matrix-vector projections": dict(ALL_CUSTOM, attention="fast", rmsnorm="fused", linear="gemv"),
    "3b. fused MLP": dict(ALL_CUSTOM, attention="fast", rmsnorm="fused", linear="gemv", mlp="fused"),
    "4. fused layers (the fast model)": dict(ALL_FAST),
    "5. CUDA graph": dict(ALL_FAST, decoder="graph"),
}
# Chapter 10 goes on from step 5: our own decode step, one fix at a time (``slower_kernels.decoder.STAGES``).
FLOOR_STAIRCASE = {
    "6. own KV cache": dict(decoder="own-cache"),
    "7. cache write in RoPE": dict(decoder="own-write"),
    "8. folded into the gemvs": dict(decoder="own-fold"),
    "9. tuned gemv tiles": dict(decoder="own"),
}
# Beside the staircase: what the original gets from a graph alone, and transformers' own compiled path (GPU).
BESIDE_STAIRCASE = {"original, CUDA graph": dict(decoder="graph"), "transformers compiled": dict(decoder="compiled")}


def _prompt_keys(query, key, value):
    """The keys and values a prompt sees when transformers passes no mask: with more keys than queries, a
    prompt written into an empty static cache (its SDPA path aligns ``is_causal`` to the upper left, where
    the prompt's keys come first; the rest of the cache is not written yet). One query is a decode step,
    which sees every key it is given."""
    S = query.shape[-2]
    if S > 1 and key.shape[-2] > S:
        return key[:, :, :S], value[:, :, :S]
    return key, value


def _slow_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: q [B, Hq, S, D], k/v [B, Hkv, T, D] -> ([B, S, Hq, D], None).

    With sdpa-style masks, ``attention_mask`` is None whenever plain causality suffices (an unpadded
    prefill, or decode): causality is then ours to apply. Otherwise the boolean mask is honoured.
    """
    if attention_mask is not None:
        attention_mask = attention_mask[..., : key.shape[-2]]
    else:
        key, value = _prompt_keys(query, key, value)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = slower_kernels.attention_slow(query, key, value, scale=scale, causal=attention_mask is None,
                                 attn_mask=attention_mask)
    return out.transpose(1, 2).contiguous(), None


def _fast_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function through ``slower_kernels.decode_attention`` / ``slower_kernels.prefill_attention``.

    Without a mask (an unpadded prefill, or decode over every cached key) plain causality holds. With an
    sdpa-style boolean mask at batch size 1, a decode step's visible keys are a prefix of the cache (a
    static cache longer than what is written): their count is summed from the mask ON the device and read
    by the kernel, so nothing syncs and the step can be captured in a CUDA graph. A prefill into an empty
    static cache attends causally to the first S keys, the prompt's; the rest of the cache is not written
    yet. transformers drops the mask for that prefill too (its SDPA path aligns ``is_causal`` to the upper
    left, where those keys come first), so more keys than queries with no mask means the same. Anything
    else (padding, batches) is refused rather than silently wrong.
    """
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    S = query.shape[-2]
    if attention_mask is not None and query.shape[0] != 1:
        raise ValueError("the fast attention handles batch size 1 with a mask (a static cache); got batch "
                         f"{query.shape[0]} with a mask")
    if S == 1:
        kv_len = None if attention_mask is None else attention_mask[0, 0, -1, : key.shape[-2]].sum()
        out = slower_kernels.decode_attention(query, key, value, scale=scale, kv_len=kv_len)
    else:
        if attention_mask is not None:  # the prompt into an empty static cache, masked: its keys first
            key, value = key[:, :, :S], value[:, :, :S]
        key, value = _prompt_keys(query, key, value)
        out = slower_kernels.prefill_attention(query, key, value, scale=scale, causal=True)
    return out.transpose(1, 2).contiguous(), None


_ATTENTION_FUNCTIONS = {"slow": _slow_attention, "fast": _fast_attention}
CAPTURES: list = []  # active capture_module_calls() blocks: each sees the attention calls made through the registry


def attention_kind(name: str) -> str:
    """The kind an attention function is captured and priced under: "attention (fast)", "attention (sdpa)"."""
    return f"attention ({name})"


def _attention_entry(kind: str):
    """What transformers calls for ``attention=kind``: the attention function, seen by any active capture."""
    fn = _ATTENTION_FUNCTIONS[kind]

    def entry(module, query, key, value, attention_mask, **kwargs):
        for capture in CAPTURES:
            capture.attention(attention_kind(kind), query,
                              lambda: fn(module, query, key, value, attention_mask, **kwargs))
        return fn(module, query, key, value, attention_mask, **kwargs)

    entry.__name__ = fn.__name__
    return entry


_ATTENTION_ENTRIES = {kind: _attention_entry(kind) for kind in _ATTENTION_FUNCTIONS}


def _register_attention(kind: str) -> str:
    name = ATTENTION_NAMES[kind]
    AttentionInterface.register(name, _ATTENTION_ENTRIES[kind])
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)  # same masks as "sdpa"
    return name


def _projection_group(parent: torch.nn.Module, child_name: str) -> str | None:
    if child_name == "lm_head":
        return "lm_head"
    kind = type(parent).__name__
    if kind.endswith("Attention"):
        return "attention"
    if kind.endswith("MLP"):
        return "mlp"
    return None


@contextmanager
def patched(model, rmsnorm: str | None = None, projections=(), attention: str | None = None,
            tile: "slower_kernels.TileConfig" = slower_kernels.DEFAULT_TILE, linear: str = "matmul", mlp: str | None = None,
            layer: str | None = None):
    """Swap the model's modules for the Triton ones inside a ``with`` block; restore them on exit.

    rmsnorm: None, "fused" or "two_pass" -- every ``*RMSNorm`` (q_norm and k_norm included).
    projections: any subset of {"attention", "mlp", "lm_head"} -- those ``nn.Linear``s use our kernels:
      ``linear="matmul"`` the tiled ``slower_kernels.matmul`` (with ``tile``), ``linear="gemv"`` the
      matrix-vector ``slower_kernels.GemvLinear`` (a tiled matmul above ``slower_kernels.GEMV_MAX_M`` rows).
    mlp: None or "fused" -- every ``*MLP`` becomes ``slower_kernels.FastMLP`` (fused gate/up, SwiGLU, down: 3
      launches); its projections then need no ``projections`` entry.
    attention: None, "slow" (``slower_kernels.attention_slow``, per head) or "fast" (``slower_kernels.decode_attention``
      and ``slower_kernels.prefill_attention``).
    layer: None or "fused" -- every ``*DecoderLayer`` becomes ``slower_kernels.FastDecoderLayer``: q/k/v in one
      projection, q_norm/k_norm + RoPE in one launch, the residual add fused with the post-attention
      RMSNorm, ``FastMLP``; needs ``attention="fast"``. Its norms and projections then need no
      ``rmsnorm``/``projections``/``mlp`` entry (the final norm and lm_head still do).
    Yields the counts replaced. Weights are shared, never copied (``FastMLP`` concatenates gate and up once);
    on exit the original module objects and attention implementation are back, so outputs are bit-identical
    to before.
    """
    if rmsnorm not in (None, "fused", "two_pass"):
        raise ValueError(f"rmsnorm must be None, 'fused' or 'two_pass', got {rmsnorm!r}")
    projections = set(projections or ())
    if not projections <= set(PROJECTION_GROUPS):
        raise ValueError(f"projections must be a subset of {PROJECTION_GROUPS}, got {sorted(projections)}")
    if attention not in (None, *ATTENTION_NAMES):
        raise ValueError(f"attention must be None, 'slow' or 'fast', got {attention!r}")
    if linear not in ("matmul", "gemv"):
        raise ValueError(f"linear must be 'matmul' or 'gemv', got {linear!r}")
    if mlp not in (None, "fused"):
        raise ValueError(f"mlp must be None or 'fused', got {mlp!r}")
    if layer not in (None, "fused"):
        raise ValueError(f"layer must be None or 'fused', got {layer!r}")
    if layer and attention != "fast":
        raise ValueError(f"layer='fused' runs the fast attention inside it: pass attention='fast', got {attention!r}")

    counts = {"rmsnorm": 0, "attention_proj": 0, "mlp_proj": 0, "lm_head": 0, "attention": 0, "mlp": 0, "layer": 0}
    swapped = []  # (parent, name, original module), undone in reverse order
    original_attn = model.config._attn_implementation

    def swap(parent, name, child, new, key):
        new.replaces = module_kind(child)  # the kind of the original's module, for the launch budget's prices
        setattr(parent, name, new)
        swapped.append((parent, name, child))
        counts[key] += 1

    try:
        if layer:  # first: the modules inside a replaced layer are not visited below
            for parent in list(model.modules()):
                for name, child in list(parent.named_children()):
                    if type(child).__name__.endswith("DecoderLayer"):
                        swap(parent, name, child, slower_kernels.FastDecoderLayer.from_hf(child, _fast_attention), "layer")
        if mlp:  # before the projections, so that those inside a replaced MLP are not visited below
            for parent in list(model.modules()):
                for name, child in list(parent.named_children()):
                    if type(child).__name__.endswith("MLP"):
                        swap(parent, name, child, slower_kernels.FastMLP.from_hf(child), "mlp")
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if rmsnorm and type(child).__name__.endswith("RMSNorm"):
                    swap(parent, name, child, slower_kernels.TritonRMSNorm.from_hf(child, mode=rmsnorm), "rmsnorm")
                elif isinstance(child, torch.nn.Linear):
                    group = _projection_group(parent, name)
                    if group in projections:
                        new = (slower_kernels.GemvLinear.from_linear(child) if linear == "gemv" else
                               slower_kernels.TritonLinear.from_linear(child, tile=tile))
                        swap(parent, name, child, new,
                             {"attention": "attention_proj", "mlp": "mlp_proj", "lm_head": "lm_head"}[group])
        if attention:
            model.set_attn_implementation(_register_attention(attention))
            counts["attention"] = sum(type(m).__name__.endswith("Attention") for m in model.modules())
        yield counts
    finally:
        if model.config._attn_implementation != original_attn:
            model.set_attn_implementation(original_attn)
        for parent, name, child in reversed(swapped):
            setattr(parent, name, child)


def module_kind(module) -> str:
    mode = getattr(module, "mode", None)
    return type(module).__name__ + (f"({mode})" if isinstance(mode, str) else "")


def split_config(config: dict) -> tuple[dict, str, bool]:
    """A ``compare_configs`` configuration as (``patched`` arguments, decoder, use_cache)."""
    kwargs = dict(config)
    return kwargs, kwargs.pop("decoder", "generate"), kwargs.pop("use_cache", True)


def generate_with(model, config: dict, ids: torch.Tensor, new_tokens: int):
    """One greedy generation of ``new_tokens`` by a ``compare_configs`` configuration (``patched`` arguments,
    plus ``decoder`` and ``use_cache``): (new ids, seconds). Patched for this generation only."""
    kwargs, decoder, use_cache = split_config(config)
    with patched(model, **kwargs):
        return decoder_for(model, ids, new_tokens, decoder, use_cache)(new_tokens)
