"""slower_harness.capture: one decode step's module calls captured, replayed on their own, and counted."""
import pytest
import torch

from slower_harness import capture, clocks, env, patching, timing_order
from slower_harness.model import make_prompt


def test_capture_module_calls_counts_top_level_calls_and_replays_them(tiny):
    """Every kind of ours a decoded token calls from outside another of ours, per token, with a working replay."""
    ids = make_prompt(4, vocab_size=tiny.config.vocab_size)
    layers = tiny.config.num_hidden_layers
    with patching.patched(tiny, rmsnorm="fused", projections={"lm_head"}, attention="fast"):
        calls = capture.capture_module_calls(tiny, ids, 4)
        # per layer: input, post-attention, q and k norms; then the final norm. lm_head once. Attention once a layer.
        assert {k: c.per_token for k, c in calls.items()} == {
            "TritonRMSNorm(fused)": 4 * layers + 1, "TritonLinear": 1, "attention (fast)": layers}
        assert {k: c.twin for k, c in calls.items()} == {
            "TritonRMSNorm(fused)": "Qwen3RMSNorm", "TritonLinear": "Linear", "attention (fast)": "attention (sdpa)"}
        capture.count_module_calls(calls)
        assert calls["TritonRMSNorm(fused)"].ours == 1 and calls["attention (fast)"].ours >= 1
        assert (calls["TritonLinear"].kernels is None) != env.HAS_GPU
    with patching.patched(tiny, **patching.ALL_FAST):
        fast = capture.capture_module_calls(tiny, ids, 3)
    # the fused layer holds the attention, its norms and projections: only it, the final norm and lm_head count
    assert {k: c.per_token for k, c in fast.items()} == {
        "FastDecoderLayer": layers, "TritonRMSNorm(fused)": 1, "GemvLinear": 1}
    assert {k: c.twin for k, c in fast.items()} == {  # the final norm's, not one inside a fused layer's (None)
        "FastDecoderLayer": "Qwen3DecoderLayer", "TritonRMSNorm(fused)": "Qwen3RMSNorm", "GemvLinear": "Linear"}
    out = fast["FastDecoderLayer"].replay()  # outside the patch: the captured module still runs
    assert out.shape[-2] == 1
    layer = fast["FastDecoderLayer"]  # each replay appends a position to the captured cache; reset takes them off
    layer.reset()
    first = layer.replay().clone()
    for _ in range(3):
        layer.replay()
    grown = layer.replay()
    layer.reset()
    assert torch.equal(layer.replay(), first) and not torch.equal(grown, first)
    assert fast["GemvLinear"].reset is None  # no cache to put back
    timing_order.PROFILED_BY.clear()  # counted above; the timing below only checks that it runs
    assert clocks.host_us_alone(fast["GemvLinear"].replay, calls=1, repeats=1) > 0
    assert not patching.CAPTURES and not any(m._forward_pre_hooks for m in tiny.modules())
    with pytest.raises(ValueError, match="new_tokens must be at least 2"):
        capture.capture_module_calls(tiny, ids, 1)


def test_capture_module_calls_of_the_original_counts_every_call_of_each_kind(tiny):
    """The original's kinds are counted each on its own, inside one another or not, the attention function too."""
    ids = make_prompt(4, vocab_size=tiny.config.vocab_size)
    layers = tiny.config.num_hidden_layers
    kinds = {"Linear", "Qwen3RMSNorm", "Qwen3MLP", "Qwen3DecoderLayer", "attention (sdpa)"}
    calls = capture.capture_module_calls(tiny, ids, 3, kinds=kinds)
    # per layer: 7 projections (3 of them inside the MLP), 4 norms; then lm_head and the final norm
    assert {k: c.per_token for k, c in calls.items()} == {
        "Linear": 7 * layers + 1, "Qwen3RMSNorm": 4 * layers + 1, "Qwen3MLP": layers, "Qwen3DecoderLayer": layers,
        "attention (sdpa)": layers}
    assert all(c.twin is None for c in calls.values())
    out, _ = calls["attention (sdpa)"].replay()  # transformers' own function, with the step's arguments
    assert out.shape[1] == 1
    layer = calls["Qwen3DecoderLayer"]
    layer.reset()
    first = layer.replay()
    layer.reset()
    assert torch.equal(layer.replay(), first)
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward  # put back
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in tiny.modules())
    with patching.patched(tiny, rmsnorm="fused", attention="fast"):
        ours = capture.capture_module_calls(tiny, ids, 3, original_attention="eager")
    assert ours["attention (fast)"].twin == "attention (eager)"
    tiny.set_attn_implementation("eager")  # transformers' fallback, not a registered function: refused, nothing left
    try:
        with pytest.raises(ValueError, match=r"'attention \(eager\)' is not a registered attention function"):
            capture.capture_module_calls(tiny, ids, 3, kinds={"Linear", "attention (eager)"})
    finally:
        tiny.set_attn_implementation("sdpa")
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in tiny.modules())
