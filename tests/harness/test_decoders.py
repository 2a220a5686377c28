"""slower_harness.decoders: how a configuration generates (``generate``, ``GraphDecoder``, ``decoder_for``)."""
import copy

import pytest
import torch

from slower_harness import compare, decoders, env, patching
from slower_harness.model import make_prompt

import slower_kernels


def test_decoders_reject_what_they_cannot_do(tiny):
    ids = make_prompt(4, vocab_size=tiny.config.vocab_size)
    with pytest.raises(ValueError, match="decoder must be one of"):
        decoders.decoder_for(tiny, ids, 3, "vllm")
    with pytest.raises(ValueError, match="use_cache=False does not apply"):
        decoders.decoder_for(tiny, ids, 3, "graph", use_cache=False)
    with pytest.raises(ValueError, match=r"configs\['g'\]: decoder must be one of"):
        compare.compare_configs(tiny, {"g": dict(decoder="graph", use_cache=False)}, rounds=1)
    if not env.HAS_GPU:
        with pytest.raises(ValueError, match="needs a GPU"):
            decoders.decoder_for(tiny, ids, 3, "compiled")


# --- The decode step without the host -----------------------------------------------------------
def test_graph_decoder_generates_what_generate_does(tiny):
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    expected, _ = decoders.generate(tiny, ids, 6)
    decoder = decoders.GraphDecoder(tiny, max_len=16)
    assert decoder.graphed == env.HAS_GPU
    for _ in range(2):  # the cache is reset between generations: the second is the same as the first
        new, seconds = decoder.generate(ids, 6)
        assert torch.equal(new, expected.cpu()) and seconds > 0
    shorter, _ = decoder.generate(ids[:, :3], 4)  # another prompt length, the same captured step
    assert torch.equal(shorter, decoders.generate(tiny, ids[:, :3], 4)[0].cpu())
    kept = decoder.generate(ids, 6)[0]
    decoder.generate(ids, 1)  # the next generation must not rewrite tokens already handed back
    assert torch.equal(kept, expected.cpu())


@pytest.mark.skipif(not env.HAS_GPU, reason="CUDA graphs need a GPU")
def test_graph_replay_generates_what_the_eager_step_does(tiny):
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    eager = decoders.GraphDecoder(tiny, max_len=32, use_graph=False).generate(ids, 20)[0]
    graphed = decoders.GraphDecoder(tiny, max_len=32, use_graph=True)
    assert graphed.graphed and torch.equal(graphed.generate(ids, 20)[0], eager)


@pytest.mark.skipif(not env.HAS_GPU, reason="CUDA graphs need a GPU")
def test_the_fast_model_replayed_from_a_graph_generates_what_it_does_eagerly(tiny):
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    with patching.patched(tiny, **patching.ALL_FAST):  # one patch for both: a graph holds the fused weights
        eager = decoders.GraphDecoder(tiny, max_len=32, use_graph=False).generate(ids, 20)[0]
        graphed = decoders.GraphDecoder(tiny, max_len=32, use_graph=True)
        assert graphed.graphed and torch.equal(graphed.generate(ids, 20)[0], eager)


def test_graph_decoder_rejects_bad_input(tiny):
    with pytest.raises(ValueError, match="max_len must be an int >= 2"):
        decoders.GraphDecoder(tiny, max_len=1)
    decoder = decoders.GraphDecoder(tiny, max_len=8, use_graph=False)
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    with pytest.raises(ValueError, match=r"new_tokens must be in \[1, max_len - prompt_len\] = \[1, 3\]"):
        decoder.generate(ids, 4)
    with pytest.raises(ValueError, match="batch size 1"):
        decoder.generate(ids[0], 2)
    if not env.HAS_GPU:
        with pytest.raises(ValueError, match="use_graph=True needs a CUDA GPU"):
            decoders.GraphDecoder(tiny, max_len=8, use_graph=True)


@pytest.mark.parametrize("decoder", decoders.OWN_DECODERS)
def test_our_own_kv_cache_decodes_the_originals_greedy_tokens(tiny32, decoder):
    """The decode step of our own (the fast layers over our own KV cache, position and argmax on the device), at
    every stage, eager and, on a GPU, replayed from a CUDA graph, generates the original's greedy tokens in fp32 up
    to its first near-tie, and leaves the model as it was."""
    from transformers import GenerationConfig

    prompt, n = make_prompt(7, vocab_size=tiny32.config.vocab_size), 8
    config = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, output_scores=True,
                              return_dict_in_generate=True, pad_token_id=0)
    with torch.inference_mode():
        ref = tiny32.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)
    expected = ref.sequences[0, prompt.shape[1]:].cpu().tolist()
    top2 = torch.stack(ref.scores).float().topk(2, dim=-1).values[:, 0]
    clear = next((i for i, gap in enumerate((top2[:, 0] - top2[:, 1]).tolist()) if gap <= 5e-2), n)
    assert clear >= 4 and len(set(expected)) > n // 2, "the reference is no test of the decode steps"
    modules = [type(m).__name__ for m in tiny32.modules()]
    for graphed in [False] + [True] * env.HAS_GPU:
        own = decoders.OwnCacheDecoder(tiny32, max_len=16, use_graph=graphed, stage=decoders.OWN_DECODERS[decoder])
        got = own.generate(prompt, n)[0].cpu().tolist()
        assert got[:clear] == expected[:clear], f"graphed={graphed}"
        again = own.generate(prompt, 5)[0].cpu().tolist()  # a second generation restarts from the prompt
        assert again[:min(clear, 5)] == expected[:min(clear, 5)]
    assert [type(m).__name__ for m in tiny32.modules()] == modules


def test_every_stage_of_our_own_step_decodes_the_fast_models_tokens_in_fp16(tiny32):
    """In fp16, where every rounding shows: each stage of our own step generates the greedy tokens of the fast model
    decoding eagerly in transformers' static cache, exactly on the CPU (the interpreter sums in one order) and up to
    the first near-tie on a GPU, where a tuned tile may sum in another; in the launches per token each stage
    promises."""
    model = copy.deepcopy(tiny32).to(torch.float16)  # the fixture's fp32 weights stay as they are for other tests
    prompt, n = make_prompt(7, vocab_size=model.config.vocab_size), 10
    with patching.patched(model, **patching.ALL_FAST):
        eager = decoders.GraphDecoder(model, max_len=20, use_graph=False)
        expected = eager.generate(prompt, n)[0].cpu().tolist()
    assert len(set(expected)) > n // 2, "the reference is no test of the decode steps"
    layers = model.config.num_hidden_layers
    # our kernels per token: 9 per layer and the final norm and lm_head, then 6 per layer and 2 once folded
    per_token = {"cache": 9 * layers + 2, "write": 9 * layers + 2, "fold": 6 * layers + 2, "tune": 6 * layers + 2}
    for decoder, stage in decoders.OWN_DECODERS.items():
        own = decoders.OwnCacheDecoder(model, max_len=20, use_graph=False, stage=stage)
        got = own.generate(prompt, n)[0].cpu().tolist()
        if env.HAS_GPU:
            assert got[:3] == expected[:3], decoder
        else:
            assert got == expected, decoder
        with slower_kernels.count_launches() as launches:
            own.own.step()
        assert sum(launches.values()) == per_token[stage], (decoder, launches)
        if env.HAS_GPU and stage in ("fold", "tune"):  # and no PyTorch kernel besides: every kernel is ours
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                own.own.step()
                torch.cuda.synchronize()
            kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            assert len(kernels) == per_token[stage], (decoder, kernels)


def test_our_own_kv_cache_refuses_what_does_not_fit(tiny):
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    with pytest.raises(ValueError, match="max_len must be an int >= 2"):
        decoders.OwnCacheDecoder(tiny, max_len=1)
    with pytest.raises(ValueError, match=r"new_tokens must be in \[1, max_len - prompt_len\] = \[1, 3\]"):
        decoders.OwnCacheDecoder(tiny, max_len=8, use_graph=False).generate(ids, 4)
    with pytest.raises(ValueError, match="batch size 1"):
        decoders.OwnCacheDecoder(tiny, max_len=8, use_graph=False).own.prefill(ids[0])
    with patching.patched(tiny, **patching.ALL_FAST), pytest.raises(ValueError, match="already swapped"):
        decoders.OwnCacheDecoder(tiny, max_len=8, use_graph=False)
