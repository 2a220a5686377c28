"""The harness, on a tiny Qwen3 (CPU mode) and a Qwen3-0.6B-shaped model on the meta device."""
import dataclasses
import re

import pandas as pd
import pytest
import torch

import helpers
from slower_harness import env as harness_env
import slower_kernels

# One tolerance per dtype for "patched model matches the original" (many kernels stacked).
MODEL_TOL = {torch.float32: dict(atol=2e-4, rtol=2e-4), torch.float16: dict(atol=3e-2, rtol=3e-2)}
ALL_SWAPS = helpers.ALL_CUSTOM


@pytest.fixture(scope="module")
def tiny():
    return helpers.random_qwen3(helpers.TINY_QWEN3, seed=1)


@pytest.fixture
def ids(tiny):
    return helpers.make_prompt(11, vocab_size=tiny.config.vocab_size)


def logits(model, ids, **kw):
    with torch.inference_mode():
        return model(ids, **kw).logits


# --- Sizes and environment ----------------------------------------------------------------------
def test_full_sizes_are_the_chapters_sizes():
    full = helpers.SIZES_BY_MODE["full"]
    assert (full.prompt_len, full.new_tokens, full.new_tokens_full_stack, full.new_tokens_context) == (32, 8, 384, 8)
    assert full.context_prompts == (128, 256, 512, 1024)  # the blog's sweep (it generated 32 tokens: chapter 7 says why 8)
    assert (full.rounds, full.rounds_sweep) == (24, 16)  # at least the 8 rounds that held the A/A within 6%
    for sizes in helpers.SIZES_BY_MODE.values():  # effects near the noise get at least the usual rounds; even counts
        assert sizes.rounds_small >= sizes.rounds and sizes.rounds_small % 2 == 0 and sizes.rounds_sweep % 2 == 0
    assert full.rounds_small == 2 * full.rounds
    assert full.rounds_kernel >= 5 and full.profile_tokens <= full.new_tokens
    assert full.add_n == 2**20 and full.add_sweep[0] == 2**12 and full.add_sweep[-1] == 2**26
    assert full.rmsnorm_sweep_rows[:7] == (1, 4, 16, 64, 256, 1024, 4096)
    assert 2 * 2 * full.rmsnorm_sweep_rows[-1] * full.rmsnorm_hidden > 63e6  # fp16 in + out  # the sweep ends past an H200's L2
    assert full.kv_lengths[-1] == 512 and all(s.rounds_kv % 2 == 0 for s in helpers.SIZES_BY_MODE.values())
    assert full.matmul_shape == (128, 1024, 3072) and full.matmul_decode_shape[0] == 1


@pytest.mark.parametrize("requested", ["quick", "full", "QUICK "])
def test_a_gpu_mode_without_a_gpu_is_an_error(requested):
    with pytest.raises(RuntimeError, match="SLOWER_MODE=.*asks for a GPU"):
        helpers.resolve_mode(requested, gpu_available=False)


@pytest.mark.parametrize("requested, gpu, mode", [(None, False, "cpu"), ("", True, "full"), ("cpu", True, "cpu"),
                                                  ("cpu", False, "cpu"), ("quick", True, "quick"),
                                                  ("full", True, "full")])
def test_mode_is_what_was_asked_for_or_what_the_machine_has(requested, gpu, mode):
    assert helpers.resolve_mode(requested, gpu) == mode


def test_an_unknown_mode_names_the_choices():
    with pytest.raises(ValueError, match="SLOWER_MODE must be one of full, quick, cpu"):
        helpers.resolve_mode("fast", gpu_available=True)


def test_importing_the_harness_in_quick_mode_without_a_gpu_fails(tmp_path):
    """The real path: a GPU CI job whose GPU is missing must fail, not pass in CPU mode."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, SLOWER_MODE="quick", CUDA_VISIBLE_DEVICES="")  # hide any GPU
    done = subprocess.run([sys.executable, "-c", "import helpers"], cwd=helpers.ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "SLOWER_MODE=quick asks for a GPU" in done.stderr, done.stderr[-2000:]


def test_results_go_to_an_ignored_folder_unless_committing():
    import subprocess

    probe = helpers.ROOT / "runs" / helpers.SLUG / "results.csv"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=helpers.ROOT)
    assert ignored.returncode == 0, f"{probe} is not ignored by git: a run would leave untracked files"


@pytest.mark.parametrize("name, slug", [("Tesla T4", "t4"), ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100"),
                                        ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA L4", "l4"),
                                        ("NVIDIA GeForce RTX 4090", "rtx4090"), ("cpu", "cpu")])
def test_hardware_slug(name, slug):
    assert helpers.hardware_slug(name) == slug


def test_env_info_names_versions_and_mode():
    info = helpers.env_info()
    for key in ("gpu", "mode", "python", "torch", "triton", "transformers", "compute_capability", "memory_gib",
                "pinned"):
        assert key in info
    assert info["mode"] == helpers.MODE


# --- Patching -----------------------------------------------------------------------------------
def test_patch_counts_on_qwen3_0_6b_shape():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**helpers.QWEN3_0_6B, attn_implementation="sdpa"))
    census = helpers.module_census(model)
    assert (census["rmsnorm"], census["linear"], census["attention"]) == (113, 197, 28)
    assert census["parameters"] == 596_049_920
    with helpers.patched(model, **ALL_SWAPS) as counts:
        assert counts == {"rmsnorm": 113, "attention_proj": 112, "mlp_proj": 84, "lm_head": 1, "attention": 28,
                          "mlp": 0, "layer": 0}
        for layer in model.model.layers:
            assert isinstance(layer.self_attn.q_norm, slower_kernels.TritonRMSNorm)
            assert isinstance(layer.self_attn.k_norm, slower_kernels.TritonRMSNorm)
            assert isinstance(layer.mlp.down_proj, slower_kernels.TritonLinear)
        assert model.config._attn_implementation == helpers.ATTENTION_NAMES["slow"]
    assert model.config._attn_implementation == "sdpa"
    assert not any(isinstance(m, (slower_kernels.TritonRMSNorm, slower_kernels.TritonLinear)) for m in model.modules())


@pytest.mark.parametrize("projections, expected", [({"attention"}, (56, 0, 0)), ({"mlp"}, (0, 42, 0)),
                                                   ({"lm_head"}, (0, 0, 1))])
def test_patch_groups_are_separate(projections, expected):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**dict(helpers.QWEN3_0_6B, num_hidden_layers=14)))
    with helpers.patched(model, projections=projections) as counts:
        assert (counts["attention_proj"], counts["mlp_proj"], counts["lm_head"]) == expected
        assert counts["rmsnorm"] == counts["attention"] == 0


def test_patch_shares_weights_and_restores_the_same_objects(tiny, ids):
    before_modules = dict(tiny.named_modules())
    before = logits(tiny, ids)
    with helpers.patched(tiny, **ALL_SWAPS):
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
        with helpers.patched(tiny, **ALL_SWAPS):
            raise RuntimeError("boom")
    assert torch.equal(before, logits(tiny, ids))
    assert tiny.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("swaps", [dict(rmsnorm="fused"), dict(rmsnorm="two_pass"), dict(projections={"attention"}),
                                   dict(projections={"mlp", "lm_head"}), dict(attention="slow"), ALL_SWAPS])
def test_patched_prefill_matches_original(tiny, ids, swaps):
    expected = logits(tiny, ids)
    with helpers.patched(tiny, **swaps) as counts:
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
    with helpers.patched(tiny, **ALL_SWAPS):
        got = run()
    torch.testing.assert_close(got, expected, **MODEL_TOL[got.dtype])


def test_slow_attention_honours_a_padding_mask(tiny):
    """Left-padded batch: the mask reaches attention_slow and padded keys are ignored."""
    ids = helpers.make_prompt(9, vocab_size=tiny.config.vocab_size).repeat(2, 1)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    expected = logits(tiny, ids, attention_mask=mask)
    with helpers.patched(tiny, attention="slow"):
        got = logits(tiny, ids, attention_mask=mask)
    torch.testing.assert_close(got[:, 3:], expected[:, 3:], **MODEL_TOL[got.dtype])
    # and the mask matters: the padded row differs from the unpadded one
    assert not torch.allclose(got[0, 3:], got[1, 3:])


def test_patched_rejects_unknown_options(tiny):
    with pytest.raises(ValueError, match="rmsnorm"):
        with helpers.patched(tiny, rmsnorm="three_pass"):
            pass
    with pytest.raises(ValueError, match="projections"):
        with helpers.patched(tiny, projections={"embeddings"}):
            pass
    with pytest.raises(ValueError, match="attention must be None, 'slow' or 'fast'"):
        with helpers.patched(tiny, attention="flash"):
            pass


# --- Measurement --------------------------------------------------------------------------------
def test_patched_generation_runs_and_counts_launches(tiny):
    with helpers.patched(tiny, **ALL_SWAPS) as counts:
        pass
    result = helpers.compare_configs(tiny, {"swapped": ALL_SWAPS}, prompt_len=6, new_tokens=3, rounds=1,
                                     profile=["swapped"])
    prof = result.profile("swapped")
    assert prof.wall_ms_per_token > 0 and prof.tokens_profiled == 3 == result.profiled_tokens
    cfg = tiny.config
    per_token = (2 * counts["rmsnorm"] + counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]
                 + 3 * cfg.num_attention_heads * counts["attention"])
    assert prof.project_launches_per_token == per_token
    if not helpers.HAS_GPU:
        assert prof.launches_per_token is None and prof.gpu_busy_ms_per_token is None and "CPU" in prof.note
    else:
        assert prof.launches_per_token >= per_token and 0 <= prof.gpu_idle_fraction <= 1


def test_bandwidth_floor(tiny):
    bw = helpers.bandwidth(tiny, tokens_per_s=10.0)
    assert bw["model_bytes"] == helpers.module_census(tiny)["bytes"]
    assert bw["achieved_gb_s"] == pytest.approx(bw["model_bytes"] * 10 / 1e9)
    if not helpers.HAS_GPU:
        assert bw["floor_fraction"] is None and bw["note"]


# --- Model loading ------------------------------------------------------------------------------
def test_load_model_from_a_local_checkpoint_uses_from_pretrained(tiny, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    tiny.save_pretrained(tmp_path)
    calls = []
    real = AutoModelForCausalLM.from_pretrained
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    model, tokenizer, desc = helpers.load_model(str(tmp_path))
    assert calls == [str(tmp_path)] and "local checkpoint" in desc and tokenizer is None
    loaded, saved = model.state_dict(), tiny.state_dict()
    assert loaded.keys() == saved.keys() and all(torch.equal(loaded[k], saved[k]) for k in saved)
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)  # kernels may differ in the last bit
    torch.testing.assert_close(logits(model, ids), logits(tiny, ids), **MODEL_TOL[helpers.DTYPE])


def test_load_model_falls_back_when_the_hub_is_unreachable(monkeypatch, capsys):
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(helpers, "MODE", "full")  # as on a GPU without network
    monkeypatch.setattr(helpers, "_hub_reachable", lambda *a, **k: False)
    monkeypatch.setattr(helpers, "QWEN3_0_6B", helpers.TINY_QWEN3)  # keep the test small
    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: pytest.fail("from_pretrained called without a hub"))
    model, tokenizer, desc = helpers.load_model("Qwen/Qwen3-0.6B")
    assert tokenizer is None and "random weights" in desc and "hub unreachable" in desc
    assert "meaningless" in capsys.readouterr().out


def test_hub_probe_respects_offline_mode(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert helpers._hub_reachable() is False


# --- Results ------------------------------------------------------------------------------------
def test_record_overwrites_by_id_and_joins_the_blog(tmp_path, monkeypatch):
    monkeypatch.setattr(harness_env, "RESULTS_DIR", tmp_path / "figures" / "x")
    helpers.record("add.ratio", 2.0, "x slower")
    helpers.record("add.triton_ms", 0.5, "ms", note="2^20 elements")
    helpers.record("add.ratio", 1.5, "x slower")
    table = helpers.results()
    assert list(table["id"]) == ["add.triton_ms", "add.ratio"]
    assert table.set_index("id").loc["add.ratio", "value"] == 1.5
    assert set(helpers.RESULT_COLUMNS) <= set(table.columns)
    row = table.set_index("id").loc["add.triton_ms"]
    assert row["mode"] == helpers.MODE and row["torch"] == torch.__version__ and row["note"] == "2^20 elements"
    both = helpers.compare("add.").set_index("id")
    assert both.loc["add.ratio", "yours"] == 1.5 and both.loc["add.ratio", "blog_t4"] == "1.81"
    assert both.loc["add.torch_ms", "blog_t4"] == "0.046" and pd.isna(both.loc["add.torch_ms", "yours"])


def test_blog_numbers_are_the_seed_copy():
    blog = helpers.blog_numbers().set_index("id")
    assert blog.loc["full.slowdown", "blog_value"] == "3.59"
    assert blog.loc["baseline.tps_kv", "blog_value"] == ""  # the post gives none


def test_blog_values_by_id():
    assert helpers.blog("add.ratio") == 1.81
    assert helpers.blog("context.ratio_range") == "3.2-3.9"  # a range stays as the post wrote it
    assert helpers.blog("baseline.tps_kv") is None


@pytest.mark.parametrize("a, b, text", [(2.0, 1.0, "2.00x slower"), (1.0, 4.0, "4.00x faster"),
                                        (30.0, 2.0, "15x slower")])
def test_versus_says_which_way(a, b, text):
    assert helpers.versus(a, b) == text


def test_fmt_says_where_a_number_cannot_be_measured():
    assert helpers.fmt(None, 2, "ms") == "n/a (CPU)"
    assert helpers.fmt(1.23456, 2, "ms") == "1.23 ms"
    assert helpers.fmt(1655.4, 0) == "1655"
    assert helpers.fmt(1.23456) == "1.235"  # 3 digits, no unit


def test_launch_note_names_what_was_counted(monkeypatch):
    monkeypatch.setattr(harness_env, "HAS_GPU", True)
    assert helpers.launch_note(per="call") == "every CUDA kernel per call (a CUDA graph of one call)"
    assert helpers.launch_note() == "every CUDA kernel per decoded token (torch.profiler)"
    monkeypatch.setattr(harness_env, "HAS_GPU", False)
    assert helpers.launch_note(per="call") == "CPU mode: our Triton kernels per call only (no CUDA kernels to count)"
    assert "per decoded token" in helpers.launch_note()


# --- Two clocks, interleaved comparisons, the verdict, pinning ---------------------------------
def test_the_two_clocks_and_the_launch_count_of_one_call():
    x = torch.randn(1000, device=helpers.DEVICE, dtype=helpers.DTYPE)
    call = lambda: slower_kernels.add(x, x)  # noqa: E731
    assert helpers.launches_per_call(call) == 1
    assert helpers.host_ms_per_call(call, calls=2) > 0
    gpu_ms = helpers.gpu_ms_per_call(call)
    assert gpu_ms > 0 if helpers.HAS_GPU else gpu_ms is None  # CPU mode: no GPU clock


def test_launch_prices_time_an_empty_kernel_and_a_one_element_op():
    prices = helpers.launch_prices(calls=3)
    assert prices.triton_us > 0 and prices.torch_us > 0 and prices.calls == 3
    with slower_kernels.count_launches() as counted:
        slower_kernels.empty(torch.zeros(1, device=helpers.DEVICE, dtype=helpers.DTYPE))
    assert counted == {"empty_kernel": 1}


@pytest.mark.parametrize("values, floor, text, real", [
    ([1.8, 1.7, 1.9, 1.8], None, "1.80x slower", True),
    ([0.5, 0.52, 0.48, 0.5], None, "2.00x faster", True),
    ([1.03, 0.98, 1.01, 1.02], None, "within noise", False),   # under MIN_EFFECT
    ([1.3, 0.8, 1.4, 0.9, 1.2], None, "within noise", False),  # the quartiles straddle 1
    ([1.08, 1.09, 1.07, 1.08], [1.06, 1.05, 1.07, 1.04], "within noise", False),  # 2 x the A/A floor's 5.5%
    ([1.2, 1.21, 1.19, 1.2], [1.06, 1.05, 1.07, 1.04], "1.20x slower", True),
])
def test_verdict_knows_the_noise(values, floor, text, real):
    v = helpers.verdict(helpers.Ratio.of(values), helpers.Ratio.of(floor) if floor else None)
    assert (v.text, v.real) == (text, real)


def test_verdict_is_symmetric_so_a_noisy_floor_still_allows_faster():
    floor = helpers.Ratio.of([2.0, 1.9, 2.1])  # a wild A/A floor: the threshold is 200% from 1
    assert helpers.verdict(helpers.Ratio.of([0.128, 0.12, 0.13]), floor).text == "7.81x faster"
    assert helpers.verdict(helpers.Ratio.of([0.4, 0.38, 0.42]), floor).text == "within noise"  # 2.5x < 3x
    assert helpers.verdict(helpers.Ratio.of([2.5, 2.4, 2.6]), floor).text == "within noise"


def test_verdict_of_a_single_ratio_uses_the_minimum_effect():
    assert helpers.verdict(1.5).text == "1.50x slower"
    assert helpers.verdict(1.04).text == "within noise"
    assert helpers.verdict(0.04).text == "25x faster"


def test_compare_configs_interleaves_shuffled_rounds_with_an_a_a_pair(tiny, monkeypatch):
    """With a fake clock (2 s per generation with two-pass RMSNorms, 1 s otherwise) the ratios are exact."""
    def fake_generate(model, ids, new_tokens, use_cache=True):
        slow = any(isinstance(m, slower_kernels.TritonRMSNorm) for m in model.modules())
        return None, (2.0 if slow else 1.0) * new_tokens / 8

    monkeypatch.setattr(helpers, "generate", fake_generate)
    result = helpers.compare_configs(tiny, {"two-pass RMSNorm": dict(rmsnorm="two_pass")}, prompt_len=4,
                                     new_tokens=8, rounds=6, seed=3)
    assert set(result.ratios) == {helpers.ORIGINAL_AGAIN, "two-pass RMSNorm"}
    assert result.ratios["two-pass RMSNorm"].median == 2.0 and result.floor.median == 1.0
    assert result.tokens_per_s["two-pass RMSNorm"] == 4.0 and result.tokens_per_s[helpers.ORIGINAL] == 8.0
    assert result.verdict("two-pass RMSNorm").text == "2.00x slower"
    assert result.verdict(helpers.ORIGINAL_AGAIN).text == "within noise"
    assert all(sorted(order) == sorted(result.tokens_per_s) for order in result.orders)
    assert len({tuple(o) for o in result.orders}) > 1, "every round in the same order: not shuffled"
    assert all(b == a[::-1] for a, b in zip(result.orders[::2], result.orders[1::2]))  # counterbalanced pairs
    again = helpers.compare_configs(tiny, {"two-pass RMSNorm": dict(rmsnorm="two_pass")}, prompt_len=4,
                                    new_tokens=8, rounds=6, seed=3)
    assert again.orders == result.orders  # a fixed seed: the same shuffles every run
    assert not any(isinstance(m, slower_kernels.TritonRMSNorm) for m in tiny.modules())  # the model is restored
    table = result.table()
    assert list(table["configuration"]) == list(result.tokens_per_s)
    aa = table.set_index("configuration").loc[helpers.ORIGINAL_AGAIN, "verdict"]
    assert aa.startswith("A/A floor: ") and aa.endswith("% off 1")  # the floor is not "1.05x slower" than itself


def test_compare_configs_warms_each_distinct_configuration_once(tiny, monkeypatch):
    """One untimed generation per distinct configuration before the rounds: the A/A copy is warm already."""
    runs = []

    def fake_generate(model, ids, new_tokens, use_cache=True):
        modes = {m.mode for m in model.modules() if isinstance(m, slower_kernels.TritonRMSNorm)}
        runs.append((modes.pop() if modes else "original", new_tokens))
        return None, 1.0

    monkeypatch.setattr(helpers, "generate", fake_generate)
    configs = {"two-pass": dict(rmsnorm="two_pass"), "two-pass again": dict(rmsnorm="two_pass"),
               "fused": dict(rmsnorm="fused")}
    helpers.compare_configs(tiny, configs, prompt_len=4, new_tokens=8, rounds=2)
    assert runs[:3] == [("original", 8), ("two_pass", 8), ("fused", 8)]  # three warm-ups, no copy warmed
    assert len(runs) == 3 + 2 * 5 * 2  # then per round every configuration once, each with its 1-token run


def test_compare_configs_on_the_real_generation_path(tiny):
    result = helpers.compare_configs(tiny, {"fused RMSNorm": dict(rmsnorm="fused")}, prompt_len=4,
                                     new_tokens=3, rounds=2)
    assert len(result.seconds["fused RMSNorm"]) == 2 and all(s > 0 for s in result.seconds[helpers.ORIGINAL])


def test_compare_configs_times_a_graph_decoder_and_profiles_it(tiny):
    """decoder="graph": a static cache and one CUDA-graph replay per token (the step runs eagerly on a CPU)."""
    result = helpers.compare_configs(tiny, {"graph": dict(decoder="graph")}, prompt_len=4, new_tokens=3, rounds=2,
                                     profile=["graph"])
    assert len(result.seconds["graph"]) == 2 and result.profile("graph").launches_per_token is not None or \
        not helpers.HAS_GPU
    new, _ = helpers.decoder_for(tiny, helpers.make_prompt(4, vocab_size=tiny.config.vocab_size), 5, "graph")(5)
    expected, _ = helpers.generate(tiny, helpers.make_prompt(4, vocab_size=tiny.config.vocab_size), 5)
    assert torch.equal(new, expected.cpu())


def test_decoders_reject_what_they_cannot_do(tiny):
    ids = helpers.make_prompt(4, vocab_size=tiny.config.vocab_size)
    with pytest.raises(ValueError, match="decoder must be one of"):
        helpers.decoder_for(tiny, ids, 3, "vllm")
    with pytest.raises(ValueError, match="use_cache=False does not apply"):
        helpers.decoder_for(tiny, ids, 3, "graph", use_cache=False)
    with pytest.raises(ValueError, match=r"configs\['g'\]: decoder must be one of"):
        helpers.compare_configs(tiny, {"g": dict(decoder="graph", use_cache=False)}, rounds=1)
    if not helpers.HAS_GPU:
        with pytest.raises(ValueError, match="needs a GPU"):
            helpers.decoder_for(tiny, ids, 3, "compiled")


def test_compare_configs_rejects_bad_input(tiny):
    with pytest.raises(ValueError, match="added by compare_configs itself"):
        helpers.compare_configs(tiny, {helpers.ORIGINAL: {}}, rounds=1)
    with pytest.raises(TypeError, match=r"configs\['x'\] must be a dict"):
        helpers.compare_configs(tiny, {"x": "two_pass"}, rounds=1)
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        helpers.compare_configs(tiny, {}, rounds=0)


@pytest.mark.parametrize("spec, cpus", [("3", {3}), ("2-4", {2, 3, 4}), ("0,2", {0, 2}), (" 1 , 5-6", {1, 5, 6})])
def test_parse_cpus(spec, cpus):
    assert helpers.parse_cpus(spec) == cpus


@pytest.mark.parametrize("spec", ["", "a", "3-", ","])
def test_parse_cpus_rejects_what_taskset_would(spec):
    with pytest.raises(ValueError, match="SLOWER_PIN_CPUS must list CPU cores"):
        helpers.parse_cpus(spec)


def test_pinning_switch_pins_the_process_and_shows_in_the_environment_line():
    import os
    import subprocess
    import sys

    core = min(os.sched_getaffinity(0))
    code = ("import helpers, os, torch; print(torch.get_num_threads()); "
            "print(sorted(os.sched_getaffinity(0)), helpers.env_info()['pinned'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=helpers.ROOT, capture_output=True, text=True,
                          env=dict(os.environ, SLOWER_PIN_CPUS=str(core)), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-3:-1] == ["1", f"[{core}] cores {core}"]  # one core, one CPU thread
    assert helpers.pin_cpus(None) is None and helpers.pin_cpus("") is None
    with pytest.raises(ValueError, match="names cores this process cannot use"):
        helpers.pin_cpus("100000")


def test_host_clock_timings_refuse_to_run_after_a_profile(tiny, device):
    """Once a process has profiled, CUPTI stays attached and slows every launch: each host-clock timing then
    fails with the order to fix, in every mode (the CPU run of the notebooks checks the order a GPU run needs),
    while the GPU clock (CUDA-graph replay, untouched by the host) still runs."""
    x = torch.ones(7, device=device)
    helpers.host_ms_per_call(lambda: x + x, calls=2, repeats=1)  # before any profile: runs
    assert helpers.compare_configs(tiny, {}, new_tokens=2, rounds=1, profile=True).profile(helpers.ORIGINAL)
    assert helpers.PROFILED_BY == ["a decode profile (compare_configs' profile=, _count_decode)"]
    helpers.launches_per_call(lambda: slower_kernels.add(x, x))  # counts from a CUDA graph's nodes: no profile
    assert len(helpers.PROFILED_BY) == 1
    timings = [("host_ms_per_call", lambda: helpers.host_ms_per_call(lambda: x + x, calls=2, repeats=1)),
               ("launch_prices", lambda: helpers.launch_prices(calls=2)),
               ("host_us_alone", lambda: helpers.host_us_alone(lambda: x + x)),
               ("compare_calls(clock='host')", lambda: helpers.compare_calls({"twice": lambda: x + x}, lambda: x * 2,
                                                                             rounds=1, clock="host")),
               ("compare_configs", lambda: helpers.compare_configs(tiny, {}, new_tokens=2, rounds=1))]
    for what, timing in timings:
        with pytest.raises(RuntimeError, match=re.escape(what) + r" times the host's clock, but this process has "
                           r"already run torch\.profiler \(a decode profile.*\)\. .*Time first"):
            timing()
    cmp = helpers.compare_calls({"twice": lambda: x + x}, lambda: x * 2, rounds=1)  # the GPU clock still runs
    assert cmp.rounds == 1
    known = helpers.compare_calls({"twice": lambda: x + x}, lambda: x * 2, rounds=1, clock="host", after_profile=True)
    assert known.clock.endswith(", after a profile (CUPTI attached)") == helpers.HAS_GPU  # an exercise that knows


@pytest.mark.skipif(not helpers.HAS_GPU, reason="CUDA graphs and torch.profiler need a GPU")
def test_launches_per_call_counts_what_the_profiler_sees():
    """The CUDA graph's kernel nodes of one call, against the kernels torch.profiler sees that call run: the same
    count for our kernels, PyTorch's ops, a cuBLAS matmul and the per-head attention loop, and no profile made."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    x = torch.randn(3, 1024, device=helpers.DEVICE, dtype=helpers.DTYPE)
    w = torch.randn(3072, 1024, device=helpers.DEVICE, dtype=helpers.DTYPE)
    norm = Qwen3RMSNorm(1024).to(helpers.DEVICE, helpers.DTYPE)
    q, k, v = (torch.randn(1, 8, n, 128, device=helpers.DEVICE, dtype=helpers.DTYPE) for n in (1, 37, 37))
    calls = {"Triton add": lambda: slower_kernels.add(x, x), "torch.add": lambda: torch.add(x, x),
             "Qwen3RMSNorm": lambda: norm(x), "two-pass RMSNorm": lambda: slower_kernels.rmsnorm_two_pass(x, norm.weight),
             "cuBLAS matmul": lambda: x @ w.T, "tiled matmul": lambda: slower_kernels.matmul(x, w.T),
             "per-head attention": lambda: slower_kernels.attention_slow(q, k, v, scale=0.1, causal=True)}
    for name, fn in calls.items():
        counted = helpers.launches_per_call(fn)
        assert helpers.PROFILED_BY == [], name  # the profiler notes every session it runs (_kernel_stats)
        assert counted == helpers._kernel_stats(fn)[0] > 0, name
        assert helpers.PROFILED_BY == ["torch.profiler"], name
        helpers.PROFILED_BY.clear()


@pytest.mark.parametrize("profile, what", [
    (lambda: helpers.graph_kernel_gap_us(5), "graph_kernel_gap_us"),  # it returns at once in CPU mode, and notes
    (lambda: helpers.count_module_calls({}), "count_module_calls"),
    (lambda: helpers._kernel_stats(lambda: None) if helpers.HAS_GPU else helpers._profiled("torch.profiler"),
     "torch.profiler"),
])
def test_every_profile_is_noted_and_stops_the_host_clock(profile, what):
    profile()
    assert helpers.PROFILED_BY == [what]
    with pytest.raises(RuntimeError, match=f"already run torch.profiler \\({what}\\)"):
        helpers.host_ms_per_call(lambda: None, calls=1, repeats=1)


def test_count_decode_refuses_a_profile_that_lost_its_events(tiny, monkeypatch):
    """A 1-token profile that sees as many kernels as the n-token one (a profile that lost its GPU events, as a
    CUPTI teardown racing the next profile can make it) fails loudly instead of giving a per-token count."""
    seen = iter([(100, 1.0), (100, 1.0)])
    monkeypatch.setattr(helpers, "HAS_GPU", True)
    monkeypatch.setattr(helpers, "_sync", lambda: None)  # no CUDA here: the generations run on the CPU
    monkeypatch.setattr(helpers, "_kernel_stats", lambda fn: (fn(), next(seen))[1])
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    with pytest.raises(RuntimeError, match="a profile lost GPU events"):
        helpers._count_decode(tiny, ids, 3, warm=False)


@pytest.mark.skipif(not helpers.HAS_GPU, reason="CUPTI and CUDA graphs need a GPU")
def test_profiles_back_to_back_count_the_same(tiny):
    """Profiles back to back see every kernel, also with CUDA graphs captured and replayed between them (a
    graph decoder's, and the graphs launches_per_call reads its counts from): the counts repeat."""
    x = torch.randn(4096, device=helpers.DEVICE, dtype=helpers.DTYPE)
    ops = [helpers._kernel_stats(lambda: torch.add(x, x))[0] for _ in range(4)]
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    graph = [helpers._count_decode(tiny, ids, 4, decoder="graph")[0] for _ in range(2)]
    ops += [helpers.launches_per_call(lambda: torch.add(x, x)), helpers._kernel_stats(lambda: torch.add(x, x))[0]]
    assert ops == [1] * 6
    assert graph[0] == graph[1] > 0


# --- The catalogue ------------------------------------------------------------------------------
def recorded_ids() -> set:
    """Every id the chapters and tools record (f-string parts kept as written, e.g. ``context.{L}.ratio``)."""
    import re

    ids = set()
    for path in [*(helpers.ROOT / "notebooks").glob("[0-9][0-9]_*.py"), *(helpers.ROOT / "tools").glob("*.py")]:
        text = path.read_text()
        ids.update(re.findall(r"helpers\.record\(\s*f?\"([^\"]+)\"", text))  # helpers.record("id", ...)
        # a Comparison's record(name, "id", ...)
        ids.update(re.findall(r"\.record\(\s*[^,()]+,\s*f?\"([^\"]+)\"", text))
    return ids


def _as_pattern(id_with_parts: str) -> str:
    """``context.{L}.ratio`` -> a regex in which each {part} stands for any id text (possibly empty)."""
    import re

    return re.sub(r"\\\{[^}]*\\\}", "[A-Za-z0-9_]*", re.escape(id_with_parts))


def test_every_recorded_id_is_catalogued_and_every_catalogued_id_is_recorded():
    import re

    table = helpers.catalogue()
    catalogued, blog_only = set(table["id"]), set(table.query("chapter == 'blog'")["id"])
    recorded = recorded_ids()
    assert recorded, "found no helpers.record calls: the scan is broken"

    def matches(a, b):  # one id, either side possibly with {parts}, can stand for the other
        return bool(re.fullmatch(_as_pattern(a), b.replace("{", "").replace("}", "")) or
                    re.fullmatch(_as_pattern(b), a.replace("{", "").replace("}", "")))

    uncatalogued = {r for r in recorded if not any(matches(r, c) for c in catalogued)}
    unrecorded = {c for c in catalogued - blog_only if not any(matches(r, c) for r in recorded)}
    assert not uncatalogued, f"recorded but not in data/catalogue.csv: {sorted(uncatalogued)}"
    assert not unrecorded, f"catalogued but recorded by no chapter: {sorted(unrecorded)}"


def test_record_refuses_an_uncatalogued_id_or_a_wrong_unit(tmp_path, monkeypatch):
    monkeypatch.setattr(harness_env, "RESULTS_DIR", tmp_path)
    with pytest.raises(ValueError, match="not in catalogue.csv"):
        helpers.record("add.made_up", 1.0, "ms")
    with pytest.raises(ValueError, match="catalogued in 'ms'"):
        helpers.record("add.triton_ms", 1.0, "s")
    helpers.record("context.77.ratio", 2.0, "x slower")  # an instance of context.{prompt}.ratio
    assert helpers.results(tmp_path / "results.csv").set_index("id").loc["context.77.ratio", "value"] == 2.0


def test_the_readme_headline_rows_come_from_the_catalogue():
    import sys

    sys.path.insert(0, str(helpers.ROOT / "tools"))
    import make_readme

    headline = helpers.catalogue().query("headline == 'yes'")
    assert make_readme.headline_rows() == list(zip(headline["id"], headline["label"]))


# --- The launch-budget model --------------------------------------------------------------------
def _profile(launches, ours, busy, wall):
    return helpers.DecodeProfile(launches, busy, wall, None, ours, 16)


def test_launch_budget_model_on_made_up_numbers():
    # 15 us per PyTorch launch, 40 us per launch of ours, GPU time on top
    budget = helpers.LaunchBudget(torch_us=15.0, ours_us=40.0, fitted_on=("original", "a loop of our calls"))
    original = _profile(1600, 0, 3.0, 1600 * 15e-3 + 3.0)
    judged = _profile(1000, 200, 2.0, 800 * 15e-3 + 200 * 40e-3 + 2.0)
    assert budget.predict_ms(original) == pytest.approx(original.wall_ms_per_token)
    assert budget.host_ms(judged) == pytest.approx(20.0)
    assert budget.predict_ms(judged) == pytest.approx(22.0)


def test_module_budget_on_made_up_numbers():
    """Each swap adds our call's price alone minus the replaced call's, x 1.2 in the model; max(host, GPU)."""
    P = helpers.ModulePrice
    original = helpers.DecodeProfile(1600, 3.0, 24.0, None, 0, 16,
                                     modules={"Linear": P(200, 10.0, 1.0), "Norm": P(100, 50.0, 6.0)})
    custom = helpers.DecodeProfile(900, 10.0, 24.0 + 1.2 * (200 * 90e-3 + 100 * -10e-3), None, 300, 16,
                                   modules={"OurLinear": P(200, 100.0, 1.0, twin="Linear"),
                                            "OurNorm": P(100, 40.0, 1.0, twin="Norm")})
    judged = helpers.DecodeProfile(1500, 1.0, 0.0, None, 100, 16, modules={"OurNorm": P(100, 40.0, 1.0, twin="Norm")})
    budget = helpers.fit_module_budget({"original": original, "custom": custom, "judged": judged},
                                       ("original", "custom"))
    assert budget.base_ms == 24.0 and budget.in_situ == pytest.approx(1.2)
    assert budget.swapped_ms(custom) == pytest.approx(17.0)
    assert budget.added_ms(custom.modules["OurLinear"]) == pytest.approx(200 * 90e-3)  # one kind's share of it
    assert budget.added_ms(custom.modules["OurNorm"]) == pytest.approx(100 * -10e-3)
    with pytest.raises(ValueError, match="price: the original's 'Attention' was not priced"):
        budget.added_ms(P(28, 80.0, 9.0, twin="Attention"))
    assert budget.predict_ms(custom) == pytest.approx(custom.wall_ms_per_token)  # the fit reproduces itself
    assert budget.predict_ms(original) == pytest.approx(24.0)  # nothing swapped: the original's own time
    host = 24.0 - 1.2 * 100 * 10e-3  # a norm of ours 10 µs cheaper alone than the one it replaced
    assert budget.host_ms(judged) == pytest.approx(host) and budget.predict_ms(judged) == pytest.approx(host)
    busy = helpers.DecodeProfile(200, 50.0, 0.0, None, 0, 16)
    assert budget.predict_ms(busy) == 50.0  # the GPU's time wins where it is the longer
    assert budget.implied_in_situ(original) is None
    assert budget.implied_in_situ(judged) is None  # its swaps save 1 ms of 24 at prices alone: too little to read
    big = dataclasses.replace(judged, wall_ms_per_token=12.0, modules={"OurNorm": P(100, -70.0, 1.0, twin="Norm")})
    assert budget.implied_in_situ(big) == pytest.approx((12.0 - 24.0) / (100 * -120e-3))


def test_module_budget_refuses_what_it_cannot_fit():
    P = helpers.ModulePrice
    original = helpers.DecodeProfile(1600, 3.0, 24.0, None, 0, 16, modules={"Linear": P(200, 10.0, 1.0)})
    priced = helpers.DecodeProfile(2000, 5.0, 60.0, None, 300, 16, modules={"A": P(200, 100.0, 3.0, twin="Linear")})
    with pytest.raises(ValueError, match=r"fitted_on\[0\]: 'b' calls modules of ours"):
        helpers.fit_module_budget({"a": original, "b": priced}, ("b", "a"))
    with pytest.raises(ValueError, match=r"fitted_on\[1\]: 'c' has no priced module of ours"):
        helpers.fit_module_budget({"a": original, "c": original}, ("a", "c"))
    unpriced = helpers.DecodeProfile(1600, 3.0, 24.0, None, 0, 16)
    with pytest.raises(ValueError, match=r"fitted_on\[0\]: 'u' has no priced module"):
        helpers.fit_module_budget({"u": unpriced, "b": priced}, ("u", "b"))
    even = helpers.DecodeProfile(2000, 5.0, 60.0, None, 300, 16, modules={"A": P(200, 10.0, 3.0, twin="Linear")})
    with pytest.raises(ValueError, match=r"change the original's time by less than 5% at prices alone \('a'\)"):
        helpers.fit_module_budget({"a": original, "e": even}, ("a", "e"))
    with pytest.raises(ValueError, match="fitted_on: name two of"):
        helpers.fit_module_budget({"a": original}, ("a",))
    backwards = dataclasses.replace(priced, wall_ms_per_token=20.0)  # swaps add 18 ms alone, yet it came out faster
    with pytest.raises(ValueError, match="no positive factor fits"):
        helpers.fit_module_budget({"a": original, "w": backwards}, ("a", "w"))
    budget = helpers.fit_module_budget({"a": original, "b": priced}, ("a", "b"))
    stranger = helpers.DecodeProfile(2000, 5.0, 60.0, None, 300, 16, modules={"N": P(100, 9.0, 1.0, twin="Norm")})
    with pytest.raises(ValueError, match=r"the original's \['Norm'\] were not priced"):
        budget.predict_ms(stranger)


def test_capture_module_calls_counts_top_level_calls_and_replays_them(tiny):
    """Every kind of ours a decoded token calls from outside another of ours, per token, with a working replay."""
    ids = helpers.make_prompt(4, vocab_size=tiny.config.vocab_size)
    layers = tiny.config.num_hidden_layers
    with helpers.patched(tiny, rmsnorm="fused", projections={"lm_head"}, attention="fast"):
        calls = helpers.capture_module_calls(tiny, ids, 4)
        # per layer: input, post-attention, q and k norms; then the final norm. lm_head once. Attention once a layer.
        assert {k: c.per_token for k, c in calls.items()} == {
            "TritonRMSNorm(fused)": 4 * layers + 1, "TritonLinear": 1, "attention (fast)": layers}
        assert {k: c.twin for k, c in calls.items()} == {
            "TritonRMSNorm(fused)": "Qwen3RMSNorm", "TritonLinear": "Linear", "attention (fast)": "attention (sdpa)"}
        helpers.count_module_calls(calls)
        assert calls["TritonRMSNorm(fused)"].ours == 1 and calls["attention (fast)"].ours >= 1
        assert (calls["TritonLinear"].kernels is None) != helpers.HAS_GPU
    with helpers.patched(tiny, **helpers.ALL_FAST):
        fast = helpers.capture_module_calls(tiny, ids, 3)
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
    helpers.PROFILED_BY.clear()  # counted above; the timing below only checks that it runs
    assert helpers.host_us_alone(fast["GemvLinear"].replay, calls=1, repeats=1) > 0
    assert not helpers._CAPTURES and not any(m._forward_pre_hooks for m in tiny.modules())
    with pytest.raises(ValueError, match="new_tokens must be at least 2"):
        helpers.capture_module_calls(tiny, ids, 1)


def test_capture_module_calls_of_the_original_counts_every_call_of_each_kind(tiny):
    """The original's kinds are counted each on its own, inside one another or not, the attention function too."""
    ids = helpers.make_prompt(4, vocab_size=tiny.config.vocab_size)
    layers = tiny.config.num_hidden_layers
    kinds = {"Linear", "Qwen3RMSNorm", "Qwen3MLP", "Qwen3DecoderLayer", "attention (sdpa)"}
    calls = helpers.capture_module_calls(tiny, ids, 3, kinds=kinds)
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
    with helpers.patched(tiny, rmsnorm="fused", attention="fast"):
        ours = helpers.capture_module_calls(tiny, ids, 3, original_attention="eager")
    assert ours["attention (fast)"].twin == "attention (eager)"
    tiny.set_attn_implementation("eager")  # transformers' fallback, not a registered function: refused, nothing left
    try:
        with pytest.raises(ValueError, match=r"'attention \(eager\)' is not a registered attention function"):
            helpers.capture_module_calls(tiny, ids, 3, kinds={"Linear", "attention (eager)"})
    finally:
        tiny.set_attn_implementation("sdpa")
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in tiny.modules())


def test_compare_configs_prices_the_modules_of_each_eager_configuration(tiny):
    result = helpers.compare_configs(tiny, {"fused RMSNorm": dict(rmsnorm="fused"), "graph": dict(decoder="graph")},
                                     prompt_len=4, new_tokens=3, rounds=2, profile=True, prices=True)
    assert set(result.module_calls) == {helpers.ORIGINAL, "fused RMSNorm"}  # the graph decoder launches no module call
    p = result.profile("fused RMSNorm")
    assert list(p.modules) == ["TritonRMSNorm(fused)"] and len(result.module_us["fused RMSNorm"]["TritonRMSNorm(fused)"]) == 2
    assert p.modules["TritonRMSNorm(fused)"].alone_us > 0
    assert p.modules["TritonRMSNorm(fused)"].twin == "Qwen3RMSNorm"
    original = result.profile(helpers.ORIGINAL)  # the original's norms, priced in the original's rounds
    assert list(original.modules) == ["Qwen3RMSNorm"] and len(result.module_us[helpers.ORIGINAL]["Qwen3RMSNorm"]) == 2
    assert original.modules["Qwen3RMSNorm"].per_token == p.modules["TritonRMSNorm(fused)"].per_token
    # the budget reads these profiles' priced modules. The tiny model's own wall times are the host's noise on a GPU
    # (where its fused norm may cost the host less than the original's): set them 2x its swap apart, no GPU time
    added = helpers.ModuleBudget(1.0, dict(original.modules), 1.0, ()).swapped_ms(p)
    assert added != 0
    base = dataclasses.replace(original, wall_ms_per_token=20 * abs(added), gpu_busy_ms_per_token=None)
    fused = dataclasses.replace(p, wall_ms_per_token=base.wall_ms_per_token + 2 * added, gpu_busy_ms_per_token=None)
    budget = helpers.fit_module_budget({helpers.ORIGINAL: base, "fused RMSNorm": fused},
                                       (helpers.ORIGINAL, "fused RMSNorm"))
    assert budget.in_situ == pytest.approx(2.0) and budget.predict_ms(fused) == pytest.approx(fused.wall_ms_per_token)
    helpers.PROFILED_BY.clear()  # the comparison above profiled after its rounds; this one times again
    unpriced = helpers.compare_configs(tiny, {"fused RMSNorm": dict(rmsnorm="fused")}, prompt_len=4, new_tokens=3,
                                       rounds=1)
    assert unpriced.module_calls == {}  # nothing priced, the original's modules neither
    with pytest.raises(ValueError, match=r"prices: \['graph'\] are not configurations here that generate\(\) eagerly"):
        helpers.compare_configs(tiny, {"graph": dict(decoder="graph")}, rounds=1, prices=["graph"])
    with pytest.raises(ValueError, match=r"prices: \['no cache'\] .* with the KV cache"):  # priced as decode steps
        helpers.compare_configs(tiny, {"no cache": dict(rmsnorm="fused", use_cache=False)}, rounds=1,
                                prices=["no cache"])


def test_wall_time_per_token_comes_from_the_same_rounds(tiny, monkeypatch):
    """A fake clock: 0.1 s of prefill plus 1 s (original) or 2 s (two-pass) per further token."""
    def fake_generate(model, ids, new_tokens, use_cache=True):
        slow = any(isinstance(m, slower_kernels.TritonRMSNorm) for m in model.modules())
        return None, 0.1 + (new_tokens - 1) * (2.0 if slow else 1.0)

    monkeypatch.setattr(helpers, "generate", fake_generate)
    if helpers.HAS_GPU:  # the fake generations launch no kernel, which a GPU profile refuses to count per token
        monkeypatch.setattr(helpers, "_count_decode", lambda *args, **kwargs: (100.0, 1.0, 0.0))
    result = helpers.compare_configs(tiny, {"two-pass": dict(rmsnorm="two_pass")}, prompt_len=4, new_tokens=5,
                                     rounds=3, profile=True)
    assert result.decode_ms("two-pass").median == pytest.approx(2000.0)
    assert result.prefill_ms(helpers.ORIGINAL) == pytest.approx(100.0)
    assert result.decode_ratio("two-pass").median == pytest.approx(2.0)
    prof = result.profile("two-pass")
    assert prof.wall_ms_per_token == pytest.approx(2000.0) and set(result.counts) == {helpers.ORIGINAL, "two-pass"}
    assert "wall ms per decoded token" in result.table(per_token=True).columns
    with pytest.raises(KeyError, match="was not profiled"):
        result.profile(helpers.ORIGINAL_AGAIN)
    with pytest.raises(ValueError, match="not configurations here"):
        helpers.compare_configs(tiny, {}, prompt_len=4, new_tokens=5, rounds=1, profile=["nope"])
    helpers.PROFILED_BY.clear()  # the comparison above profiled after its rounds; this one times again
    single = helpers.compare_configs(tiny, {}, prompt_len=4, new_tokens=1, rounds=1)
    with pytest.raises(ValueError, match="needs new_tokens > 1"):
        single.decode_ms(helpers.ORIGINAL)


def test_profiling_warms_a_decoder_built_afresh(tiny, monkeypatch):
    """generate() is warm from the rounds; a graph decoder is built anew for the profile and captures on its first
    run, whose capture kernels must not be counted as a decoded token's (they were, once: 716 kernels, not 499)."""
    seen = {}
    count = helpers._count_decode

    def spy(model, ids, n, use_cache=True, decoder="generate", warm=True):
        seen[decoder] = warm
        return count(model, ids, n, use_cache, decoder, warm)

    monkeypatch.setattr(helpers, "_count_decode", spy)
    helpers.compare_configs(tiny, {"graph": dict(decoder="graph")}, prompt_len=4, new_tokens=3, rounds=1, profile=True)
    assert seen == {"generate": False, "graph": True}


def test_compare_calls_has_its_own_a_a_floor(monkeypatch):
    clock = {"fast": 1.0, "slow": 3.0}
    monkeypatch.setattr(helpers, "gpu_ms_per_call", lambda fn: clock[fn()])
    monkeypatch.setattr(helpers, "_loop_ms", lambda fn, calls=None, repeats=5: clock[fn()])  # CPU mode's clock
    result = helpers.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=4)
    assert result.ratios["ours"].median == 3.0 and result.floor.median == 1.0
    assert result.verdict("ours").text == "3.00x slower" and result.rounds == 4
    assert result.ms[helpers.REFERENCE] == 1.0
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        helpers.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=0)
    with pytest.raises(TypeError, match=r"calls\['ours'\] must be a zero-argument callable"):
        helpers.compare_calls({"ours": 3}, lambda: "fast", rounds=1)
    with pytest.raises(ValueError, match="at least one call"):
        helpers.compare_calls({}, lambda: "fast", rounds=1)
    with pytest.raises(ValueError, match="clock must be one of"):
        helpers.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=1, clock="wall")


def test_compare_calls_on_the_host_clock(monkeypatch):
    monkeypatch.setattr(helpers, "HAS_GPU", True)
    monkeypatch.setattr(helpers, "gpu_ms_per_call", lambda fn: {"fast": 1.0, "slow": 1.0}[fn()])  # the GPU: equal
    monkeypatch.setattr(helpers, "_loop_ms", lambda fn, calls=None, repeats=5: {"fast": 1.0, "slow": 2.0}[fn()])
    on_gpu = helpers.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=2)
    on_host = helpers.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=2, clock="host")
    assert on_gpu.ratios["ours"].median == 1.0 and on_gpu.clock == helpers.CLOCK_LABELS["gpu"]
    assert on_host.ratios["ours"].median == 2.0 and on_host.clock == helpers.CLOCK_LABELS["host"]


@pytest.mark.parametrize("values, text, median", [
    ([0.1751, 0.1753, 0.1755], "0.1752-0.1754", "0.1753"),  # not 0.175-0.175, nor a median of 0.18
    ([0.9996, 1.0, 1.0004], "0.9998-1.0002", "1.0000"),  # just off 1: enough digits to see which side
    ([1480.0, 1500.0, 1520.0], "1490-1510", "1500"),
    ([4.27, 4.46, 4.6], "4.37-4.53", "4.46"),
    ([1.08, 1.1, 1.14], "1.09-1.12", "1.10"),  # trailing zero kept, as the verdict writes "1.10x slower"
])
def test_ratio_quartiles_are_readable(values, text, median):
    r = helpers.Ratio.of(values)
    assert (r.quartiles, r.median_text) == (text, median)


@pytest.mark.parametrize("low, high, text", [
    (0.979, 0.98, "0.979-0.980"),  # both ends to the same decimals: a dropped zero reads as a shorter number
    (1.98, 2.0, "1.98-2.00"),
    (998.4, 1002.0, "998-1002"),   # 1000 and above stays whole
])
def test_ratio_quartiles_print_both_ends_to_the_same_decimals(low, high, text):
    assert helpers.Ratio(high, low, high, []).quartiles == text


def test_a_comparison_records_its_ratio_with_quartiles_and_verdict(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(harness_env, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(helpers, "generate", lambda model, ids, n, use_cache=True:
                        (None, n * (1.0 if use_cache else 3.0)))
    result = helpers.compare_configs(tiny, {"no cache": dict(use_cache=False)}, prompt_len=4, new_tokens=4, rounds=3)
    v = result.record("no cache", "full.slowdown")
    row = helpers.results(tmp_path / "results.csv").set_index("id").loc["full.slowdown"]
    assert (row["value"], row["low"], row["high"], row["verdict"]) == (3.0, 3.0, 3.0, "3.00x slower") and v.real
    assert "A/A floor 1.000" in row["note"]


@pytest.mark.parametrize("value, edges, places, most, expected", [
    (1.197, (1.2,), 2, 4, 3),         # 1.20 would read as the 20% bar
    (1.2, (1.2,), 2, 4, 2),           # the bar itself prints as the bar
    (1.0499, (1.05, 1 / 1.05), 3, 6, 4),   # 1.050 would read as the 5% threshold: 1.0499
    (1.31, (1.2,), 2, 4, 2),          # far from the edge: the places asked for
    (1.2000001, (1.2,), 2, 4, 4),     # never beyond ``most``
])
def test_places_apart_widens_a_value_off_its_edges(value, edges, places, most, expected):
    assert helpers.places_apart(value, edges, places, most) == expected


def test_a_graph_step_takes_its_kernels_time_plus_one_gap_per_kernel():
    assert helpers.graph_step_ms(1.25, 500, 0.5) == pytest.approx(1.5)
    assert helpers.graph_step_ms(1.25, 500, -0.1) == pytest.approx(1.2)  # a negative gap: the profile covers it
    for bad in (None, float("nan"), True):
        with pytest.raises(ValueError, match="gap_us must be a finite number"):
            helpers.graph_step_ms(1.25, 500, bad)
    with pytest.raises(ValueError, match="must be >= 0"):
        helpers.graph_step_ms(-1.0, 500, 0.5)
    with pytest.raises(ValueError, match="kernels must be a positive int"):
        helpers.graph_kernel_gap_us(0)
    gap = helpers.graph_kernel_gap_us(50)
    if helpers.HAS_GPU:  # a kernel boundary in a graph costs well under the host's price of a launch
        assert -1.0 < gap < 5.0
    else:
        assert gap is None


# --- Reproduce ----------------------------------------------------------------------------------
def test_reproduce_sets_a_kernel_ratio_beside_the_committed_one(tmp_path):
    import pandas as pd

    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "add.ratio", "value": 2.0, "unit": "x slower"}]).to_csv(committed, index=False)
    again = helpers.reproduce(ids=["add.ratio"], committed=committed)
    low, high = again.attrs["quartile bounds"]["add.ratio"]  # unrounded, for inside/outside
    table = again.set_index("id")
    row = table.loc["add.ratio"]
    assert low <= row["yours"] <= high
    assert row["committed"] == 2.0 and row["yours"] > 0
    assert row["deviation %"] == pytest.approx(100 * (row["yours"] / 2.0 - 1))
    assert row["clock"] == helpers.CLOCK_LABELS["gpu" if helpers.HAS_GPU else "interpreter"]
    with pytest.raises(ValueError, match="cannot be reproduced"):
        helpers.reproduce(ids=["add.made_up"])


def test_reproduce_times_kernel_ratios_only_before_a_profile(tmp_path, monkeypatch):
    import pandas as pd

    catalogue = set(helpers.catalogue()["id"])
    assert all(set(key.split("/")) <= catalogue for key in helpers.KERNEL_RATIO_IDS)
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "add.ratio", "value": 1.0, "unit": "x slower"}]).to_csv(committed, index=False)
    monkeypatch.setattr(helpers, "PROFILED_BY", ["step_timeline"])
    with pytest.raises(RuntimeError, match="step_timeline"):
        helpers.reproduce(ids=["add.ratio"], committed=committed)


def test_reproduce_reads_a_comparison_the_caller_already_ran(tiny, tmp_path, monkeypatch):
    import pandas as pd

    def fake_generate(model, ids, n, use_cache=True):
        return None, n * (4.0 if any(isinstance(m, slower_kernels.TritonRMSNorm) for m in model.modules()) else 1.0)

    monkeypatch.setattr(helpers, "generate", fake_generate)
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "rmsnorm.tps_slowdown", "value": 5.0, "unit": "x slower"}]).to_csv(committed, index=False)
    comparison = helpers.compare_configs(tiny, helpers.reproduce_configs(["rmsnorm.tps_slowdown"]), prompt_len=4,
                                         new_tokens=3, rounds=2)
    row = helpers.reproduce(tiny, ids=["rmsnorm.tps_slowdown"], committed=committed,
                            comparison=comparison).set_index("id").loc["rmsnorm.tps_slowdown"]
    assert row["yours"] == 4.0 and row["deviation %"] == pytest.approx(-20.0) and row["A/A floor"] == 1.0
    assert row["within 10%"] == "no"
    with pytest.raises(ValueError, match="has no"):
        helpers.reproduce(tiny, ids=["full.slowdown"], committed=committed, comparison=comparison)


def test_reproduce_gives_the_small_effects_more_rounds(tiny, tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.setattr(helpers, "generate", lambda model, ids, n, use_cache=True: (None, float(n)))
    monkeypatch.setattr(helpers, "SIZES", dataclasses.replace(helpers.SIZES, rounds=2, rounds_small=4))
    seen = []
    compare = helpers.compare_configs
    monkeypatch.setattr(helpers, "compare_configs", lambda model, configs, **kw: seen.append(
        (sorted(configs), kw["rounds"])) or compare(model, configs, prompt_len=4, new_tokens=2, **kw))
    committed = tmp_path / "results.csv"
    pd.DataFrame([{"id": "rmsnorm.tps_slowdown", "value": 1.0, "unit": "x slower"},
                  {"id": "full.slowdown", "value": 1.0, "unit": "x slower"}]).to_csv(committed, index=False)
    table = helpers.reproduce(tiny, ids=["rmsnorm.tps_slowdown", "full.slowdown"], committed=committed)
    assert helpers.SMALL_EFFECTS == ("rmsnorm.tps_slowdown",)
    assert seen == [(["two-pass RMSNorm"], 4), (["all custom"], 2)]
    assert list(table["clock"]) == ["wall, 4 shuffled rounds", "wall, 2 shuffled rounds"]
    seen.clear()  # one round count for all (--rounds): one comparison
    helpers.reproduce(tiny, ids=["rmsnorm.tps_slowdown", "full.slowdown"], committed=committed, rounds=2)
    assert seen == [(["all custom", "two-pass RMSNorm"], 2)]


def test_reproduced_ratios_are_catalogued_ratios():
    for rid in helpers.REPRODUCE_CONFIGS:
        assert helpers.catalogue_entry(rid)["unit"] == "x slower", rid


def test_progress_bars_hide_when_asked(monkeypatch):
    """run_series --write-outputs sets TQDM_DISABLE: a stored notebook would keep a widget's "0%"."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert helpers.progress(range(3)).disable
    monkeypatch.delenv("TQDM_DISABLE")
    bar = helpers.progress(range(3))
    assert not bar.disable and list(bar) == [0, 1, 2]


def test_a_ratio_below_zero_is_noise_and_prints_its_quartiles_apart():
    v = helpers.verdict(helpers.Ratio(-0.03, -0.2, 0.1, []))
    assert not v.real and v.text == "within noise" and "not a positive time ratio" in v.reason
    assert not v.near_threshold
    assert helpers.Ratio(-0.8, -1.18, -0.431, []).quartiles == "-1.180 to -0.431"
    assert helpers.Ratio(0.9, 0.85, 0.95, []).quartiles == "0.85-0.95"


def test_a_trend_ignores_steps_inside_the_noise():
    R = helpers.Ratio.of
    points = {128: R([1.0, 0.98, 1.02]), 256: R([1.5, 1.48, 1.52]), 512: R([1.49, 1.47, 1.51]), 1024: R([2.0, 1.98, 2.02])}
    trend = helpers.read_trend(points)
    assert trend.word == "grew"  # 1.50 -> 1.49 is flat, not a step down, but the reading names it
    assert "at every step" not in trend.text and "256: 1.50x to 512: 1.49x" in trend.text
    points[512] = R([1.6, 1.58, 1.62])
    assert "grew with the context at every step" in helpers.read_trend(points).text
    points[512] = R([1.2, 1.18, 1.22])  # a real step down: no consistent trend
    assert "not one way" in helpers.read_trend(points).text
    assert "with the rows" in helpers.read_trend({1: R([1.0]), 2: R([2.0])}, along="the rows").text
    # each step back inside the 5% threshold, but together 5.3% behind the peak: not one way (chapter 3's H200 run)
    rows = {1: R([1.64]), 256: R([1.80]), 512: R([1.76]), 1024: R([1.705]), 4096: R([1.80])}
    assert "not one way" in helpers.read_trend(rows, along="the rows").text
    rows[1024] = R([1.72])  # 4.4% behind the peak: flat steps, and the trend stands
    assert helpers.read_trend(rows, along="the rows").word == "grew"


def test_a_flat_line_is_told_from_one_that_moved_both_ways():
    """Chapter 7's flat predictions: "no consistent trend" is flat only when no step between neighbours went beyond
    the noise threshold and no point lies beyond it from another (its H200 run: 30.1, 23.2, 19.8, 33.1 wall ms, a
    fall and a rise, is not flat but moved both ways)."""
    R = helpers.Ratio.of
    both_ways = helpers.read_trend({128: R([30.1]), 256: R([23.2]), 512: R([19.8]), 1024: R([33.1])}, unit="ms")
    assert both_ways.word == "no consistent trend" and not both_ways.flat and both_ways.both_ways
    flat = helpers.read_trend({128: R([30.1]), 256: R([29.5]), 512: R([30.4]), 1024: R([30.0])}, unit="ms")
    assert flat.word == "no consistent trend" and flat.flat and not flat.both_ways
    grew = helpers.read_trend({128: R([30.0]), 256: R([31.0]), 512: R([32.0]), 1024: R([33.0]), 2048: R([34.0])})
    assert grew.word == "grew" and not grew.flat  # small steps that add up to a trend: not flat either
    # a steady rise inside wide quartiles: no consistent trend, and neither flat nor both ways
    wide = {L: R([m * 0.8, m, m * 1.2]) for L, m in ((128, 30.0), (256, 31.4), (512, 32.9), (1024, 34.4))}
    rising = helpers.read_trend(wide, unit="ms")
    assert rising.word == "no consistent trend" and not rising.flat and not rising.both_ways
    # one step up beyond the noise, the rest flat, inside wide quartiles: moved, but not both ways
    one_step = {L: R([m * 0.8, m, m * 1.2]) for L, m in ((128, 30.0), (256, 33.0), (512, 33.5), (1024, 34.0))}
    assert not helpers.read_trend(one_step, unit="ms").both_ways


def test_a_step_through_a_noisy_point_is_held_to_that_point_s_floor():
    """Chapter 7's H200 run: the ratio went 4.70, 5.00, 4.53, 4.51 with the 256-token point's A/A floor at 1.172
    (a 34% threshold): its +6.4% and -9.4% steps are noise by that point's own verdict, so the line is flat, not
    'moved both ways'; with a quiet floor there the same steps are beyond the ends' 5%."""
    R = helpers.Ratio.of
    points = {128: R([4.70]), 256: R([5.00]), 512: R([4.53]), 1024: R([4.51])}
    floors = {128: R([1.015]), 256: R([1.172]), 512: R([0.981]), 1024: R([1.003])}
    noisy = helpers.read_trend(points, floors)
    assert noisy.word == "no consistent trend" and noisy.flat and not noisy.both_ways
    quiet = helpers.read_trend(points, {**floors, 256: R([1.0])})
    assert not quiet.flat and quiet.both_ways
    # a trend's step back inside a noisy point's wider threshold is named with that threshold
    rising = {128: R([1.0]), 256: R([1.5]), 512: R([1.4]), 1024: R([2.0])}
    trend = helpers.read_trend(rising, {128: R([1.0]), 256: R([1.0]), 512: R([1.1]), 1024: R([1.0])})
    assert trend.word == "grew" and "stayed inside the noise threshold (20%)" in trend.text
    assert "the point at 512 held to its own A/A floor's wider threshold (20%)" in trend.text
    # a move between two quiet points is read across a noisy one between them
    loud = {128: R([1.0]), 256: R([1.2]), 512: R([1.0]), 1024: R([1.0])}
    fell = helpers.read_trend({128: R([1.00]), 256: R([1.30]), 512: R([0.95]), 1024: R([1.50])}, loud)
    assert fell.word == "no consistent trend" and fell.both_ways  # 128 -> 512 fell 5.3% between quiet points
    dip = helpers.read_trend({128: R([1.00]), 256: R([1.10]), 512: R([0.92]), 1024: R([1.00])}, loud)
    assert dip.both_ways and not dip.flat


def test_a_median_prints_to_its_quartiles_digits():
    assert helpers.Ratio(1.0048, 0.983, 1.017, []).median_text == "1.005"  # not 1.00 beside 0.983-1.017
    assert helpers.Ratio(1.10, 1.05, 1.15, []).median_text == "1.10"
    assert helpers.Ratio(0.176, 0.175, 0.177, []).median_text == "0.176"


def test_the_noisier_floor_is_the_one_furthest_from_1():
    R = helpers.Ratio.of
    near, below, above = R([1.01]), R([0.88]), R([1.1])
    assert helpers.noisier_floor([near, None, below, above]) is below  # 12% below 1 beats 10% above it
    assert helpers.noisier_floor([None]) is None and helpers.noisier_floor([]) is None


def test_a_noisy_floor_stands_out_of_the_minimum_effect():
    """Judged against itself a floor could never stand out; against the 5% minimum a noisy host shows."""
    noisy = helpers.Ratio.of([1.14, 1.16, 1.18, 1.2])
    result = helpers.Comparison({}, {}, {helpers.ORIGINAL_AGAIN: noisy, "swap": helpers.Ratio.of([2.0] * 4)}, [], 4, 8)
    assert result.verdict(helpers.ORIGINAL_AGAIN).text == "1.17x slower"
    assert helpers.verdict(noisy, noisy).text == "within noise"  # judged against itself: always quiet
    assert result.verdict("swap").text == "2.00x slower"
    calls = helpers.CallComparison({}, {helpers.REFERENCE_AGAIN: noisy}, "GPU time", 4)
    assert calls.verdict(helpers.REFERENCE_AGAIN).text == "1.17x slower"


# --- The decode step without the host -----------------------------------------------------------
def test_graph_decoder_generates_what_generate_does(tiny):
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    expected, _ = helpers.generate(tiny, ids, 6)
    decoder = helpers.GraphDecoder(tiny, max_len=16)
    assert decoder.graphed == helpers.HAS_GPU
    for _ in range(2):  # the cache is reset between generations: the second is the same as the first
        new, seconds = decoder.generate(ids, 6)
        assert torch.equal(new, expected.cpu()) and seconds > 0
    shorter, _ = decoder.generate(ids[:, :3], 4)  # another prompt length, the same captured step
    assert torch.equal(shorter, helpers.generate(tiny, ids[:, :3], 4)[0].cpu())
    kept = decoder.generate(ids, 6)[0]
    decoder.generate(ids, 1)  # the next generation must not rewrite tokens already handed back
    assert torch.equal(kept, expected.cpu())


@pytest.mark.skipif(not helpers.HAS_GPU, reason="CUDA graphs need a GPU")
def test_graph_replay_generates_what_the_eager_step_does(tiny):
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    eager = helpers.GraphDecoder(tiny, max_len=32, use_graph=False).generate(ids, 20)[0]
    graphed = helpers.GraphDecoder(tiny, max_len=32, use_graph=True)
    assert graphed.graphed and torch.equal(graphed.generate(ids, 20)[0], eager)


@pytest.mark.skipif(not helpers.HAS_GPU, reason="CUDA graphs need a GPU")
def test_the_fast_model_replayed_from_a_graph_generates_what_it_does_eagerly(tiny):
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    with helpers.patched(tiny, **helpers.ALL_FAST):  # one patch for both: a graph holds the fused weights
        eager = helpers.GraphDecoder(tiny, max_len=32, use_graph=False).generate(ids, 20)[0]
        graphed = helpers.GraphDecoder(tiny, max_len=32, use_graph=True)
        assert graphed.graphed and torch.equal(graphed.generate(ids, 20)[0], eager)


def test_graph_decoder_rejects_bad_input(tiny):
    with pytest.raises(ValueError, match="max_len must be an int >= 2"):
        helpers.GraphDecoder(tiny, max_len=1)
    decoder = helpers.GraphDecoder(tiny, max_len=8, use_graph=False)
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    with pytest.raises(ValueError, match=r"new_tokens must be in \[1, max_len - prompt_len\] = \[1, 3\]"):
        decoder.generate(ids, 4)
    with pytest.raises(ValueError, match="batch size 1"):
        decoder.generate(ids[0], 2)
    if not helpers.HAS_GPU:
        with pytest.raises(ValueError, match="use_graph=True needs a CUDA GPU"):
            helpers.GraphDecoder(tiny, max_len=8, use_graph=True)


@pytest.mark.parametrize("values, floor, reason", [
    ([1.02, 1.01, 1.03], None, "smallest real effect (5%)"),
    ([1.10, 1.09, 1.11], [1.08, 1.07, 1.09], "twice the A/A floor's distance from 1 (16%)"),
    ([1.5, 0.9, 2.1, 0.8], None, "lie on both sides of 1"),
])
def test_a_within_noise_verdict_says_which_rule_held_it_back(values, floor, reason):
    v = helpers.verdict(helpers.Ratio.of(values), helpers.Ratio.of(floor) if floor else None)
    assert v.text == "within noise" and reason in v.reason
    assert helpers.verdict(helpers.Ratio.of([2.0, 1.9, 2.1])).reason == ""


# --- The fast kernels inside the model ----------------------------------------------------------
FAST_MODULES = dict(rmsnorm="fused", projections=set(helpers.PROJECTION_GROUPS), linear="gemv", mlp="fused",
                    attention="fast")  # the fast kernels module by module, without the fused decoder layers


@pytest.mark.parametrize("swaps", ["ALL_FAST", "FAST_MODULES"])
def test_the_fast_model_generates_what_the_original_does_and_restores_it(tiny, ids, swaps):
    before_modules = dict(tiny.named_modules())
    before = logits(tiny, ids)
    expected, _ = helpers.generate(tiny, ids, 6)
    cfg = tiny.config
    with helpers.patched(tiny, **(helpers.ALL_FAST if swaps == "ALL_FAST" else FAST_MODULES)) as counts:
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
        torch.testing.assert_close(logits(tiny, ids), before, **MODEL_TOL[helpers.DTYPE])  # prefill_attention
        generated, _ = helpers.generate(tiny, ids, 6)  # decode: decode_attention over the cache
        assert torch.equal(generated, expected)
        with slower_kernels.count_launches() as launched:
            helpers.generate(tiny, ids, 2)
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
        with helpers.patched(tiny, **swaps), slower_kernels.count_launches() as launched:
            helpers.generate(tiny, ids, 3)
        return sum(launched.values())

    fused, modules = our_launches(helpers.ALL_FAST), our_launches(FAST_MODULES)
    assert fused < modules


@pytest.fixture(scope="module")
def tiny32():
    """The tiny model in fp32 (on a GPU too), where a swap that changes the maths changes the greedy tokens.
    Its weights are drawn wider than transformers' default (std 0.2, not 0.02), which makes the tiny model
    repeat one token whatever the context: with these, its tokens follow the context."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    # Drawn on the CPU, so that a GPU run tests the same weights. Seed 5: every one of the reference's 8 greedy
    # tokens has a top-2 logit gap of at least 0.17, over three times GREEDY_GAP on a GPU (seed 1 had a 0.045 gap
    # at token 2, and on the H200 the test stopped at its own precondition, 16 of 16).
    torch.manual_seed(5)
    model = Qwen3ForCausalLM(Qwen3Config(**dict(helpers.TINY_QWEN3, initializer_range=0.2), attn_implementation="sdpa"))
    return model.to(helpers.DEVICE, torch.float32).eval()


# The smallest top-2 logit gap a greedy token is compared at: the interpreter computes exact fp32; on a GPU,
# tl.dot rounds fp32 inputs to TF32 (a relative error near 1e-3), so only clearer choices are held to it.
GREEDY_GAP = 5e-2 if helpers.HAS_GPU else 1e-3


FAST_OPTIONS = {**{name: {k: v for k, v in swaps.items() if k != "decoder"} for name, swaps in helpers.STAIRCASE.items()},
                "fast modules, no fused layers": FAST_MODULES}


@pytest.mark.parametrize("decoder", ["generate", "graph decoder"])
@pytest.mark.parametrize("option", list(FAST_OPTIONS))
def test_every_fast_option_generates_the_originals_greedy_tokens(tiny32, option, decoder):
    """Eagerly and through GraphDecoder (its static cache; replayed from a CUDA graph on a GPU), every step of
    chapter 9's staircase decodes the original's greedy tokens in fp32, up to the reference's first near-tie
    (a top-2 logit gap within GREEDY_GAP; at least 4 tokens), so a decode step that lost its KV cache cannot
    pass by luck."""
    from transformers import GenerationConfig

    prompt, n = helpers.make_prompt(7, vocab_size=tiny32.config.vocab_size), 8
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
    with helpers.patched(tiny32, **FAST_OPTIONS[option]):
        if decoder == "generate":
            got, _ = helpers.generate(tiny32, prompt, n)
        else:
            got, _ = helpers.GraphDecoder(tiny32, max_len=16).generate(prompt, n)
    assert got.cpu().tolist()[:clear] == expected.cpu().tolist()[:clear]


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_a_fused_layer_reads_the_kv_cache_by_either_name(tiny32, name):
    """transformers 5.25 passes a decoder layer its KV cache as ``cache``; earlier releases as
    ``past_key_values``. The fused layer appends to the cache under both names, and refuses two caches."""
    from transformers import DynamicCache

    layer = slower_kernels.FastDecoderLayer.from_hf(tiny32.model.layers[0], helpers._fast_attention)
    x = torch.randn(1, 3, tiny32.config.hidden_size, device=helpers.DEVICE)
    position = torch.arange(3, device=helpers.DEVICE)[None]
    cos_sin = tiny32.model.rotary_emb(x, position)
    cache = DynamicCache(config=tiny32.config)
    with torch.inference_mode():
        layer(x, position_embeddings=cos_sin, **{name: cache})
    assert cache.get_seq_length(0) == 3
    with pytest.raises(ValueError, match="cache and past_key_values name two different KV caches"):
        layer(x, position_embeddings=cos_sin, cache=cache, past_key_values=DynamicCache(config=tiny32.config))


def test_the_fast_model_under_a_static_cache(tiny):
    """GraphDecoder's static cache hands attention a mask over the whole buffer: decode reads kv_len from it."""
    prompt = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    expected, _ = helpers.generate(tiny, prompt, 6)
    with helpers.patched(tiny, **helpers.ALL_FAST):
        with slower_kernels.count_launches() as launched:
            new, _ = helpers.GraphDecoder(tiny, max_len=16, use_graph=False).generate(prompt, 6)
    assert torch.equal(new, expected.cpu())
    assert launched["decode_attention_kernel"] > 0 and launched["prefill_attention_kernel"] > 0


def test_the_fast_model_s_logits_under_a_static_cache(tiny):
    """Logits, not only tokens (a tiny random model repeats one token, whatever its attention does). transformers
    drops the mask for a prefill into an empty static cache: the unwritten keys past the prompt must not count."""
    from transformers import DynamicCache, StaticCache

    prompt = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    with torch.no_grad(), helpers.patched(tiny, **helpers.ALL_FAST):
        dynamic, static = DynamicCache(config=tiny.config), StaticCache(config=tiny.config, max_cache_len=16)
        expected = [tiny(prompt, past_key_values=dynamic, use_cache=True).logits[0, -1]]
        got = [tiny(prompt, past_key_values=static, use_cache=True).logits[0, -1]]
        for position, token in enumerate([3, 7, 11], start=prompt.shape[1]):
            step = torch.tensor([[token]], device=prompt.device)
            expected.append(tiny(step, past_key_values=dynamic, use_cache=True).logits[0, -1])
            got.append(tiny(step, position_ids=torch.tensor([[position]], device=prompt.device),
                            past_key_values=static, use_cache=True).logits[0, -1])
    for e, g in zip(expected, got):
        torch.testing.assert_close(g.double(), e.double(), **MODEL_TOL[helpers.DTYPE])


def test_patch_rejects_unknown_fast_options(tiny):
    with pytest.raises(ValueError, match="linear must be 'matmul' or 'gemv'"):
        with helpers.patched(tiny, projections={"mlp"}, linear="cublas"):
            pass
    with pytest.raises(ValueError, match="mlp must be None or 'fused'"):
        with helpers.patched(tiny, mlp="unfused"):
            pass
    with pytest.raises(ValueError, match="layer must be None or 'fused'"):
        with helpers.patched(tiny, layer="fast", attention="fast"):
            pass
    with pytest.raises(ValueError, match="layer='fused' runs the fast attention inside it"):
        with helpers.patched(tiny, layer="fused"):
            pass


@pytest.mark.parametrize("S", [1, 3])
def test_fast_attention_reads_a_static_cache_through_its_mask(S):
    """A static cache hands attention its whole buffer and a boolean mask; keys past the mask must not count."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    B, Hq, Hkv, D, T, filled = 1, 4, 2, 16, 12, 7  # 7 of the 12 cache slots written
    q = torch.randn(B, Hq, S, D, generator=g).to(helpers.DEVICE, helpers.DTYPE)
    k, v = (torch.randn(B, Hkv, T, D, generator=g).to(helpers.DEVICE, helpers.DTYPE) for _ in range(2))
    k[:, :, filled:], v[:, :, filled:] = float("nan"), float("nan")  # unwritten slots: never to be read
    positions = torch.arange(filled - 1, filled) if S == 1 else torch.arange(S)  # the queries' positions
    positions = positions.to(helpers.DEVICE)
    mask = (torch.arange(T, device=helpers.DEVICE)[None, :] <= positions[:, None])[None, None]  # sdpa-style
    out, _ = helpers._fast_attention(None, q, k, v, mask, scaling=D ** -0.5)
    n = filled if S == 1 else S
    ref = F.scaled_dot_product_attention(q.double(), k[:, :, :n].double(), v[:, :, :n].double(), is_causal=S > 1,
                                         enable_gqa=True).transpose(1, 2)
    torch.testing.assert_close(out.double(), ref, **MODEL_TOL[helpers.DTYPE])
    if S > 1:  # transformers drops the mask of a prefill into an empty static cache: the same keys count
        out, _ = helpers._fast_attention(None, q, k, v, None, scaling=D ** -0.5)
        torch.testing.assert_close(out.double(), ref, **MODEL_TOL[helpers.DTYPE])
    with pytest.raises(ValueError, match="batch size 1 with a mask"):
        helpers._fast_attention(None, q.expand(2, -1, -1, -1), k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1),
                                mask.expand(2, -1, -1, -1))


@pytest.mark.parametrize("value, text", [(1655.0, "1,655"), (186.6087, "186.6"), (0.0070113, "0.007011"),
                                         (float("nan"), "-"), (None, "-"), (-0.0, "0"), (151936.4, "151,936"),
                                         (0.1807, "0.1807"), (float("inf"), "inf")])
def test_tables_write_counts_as_counts_and_missing_as_a_dash(value, text):
    assert helpers.table_number(value) == text


def test_show_formats_floats_and_leaves_the_caller_s_table_alone(capsys):
    import pandas as pd

    df = pd.DataFrame({"launches": [1655.0, 977.0], "ms": [26.4503, float("nan")], "name": ["a", "b"]})
    helpers.show(df)
    out = capsys.readouterr().out
    assert "1,655" in out and "26.45" in out and " -" in out and "NaN" not in out
    assert df["launches"].dtype == float  # a copy was formatted


# --- Timelines and the roofline ------------------------------------------------------------------------
def _trace(*events):
    return {"traceEvents": [dict(ph="X", cat=c, name=n, ts=t, dur=d) for c, n, t, d in events]}


def test_device_kernels_read_raw_events_and_fall_back_to_function_events():
    """The same kernels either way: the raw Kineto events where the profiler has them, prof.events() where not."""
    from types import SimpleNamespace as NS

    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    raw = [("gemv", cuda, 3000), ("Memcpy HtoD", cuda, 500), ("cudaLaunchKernel", cpu, 4000), ("add", cuda, 1500),
           ("Memset (Device)", cuda, 200)]
    kineto = [NS(name=lambda n=n: n, device_type=lambda d=d: d, duration_ns=lambda t=t: t) for n, d, t in raw]
    fast = NS(profiler=NS(kineto_results=NS(events=lambda: kineto)))
    objects = [NS(name=n, device_type=d, time_range=NS(elapsed_us=lambda t=t: t / 1e3)) for n, d, t in raw]
    slow = NS(profiler=None, events=lambda: objects)
    assert helpers._device_kernels(fast) == helpers._device_kernels(slow) == [("gemv", 3.0), ("add", 1.5)]
    older = NS(profiler=NS(kineto_results=NS(events=lambda: [NS(name=lambda: "gemv")])), events=lambda: objects)
    assert helpers._device_kernels(older) == [("gemv", 3.0), ("add", 1.5)]  # raw events without duration_ns


def test_a_timeline_keeps_launches_and_kernels_only():
    trace = _trace(("cpu_op", "aten::mm", 100, 50), ("cuda_runtime", "cudaLaunchKernel", 110, 5),
                   ("kernel", "gemm", 120, 10), ("cuda_driver", "cuLaunchKernelEx", 130, 4),
                   ("kernel", "triton_add", 140, 2), ("cuda_runtime", "cudaStreamSynchronize", 150, 30),
                   ("gpu_memcpy", "Memcpy DtoH", 160, 3), ("cuda_runtime", "cudaGraphLaunch", 170, 6))
    trace["traceEvents"].append({"ph": "i", "cat": "kernel", "name": "marker", "ts": 1})  # not a span
    df = helpers.timeline_from_trace(trace)
    assert list(df["name"]) == ["cudaLaunchKernel", "gemm", "cuLaunchKernelEx", "triton_add", "cudaGraphLaunch"]
    assert list(df["lane"]) == ["host launches", "GPU kernels", "host launches", "GPU kernels", "host launches"]
    assert df["start_us"].iloc[0] == 0 and df["start_us"].iloc[-1] == 60


def test_a_timeline_summary_counts_overlapping_kernels_once():
    df = helpers.timeline_from_trace(_trace(("cuda_runtime", "cudaLaunchKernel", 0, 5), ("kernel", "a", 10, 10),
                                            ("kernel", "b", 15, 10), ("kernel", "c", 40, 10)))
    s = helpers.timeline_summary(df)
    assert (s["host launches"], s["GPU kernels"], s[helpers.SPAN_US], s[helpers.BUSY_US]) == (1, 3, 50.0, 25.0)
    assert s["GPU idle fraction"] == pytest.approx(0.5)
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = helpers.plot_timelines({"eager": df, "graph": df})
    title = fig.axes[0].get_title(loc="left")  # both times with their clocks
    assert len(fig.axes) == 4  # the whole step and its zoom, per configuration
    assert "0.05 trace ms span; GPU busy 0.03 ms of profiler kernel time (50% of the step)" in title
    plt.close(fig)
    with pytest.raises(ValueError, match="zoom must be a fraction"):
        helpers.plot_timelines({"eager": df}, zoom=0)


def test_a_timeline_draws_every_kernel_at_least_a_pixel_wide():
    """1,000 kernels of 1 µs in a 30 ms step: each is drawn (no bar thinner than a pixel), and the zoom shows
    its share of them."""
    events = [("kernel", f"k{i}", 30 * i, 1) for i in range(1000)]
    df = helpers.timeline_from_trace(_trace(*events))
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = helpers.plot_timelines({"eager": df}, zoom=0.1)
    whole, zoom = fig.axes
    bars = [c for c in whole.collections if len(c.get_paths())]
    assert sum(len(c.get_paths()) for c in bars) == 1000
    widths = [p.get_extents().width for c in bars for p in c.get_paths()]
    px = (whole.get_xlim()[1] - whole.get_xlim()[0]) / whole.get_window_extent().width
    assert min(widths) >= px * 0.99
    assert "zoom: 100 kernels" in zoom.get_title(loc="left")
    plt.close(fig)


def test_step_timeline_says_it_needs_a_gpu(tiny):
    if helpers.HAS_GPU:
        pytest.skip("CPU mode only")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        helpers.step_timeline(tiny, helpers.make_prompt(4, vocab_size=tiny.config.vocab_size))


def test_the_roofline_draws_each_kernel_under_its_roofs():
    import pandas as pd

    plt = pytest.importorskip("matplotlib.pyplot")
    points = pd.DataFrame({"label": ["add", "gemv"], "group": ["slow", "fast"], "flops": [1e6, 2e8],
                           "bytes": [6e6, 2e8], "gpu_ms": [0.002, 0.05]})
    fig = helpers.plot_roofline(points, slug="h200")
    ax = fig.axes[0]
    assert [c.get_offsets().shape[0] for c in ax.collections] == [1, 1]
    assert "4,800 GB/s" in ax.get_legend().get_texts()[0].get_text()
    assert ax.get_title(loc="left").startswith("Roofline of the NVIDIA H200")
    plt.close(fig)
    crowd = pd.DataFrame({"label": ["gate/up", "q/k/v", "down"], "group": ["fast"] * 3, "flops": [2e8] * 3,
                          "bytes": [2e8] * 3, "gpu_ms": [0.05, 0.051, 0.052]})  # three points on one spot
    fig = helpers.plot_roofline(crowd, slug="h200")
    ax = fig.axes[0]  # no labels stacked on the points: each point in the legend, in a colour of its own
    assert not ax.texts
    assert [t.get_text() for t in ax.get_legend().get_texts()][2:] == ["fast: gate/up", "fast: q/k/v", "fast: down"]
    colours = {tuple(c.get_facecolor()[0]) for c in ax.collections}
    assert len(colours) == 3
    plt.close(fig)
    with pytest.raises(ValueError, match="missing columns"):
        helpers.plot_roofline(points.drop(columns="gpu_ms"), slug="h200")
    with pytest.raises(ValueError, match="no nominal bandwidth and compute"):
        helpers.plot_roofline(points, slug="mystery")


def test_compare_words_a_ratio_s_unit_both_ways(tmp_path, monkeypatch):
    monkeypatch.setattr(harness_env, "RESULTS_DIR", tmp_path)
    helpers.record("add.ratio", 0.5, "x slower")
    row = helpers.compare(["add.ratio"]).iloc[0]
    assert row["unit"] == "time ratio (above 1: slower)" and row["yours"] == 0.5


def test_shuffled_rounds_give_every_name_the_same_mean_position():
    """ABBA: over each pair of rounds every configuration sits at the same mean position, so a steady drift of
    the host within a round biases no ratio, the A/A pair's included."""
    names = ["original", "original (again)", "a", "b", "c"]
    orders = [helpers._shuffled(names, r, seed=0) for r in range(8)]
    assert len({tuple(o) for o in orders[::2]}) > 1  # the pairs differ from each other
    for name in names:
        assert sum(o.index(name) for o in orders) / len(orders) == (len(names) - 1) / 2


# --- The machine (chapter 1), the compiler table (chapters 2-4), the exercises --------------------------
def test_the_gpu_table_puts_a_t4_beside_an_h200():
    df = helpers.gpu_table()
    assert {"Tesla T4", "NVIDIA H200"} <= set(df.columns) and "name" not in df.index
    assert df.loc["SMs", "Tesla T4"] == 40 and df.loc["SMs", "NVIDIA H200"] == 132
    assert df.loc["memory bandwidth (GB/s, nominal)", "NVIDIA H200"] == helpers.NOMINAL_GB_S["h200"]
    # the ridge point: tensor-core flop/s over bytes/s, 65 TFLOP/s / 320 GB/s on a T4
    assert df.loc["ridge point (flop per byte)", "Tesla T4"] == round(65e3 / 320)
    assert (len(df.columns) == 3) == helpers.HAS_GPU


def test_the_memory_hierarchy_shrinks_towards_the_cores():
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = helpers.plot_memory_hierarchy()
    bars = fig.axes[0].containers
    assert len(bars) == len(helpers.GPU_SPECS) + (helpers.HAS_GPU and helpers.SLUG not in helpers.GPU_SPECS)
    for container in bars:
        widths = [b.get_width() for b in container]
        assert widths[-1] == max(widths) and widths[-2] < widths[-1]  # device memory is the largest level
    plt.close(fig)


@pytest.mark.parametrize("ratio, floor, word", [
    (helpers.Ratio.of([1.5, 1.6, 1.7]), None, "slower"),
    (helpers.Ratio.of([0.6, 0.62, 0.65]), None, "faster"),
    (1.03, None, "same"),  # inside the 5% minimum effect
    (helpers.Ratio.of([1.08, 1.1, 1.12]), helpers.Ratio.of([1.06, 1.07, 1.08]), "same"),  # inside twice the floor
    (helpers.Ratio.of([0.7, 0.9, 1.3, 1.4, 1.5]), None, "same"),  # quartiles on both sides of 1
])
def test_check_answer_judges_with_the_verdict(ratio, floor, word, capsys):
    assert helpers.check_answer(None, ratio, floor) == word
    assert "Set `answer`" in capsys.readouterr().out
    assert helpers.check_answer(word, ratio, floor, change="BLOCK_SIZE 128") == word
    assert "matches" in capsys.readouterr().out
    other = next(a for a in helpers.ANSWERS if a != word)
    helpers.check_answer(other, ratio, floor)
    assert f"does not match (measured: {word!r})" in capsys.readouterr().out
    with pytest.raises(ValueError, match="answer must be one of"):
        helpers.check_answer("quicker", ratio, floor)


def test_check_answer_shows_its_spread_and_warns_near_the_threshold(capsys):
    near = helpers.Ratio.of([1.04, 1.05, 1.06, 1.05])
    helpers.check_answer(None, near, helpers.Ratio.of([0.99, 1.0, 1.01, 1.0]), change="half the elements")
    out = capsys.readouterr().out
    assert "quartiles 1.048-1.053 over 4 rounds" in out and "A/A floor 1.000" in out
    assert "near the series' threshold (5% from 1)" in out
    helpers.check_answer(None, helpers.Ratio.of([1.9, 2.0, 2.1]), None)
    assert "near the series' threshold" not in capsys.readouterr().out
    # a floor 5% off 1 widens the threshold to 10%: the warning names that one, not the series' 5%
    helpers.check_answer(None, helpers.Ratio.of([1.06, 1.07, 1.08]), helpers.Ratio.of([1.04, 1.05, 1.06]))
    out = capsys.readouterr().out
    assert "within noise" in out and "near its threshold (10% from 1: twice its A/A floor's distance" in out
    # widened, yet it would print as the series' 5%: one decimal more, so it does not read as the minimum
    assert helpers.threshold_pct(0.052) == "5.2%" and helpers.threshold_pct(0.05) == "5%"
    assert helpers.threshold_pct(0.108) == "11%"
    helpers.check_answer(None, helpers.Ratio.of([1.08, 1.1, 1.14]), None, change="x")  # one number, as the verdict writes it
    assert "x: 1.10x slower; quartiles 1.09-1.12" in capsys.readouterr().out
    helpers.check_answer(None, helpers.Ratio.of([0.51, 0.515, 0.52]), None, change="z")  # a speed-up: the time ratio too
    assert "z: time ratio 0.515 (1.94x faster); quartiles 0.512-0.518" in capsys.readouterr().out
    helpers.check_answer(None, helpers.Ratio.of([0.99, 1.01, 1.02]), None, change="y")  # within noise: the ratio and the rule
    assert "y: 1.01x the time (within noise; closer to 1 than" in capsys.readouterr().out


def test_the_compiler_table_and_a_ptx_excerpt_come_from_a_compiler_process():
    df = helpers.compiler_table(["add_kernel"])
    assert set(df["kernel"]) == {"add_kernel"} and set(df["cc"]) == {75, 90}
    assert (df["widest global load"] == "v4").all()
    excerpt = helpers.ptx_excerpt("add_kernel", df["label"][0], 75, r"ld\.global", max_lines=1)
    assert excerpt.startswith("@%p") or excerpt.startswith("ld.global"), excerpt
    assert "ld.global.v4" in excerpt
    assert "ptx" not in df.columns and "registers" in df.columns  # the PTX is kept aside for the excerpts
    label = df["label"][0]  # the excerpt reads the table's PTX: the same text a compiler process makes of that kernel
    kept, fresh = helpers._PTX["add_kernel", label, 75], helpers._aot("--ptx-text", "add_kernel", label, "75")
    assert kept.rstrip() == fresh.rstrip() and ".target sm_75" in kept
    with pytest.raises(ValueError, match="not in the compiler table"):
        helpers.compiler_table(["no_such_kernel"])
    with pytest.raises(RuntimeError, match="labels of 'add_kernel'"):
        helpers.ptx_excerpt("add_kernel", "BLOCK_SIZE=3", 75, "ld")
