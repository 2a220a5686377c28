"""slower_harness.patching: our kernels swapped into the model and back (``patched``), the configurations, and the
whole model under our kernels end to end (a tiny Qwen3 in CPU mode, a Qwen3-0.6B-shaped one on the meta device)."""
import pytest
import torch

import slower_kernels
from slower_harness import env, patching, specs
from slower_harness.decoders import GraphDecoder, generate
from slower_harness.model import make_prompt, module_census

from .conftest import MODEL_TOL, logits

ALL_SWAPS = patching.ALL_CUSTOM


def test_patch_counts_on_qwen3_0_6b_shape():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**specs.QWEN3_0_6B, attn_implementation="sdpa"))
    census = module_census(model)
    assert (census["rmsnorm"], census["linear"], census["attention"]) == (113, 197, 28)
    assert census["parameters"] == 596_049_920
    with patching.patched(model, **ALL_SWAPS) as counts:
        assert counts == {"rmsnorm": 113, "attention_proj": 112, "mlp_proj": 84, "lm_head": 1, "attention": 28,
                          "mlp": 0, "layer": 0}
        for layer in model.model.layers:
            assert isinstance(layer.self_attn.q_norm, slower_kernels.TritonRMSNorm)
            assert isinstance(layer.self_attn.k_norm, slower_kernels.TritonRMSNorm)
            assert isinstance(layer.mlp.down_proj, slower_kernels.TritonLinear)
        assert model.config._attn_implementation == patching.ATTENTION_NAMES["slow"]
    assert model.config._attn_implementation == "sdpa"
    assert not any(isinstance(m, (slower_kernels.TritonRMSNorm, slower_kernels.TritonLinear)) for m in model.modules())


@pytest.mark.parametrize("projections, expected", [({"attention"}, (56, 0, 0)), ({"mlp"}, (0, 42, 0)),
                                                   ({"lm_head"}, (0, 0, 1))])
def test_patch_groups_are_separate(projections, expected):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**dict(specs.QWEN3_0_6B, num_hidden_layers=14)))
    with patching.patched(model, projections=projections) as counts:
        assert (counts["attention_proj"], counts["mlp_proj"], counts["lm_head"]) == expected
        assert counts["rmsnorm"] == counts["attention"] == 0


def test_patch_shares_weights_and_restores_the_same_objects(tiny, ids):
    before_modules = dict(tiny.named_modules())
    before = logits(tiny, ids)
    with patching.patched(tiny, **ALL_SWAPS):
        patched_q = tiny.model.layers[0].self_attn.q_proj
        assert patched_q.weight is before_modules["model.layers.0.self_attn.q_proj"].weight
        assert tiny.lm_head.weight is tiny.model.embed_tokens.weight  # tied weights stay tied
    after = logits(tiny, ids)
    assert torch.equal(before, after)  # bit-identical
    assert all(before_modules[name] is module for name, module in tiny.named_modules())
    assert tiny.config._attn_implementation == "sdpa"


def test_patch_restores_after_an_exception(tiny, ids):
    before = logits(tiny, ids)
    with pytest.raises(RuntimeError, match="boom"):
        with patching.patched(tiny, **ALL_SWAPS):
            raise RuntimeError("boom")
    assert torch.equal(before, logits(tiny, ids))
    assert tiny.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("swaps", [dict(rmsnorm="fused"), dict(rmsnorm="two_pass"), dict(projections={"attention"}),
                                   dict(projections={"mlp", "lm_head"}), dict(attention="slow"), ALL_SWAPS])
def test_patched_prefill_matches_original(tiny, ids, swaps):
    expected = logits(tiny, ids)
    with patching.patched(tiny, **swaps) as counts:
        assert sum(counts.values()) > 0
        got = logits(tiny, ids)
    torch.testing.assert_close(got, expected, **MODEL_TOL[got.dtype])


def test_patched_decode_with_cache_matches_original(tiny, ids):
    """Decode steps (S = 1 against a growing KV cache) give the original's logits, step by step."""
    from transformers import DynamicCache

    def run():
        cache, steps, x = DynamicCache(), [], ids
        with torch.inference_mode():
            for _ in range(3):
                out = tiny(x, past_key_values=cache, use_cache=True)
                steps.append(out.logits[:, -1])
                x = out.logits[:, -1:].argmax(-1)
        return torch.stack(steps)

    expected = run()
    with patching.patched(tiny, **ALL_SWAPS):
        got = run()
    torch.testing.assert_close(got, expected, **MODEL_TOL[got.dtype])


def test_slow_attention_honours_a_padding_mask(tiny):
    """Left-padded batch: the mask reaches attention_slow and padded keys are ignored."""
    ids = make_prompt(9, vocab_size=tiny.config.vocab_size).repeat(2, 1)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    expected = logits(tiny, ids, attention_mask=mask)
    with patching.patched(tiny, attention="slow"):
        got = logits(tiny, ids, attention_mask=mask)
    torch.testing.assert_close(got[:, 3:], expected[:, 3:], **MODEL_TOL[got.dtype])
    # and the mask matters: the padded row differs from the unpadded one
    assert not torch.allclose(got[0, 3:], got[1, 3:])


def test_patched_rejects_unknown_options(tiny):
    with pytest.raises(ValueError, match="rmsnorm"):
        with patching.patched(tiny, rmsnorm="three_pass"):
            pass
    with pytest.raises(ValueError, match="projections"):
        with patching.patched(tiny, projections={"embeddings"}):
            pass
    with pytest.raises(ValueError, match="attention must be None, 'slow' or 'fast'"):
        with patching.patched(tiny, attention="flash"):
            pass


# --- The fast kernels inside the model ----------------------------------------------------------
FAST_MODULES = dict(rmsnorm="fused", projections=set(patching.PROJECTION_GROUPS), linear="gemv", mlp="fused",
                    attention="fast")  # the fast kernels module by module, without the fused decoder layers


@pytest.mark.parametrize("swaps", ["ALL_FAST", "FAST_MODULES"])
def test_the_fast_model_generates_what_the_original_does_and_restores_it(tiny, ids, swaps):
    before_modules = dict(tiny.named_modules())
    before = logits(tiny, ids)
    expected, _ = generate(tiny, ids, 6)
    cfg = tiny.config
    with patching.patched(tiny, **(patching.ALL_FAST if swaps == "ALL_FAST" else FAST_MODULES)) as counts:
        assert counts["lm_head"] == 1
        if swaps == "ALL_FAST":
            assert counts["layer"] == cfg.num_hidden_layers and counts["mlp"] == counts["attention_proj"] == 0
            assert isinstance(tiny.model.layers[0], slower_kernels.FastDecoderLayer)
            assert isinstance(tiny.model.layers[0].self_attn, slower_kernels.FastAttention)
        else:
            assert counts["mlp"] == cfg.num_hidden_layers and counts["mlp_proj"] == 0  # the MLPs' own, fused
            assert counts["attention_proj"] == 4 * cfg.num_hidden_layers
            assert isinstance(tiny.model.layers[0].mlp, slower_kernels.FastMLP)
            assert isinstance(tiny.model.layers[0].self_attn.o_proj, slower_kernels.GemvLinear)
        torch.testing.assert_close(logits(tiny, ids), before, **MODEL_TOL[env.DTYPE])  # prefill_attention
        generated, _ = generate(tiny, ids, 6)  # decode: decode_attention over the cache
        assert torch.equal(generated, expected)
        with slower_kernels.count_launches() as launched:
            generate(tiny, ids, 2)
        expected_kernels = {"decode_attention_kernel", "prefill_attention_kernel", "gemv_kernel", "swiglu_kernel",
                            "rmsnorm_fused_kernel"}
        if swaps == "ALL_FAST":
            expected_kernels |= {"rmsnorm_rope_kernel", "add_rmsnorm_kernel"}
        assert expected_kernels <= set(launched)
    assert dict(tiny.named_modules()).keys() == before_modules.keys()
    assert all(m is before_modules[n] for n, m in tiny.named_modules())
    assert torch.equal(logits(tiny, ids), before)


def test_a_fused_layer_launches_fewer_kernels_than_the_modules_alone(tiny, ids):
    """Per decode step: q/k/v in one launch (not three), q/k norm + RoPE in one, add + RMSNorm in one."""
    def our_launches(swaps):
        with patching.patched(tiny, **swaps), slower_kernels.count_launches() as launched:
            generate(tiny, ids, 3)
        return sum(launched.values())

    fused, modules = our_launches(patching.ALL_FAST), our_launches(FAST_MODULES)
    assert fused < modules


# The smallest top-2 logit gap a greedy token is compared at: the interpreter computes exact fp32; on a GPU,
# tl.dot rounds fp32 inputs to TF32 (a relative error near 1e-3), so only clearer choices are held to it.
GREEDY_GAP = 5e-2 if env.HAS_GPU else 1e-3


FAST_OPTIONS = {**{name: {k: v for k, v in swaps.items() if k != "decoder"} for name, swaps in patching.STAIRCASE.items()},
                "fast modules, no fused layers": FAST_MODULES}


@pytest.mark.parametrize("decoder", ["generate", "graph decoder"])
@pytest.mark.parametrize("option", list(FAST_OPTIONS))
def test_every_fast_option_generates_the_originals_greedy_tokens(tiny32, option, decoder):
    """Eagerly and through GraphDecoder (its static cache; replayed from a CUDA graph on a GPU), every step of
    chapter 9's staircase decodes the original's greedy tokens in fp32, up to the reference's first near-tie
    (a top-2 logit gap within GREEDY_GAP; at least 4 tokens), so a decode step that lost its KV cache cannot
    pass by luck."""
    from transformers import GenerationConfig

    prompt, n = make_prompt(7, vocab_size=tiny32.config.vocab_size), 8
    config = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, output_scores=True,
                              return_dict_in_generate=True, pad_token_id=0)
    with torch.inference_mode():
        ref = tiny32.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=config)
    expected = ref.sequences[0, prompt.shape[1]:]
    top2 = torch.stack(ref.scores).float().topk(2, dim=-1).values[:, 0]
    gaps = (top2[:, 0] - top2[:, 1]).tolist()
    clear = next((i for i, gap in enumerate(gaps) if gap <= GREEDY_GAP), n)  # tokens up to the first near-tie
    assert clear >= 4, f"the reference nears a tie at token {clear} (gaps {gaps}): no test of the decode steps"
    assert len(set(expected.tolist())) > n // 2  # tokens that follow the context, not one token repeated
    with patching.patched(tiny32, **FAST_OPTIONS[option]):
        if decoder == "generate":
            got, _ = generate(tiny32, prompt, n)
        else:
            got, _ = GraphDecoder(tiny32, max_len=16).generate(prompt, n)
    assert got.cpu().tolist()[:clear] == expected.cpu().tolist()[:clear]


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_a_fused_layer_reads_the_kv_cache_by_either_name(tiny32, name):
    """transformers 5.25 passes a decoder layer its KV cache as ``cache``; earlier releases as
    ``past_key_values``. The fused layer appends to the cache under both names, and refuses two caches."""
    from transformers import DynamicCache

    layer = slower_kernels.FastDecoderLayer.from_hf(tiny32.model.layers[0], patching._fast_attention)
    x = torch.randn(1, 3, tiny32.config.hidden_size, device=env.DEVICE)
    position = torch.arange(3, device=env.DEVICE)[None]
    cos_sin = tiny32.model.rotary_emb(x, position)
    cache = DynamicCache(config=tiny32.config)
    with torch.inference_mode():
        layer(x, position_embeddings=cos_sin, **{name: cache})
    assert cache.get_seq_length(0) == 3
    with pytest.raises(ValueError, match="cache and past_key_values name two different KV caches"):
        layer(x, position_embeddings=cos_sin, cache=cache, past_key_values=DynamicCache(config=tiny32.config))


def test_the_fast_model_under_a_static_cache(tiny):
    """GraphDecoder's static cache hands attention a mask over the whole buffer: decode reads kv_len from it."""
    prompt = make_prompt(5, vocab_size=tiny.config.vocab_size)
    expected, _ = generate(tiny, prompt, 6)
    with patching.patched(tiny, **patching.ALL_FAST):
        with slower_kernels.count_launches() as launched:
            new, _ = GraphDecoder(tiny, max_len=16, use_graph=False).generate(prompt, 6)
    assert torch.equal(new, expected.cpu())
    assert launched["decode_attention_kernel"] > 0 and launched["prefill_attention_kernel"] > 0


def test_the_fast_model_s_logits_under_a_static_cache(tiny):
    """Logits, not only tokens (a tiny random model repeats one token, whatever its attention does). transformers
    drops the mask for a prefill into an empty static cache: the unwritten keys past the prompt must not count."""
    from transformers import DynamicCache, StaticCache

    prompt = make_prompt(5, vocab_size=tiny.config.vocab_size)
    with torch.no_grad(), patching.patched(tiny, **patching.ALL_FAST):
        dynamic, static = DynamicCache(config=tiny.config), StaticCache(config=tiny.config, max_cache_len=16)
        expected = [tiny(prompt, past_key_values=dynamic, use_cache=True).logits[0, -1]]
        got = [tiny(prompt, past_key_values=static, use_cache=True).logits[0, -1]]
        for position, token in enumerate([3, 7, 11], start=prompt.shape[1]):
            step = torch.tensor([[token]], device=prompt.device)
            expected.append(tiny(step, past_key_values=dynamic, use_cache=True).logits[0, -1])
            got.append(tiny(step, position_ids=torch.tensor([[position]], device=prompt.device),
                            past_key_values=static, use_cache=True).logits[0, -1])
    for e, g in zip(expected, got):
        torch.testing.assert_close(g.double(), e.double(), **MODEL_TOL[env.DTYPE])


def test_patch_rejects_unknown_fast_options(tiny):
    with pytest.raises(ValueError, match="linear must be 'matmul' or 'gemv'"):
        with patching.patched(tiny, projections={"mlp"}, linear="cublas"):
            pass
    with pytest.raises(ValueError, match="mlp must be None or 'fused'"):
        with patching.patched(tiny, mlp="unfused"):
            pass
    with pytest.raises(ValueError, match="layer must be None or 'fused'"):
        with patching.patched(tiny, layer="fast", attention="fast"):
            pass
    with pytest.raises(ValueError, match="layer='fused' runs the fast attention inside it"):
        with patching.patched(tiny, layer="fused"):
            pass


@pytest.mark.parametrize("S", [1, 3])
def test_fast_attention_reads_a_static_cache_through_its_mask(S):
    """A static cache hands attention its whole buffer and a boolean mask; keys past the mask must not count."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    B, Hq, Hkv, D, T, filled = 1, 4, 2, 16, 12, 7  # 7 of the 12 cache slots written
    q = torch.randn(B, Hq, S, D, generator=g).to(env.DEVICE, env.DTYPE)
    k, v = (torch.randn(B, Hkv, T, D, generator=g).to(env.DEVICE, env.DTYPE) for _ in range(2))
    k[:, :, filled:], v[:, :, filled:] = float("nan"), float("nan")  # unwritten slots: never to be read
    positions = torch.arange(filled - 1, filled) if S == 1 else torch.arange(S)  # the queries' positions
    positions = positions.to(env.DEVICE)
    mask = (torch.arange(T, device=env.DEVICE)[None, :] <= positions[:, None])[None, None]  # sdpa-style
    out, _ = patching._fast_attention(None, q, k, v, mask, scaling=D ** -0.5)
    n = filled if S == 1 else S
    ref = F.scaled_dot_product_attention(q.double(), k[:, :, :n].double(), v[:, :, :n].double(), is_causal=S > 1,
                                         enable_gqa=True).transpose(1, 2)
    torch.testing.assert_close(out.double(), ref, **MODEL_TOL[env.DTYPE])
    if S > 1:  # transformers drops the mask of a prefill into an empty static cache: the same keys count
        out, _ = patching._fast_attention(None, q, k, v, None, scaling=D ** -0.5)
        torch.testing.assert_close(out.double(), ref, **MODEL_TOL[env.DTYPE])
    with pytest.raises(ValueError, match="batch size 1 with a mask"):
        patching._fast_attention(None, q.expand(2, -1, -1, -1), k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1),
                                 mask.expand(2, -1, -1, -1))
