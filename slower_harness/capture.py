"""One decode step's module calls, captured to be replayed and priced on their own: ours, or the original's modules
that ours replace (``capture_module_calls``), with the kernels each launches (``count_module_calls``)."""
from __future__ import annotations

from slower_harness import env  # first: it settles TRITON_INTERPRET before Triton loads

import torch
from transformers import AttentionInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

import slower_kernels
from slower_harness.budget import ModuleCall
from slower_harness.clocks import kernel_stats, sync
from slower_harness import decoders
from slower_harness.patching import CAPTURES, attention_kind, module_kind
from slower_harness.timing_order import profiled


def _is_ours(module) -> bool:
    return type(module).__module__.split(".")[0] == "slower_kernels"


class _Capture:
    """Counts and captures module calls (see capture_module_calls): ours that no other module of ours makes,
    or, with ``nested``, every call of the hooked kinds, inside one another or not."""

    def __init__(self, nested: bool = False, attention_twin: str | None = None):
        self.depth, self.forwards, self.counting, self.nested = 0, 0, False, nested
        self.attention_twin = attention_twin  # what the attention function seen here replaced (None: it is the model's)
        self.counts: dict = {}
        self.replays: dict = {}
        self.resets: dict = {}
        self.twins: dict = {}

    def _seen(self, kind: str, is_decode: bool, replay, twin: str | None) -> None:
        if not self.counting or (self.depth and not self.nested):
            return
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.twins.setdefault(kind, twin)  # from a counted call (a norm inside a fused layer replaced nothing itself)
        if is_decode and self.forwards > 1 and kind not in self.replays:  # a decode step, not the prefill
            self.replays[kind] = replay

    def attention(self, kind: str, query, replay) -> None:
        self._seen(kind, query.shape[-2] == 1, replay, self.attention_twin)

    def pre(self, module, args, kwargs) -> None:
        call_kwargs = dict(kwargs)
        kind = module_kind(module)
        fresh = kind not in self.replays
        self._seen(kind, True, lambda: module(*args, **call_kwargs), getattr(module, "replaces", None))
        if fresh and kind in self.replays:
            self.resets[kind] = _cache_reset(slower_kernels.layer_cache(call_kwargs.get("cache"),
                                                                 call_kwargs.get("past_key_values")))
        self.depth += 1

    def post(self, module, args, output) -> None:
        self.depth -= 1


def _cache_reset(cache):
    """A function putting ``cache`` (a transformers cache, or None) back to its state now; None if there is nothing
    to put back. Its layers' keys and values are replaced on every update, never written in place, so holding
    on to the tensors it has now keeps the state it has now."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return None
    saved = [(layer, layer.keys, layer.values) for layer in layers if hasattr(layer, "keys")]

    def reset():
        for layer, keys, values in saved:
            layer.keys, layer.values = keys, values

    return reset


def capture_module_calls(model, ids: torch.Tensor, new_tokens: int, use_cache: bool = True,
                         kinds=None, original_attention: str = "sdpa") -> dict:
    """kind -> ``ModuleCall``: one captured decode-step call of each kind of module, with its calls per token.

    Ours (``kinds`` None; call inside a ``patched`` block): every kind of module of ours that a decoded token
    calls from outside another of ours (a ``FastDecoderLayer``, not the ``GemvLinear`` inside it), and the
    attention function where transformers calls it; each call's ``twin`` names the original's kind it
    replaced (``original_attention``, the model's own attention implementation, ``load_model``'s "sdpa" unless
    given, names the attention function's).
    The original's (``kinds``: names such as "Linear", "Qwen3RMSNorm", "attention (sdpa)"; call on the
    unpatched model): every call of those kinds, each counted on its own, inside one another or not (a
    ``Qwen3MLP`` call and the three ``Linear`` calls inside it), so that each can be priced against the
    module of ours that replaces it.

    Calls per token come from a ``new_tokens``-token generation minus a 1-token one (prefill excluded);
    each kind's replay is its first call of a decode step, made again with the same arguments under
    ``torch.inference_mode``. A replay of a block that appends to the KV cache (a decoder layer) appends one
    more position to the captured cache (the captured generation's own); its ``reset`` puts the cache back
    as it was at the captured call, so that replays start from the keys the decode step saw (more keys can
    change the kernels: the decode attention splits long ones). Kinds are counted by the module's class, so
    two shapes of one class (q_norm and the layer norm) share one price, the first one met."""
    if new_tokens < 2:
        raise ValueError(f"new_tokens must be at least 2 (one decoded token past the prefill), got {new_tokens}")
    twin_mode = kinds is not None
    kinds = set(kinds or ())
    impl = model.config._attn_implementation
    own_kind = attention_kind(impl)
    wrapped = None
    if twin_mode and own_kind in kinds:  # the model's own attention function, seen where transformers calls it
        if impl not in ALL_ATTENTION_FUNCTIONS:  # refused before any hook is in place
            raise ValueError(f"kinds: {own_kind!r} is not a registered attention function; capture it with "
                             "a model that uses one (load_model() uses 'sdpa')")
        wrapped = ALL_ATTENTION_FUNCTIONS[impl]
    capture = _Capture(nested=twin_mode, attention_twin=None if twin_mode else attention_kind(original_attention))
    mods = [m for m in model.modules() if (module_kind(m) in kinds and not _is_ours(m) if twin_mode else _is_ours(m))]
    hooks = [m.register_forward_pre_hook(capture.pre, with_kwargs=True) for m in mods]
    hooks += [m.register_forward_hook(capture.post) for m in mods]

    def forward(_module, _args):
        capture.forwards += 1

    hooks.append(model.register_forward_pre_hook(forward))
    if wrapped is not None:
        def entry(module, query, key, value, attention_mask, **kwargs):
            capture.attention(own_kind, query, lambda: wrapped(module, query, key, value, attention_mask, **kwargs))
            return wrapped(module, query, key, value, attention_mask, **kwargs)

        AttentionInterface.register(impl, entry)
    elif not twin_mode:
        CAPTURES.append(capture)
    counts = []
    try:
        for n in (new_tokens, 1):
            capture.counts, capture.forwards, capture.counting = {}, 0, True
            decoders.generate(model, ids, n, use_cache)
            capture.counting = False
            counts.append(capture.counts)
    finally:
        if wrapped is not None:
            AttentionInterface.register(impl, wrapped)
        if capture in CAPTURES:
            CAPTURES.remove(capture)
        for h in hooks:
            h.remove()
    many, one = counts

    def in_inference(replay):
        def call():
            with torch.inference_mode():
                return replay()
        return call

    out = {}
    for kind, n in many.items():
        per_token = (n - one.get(kind, 0)) / (new_tokens - 1)
        if per_token > 0 and kind in capture.replays:
            out[kind] = ModuleCall(kind, per_token, in_inference(capture.replays[kind]),
                                   reset=capture.resets.get(kind), twin=capture.twins.get(kind))
    return out


def count_module_calls(calls: dict) -> None:
    """Fill each ``ModuleCall``'s kernels per call (torch.profiler, on a GPU) and our launches per call."""
    profiled("count_module_calls")
    for call in calls.values():
        reset = call.reset or (lambda: None)
        reset()
        call.replay()
        sync()
        reset()
        with slower_kernels.count_launches() as counted:
            call.replay()
        call.ours = float(sum(counted.values()))
        reset()
        call.kernels = float(kernel_stats(call.replay)[0]) if env.HAS_GPU else None
        reset()
