"""slower_harness.compare: configurations of the model in shuffled rounds with their own A/A floor, priced before
(``capture_prices``) and profiled after (``profile_configs``); kernel calls against a reference (``compare_calls``)."""
import dataclasses
import re

import pytest
import torch

import slower_kernels
from slower_harness import budget, clocks, compare, decoders, env, results, timing_order
from slower_harness.compare import ORIGINAL, ORIGINAL_AGAIN, REFERENCE, REFERENCE_AGAIN
from slower_harness.model import make_prompt
from slower_harness.stats import Ratio, verdict


def rmsnorm_mode(model) -> str:
    """The mode of the model's RMSNorms of ours ("two_pass", "fused"), or "original" where there is none."""
    modes = {m.mode for m in model.modules() if isinstance(m, slower_kernels.TritonRMSNorm)}
    return modes.pop() if modes else "original"


def test_compare_configs_interleaves_shuffled_rounds_with_an_a_a_pair(tiny, monkeypatch):
    """With a fake clock (2 s per generation with two-pass RMSNorms, 1 s otherwise) the ratios are exact."""
    def fake_generate(model, ids, new_tokens, use_cache=True):
        slow = any(isinstance(m, slower_kernels.TritonRMSNorm) for m in model.modules())
        return None, (2.0 if slow else 1.0) * new_tokens / 8

    monkeypatch.setattr(decoders, "generate", fake_generate)
    result = compare.compare_configs(tiny, {"two-pass RMSNorm": dict(rmsnorm="two_pass")}, prompt_len=4,
                                     new_tokens=8, rounds=6, seed=3)
    assert set(result.ratios) == {ORIGINAL_AGAIN, "two-pass RMSNorm"}
    assert result.ratios["two-pass RMSNorm"].median == 2.0 and result.floor.median == 1.0
    assert result.tokens_per_s["two-pass RMSNorm"] == 4.0 and result.tokens_per_s[ORIGINAL] == 8.0
    assert result.verdict("two-pass RMSNorm").text == "2.00x slower"
    assert result.verdict(ORIGINAL_AGAIN).text == "within noise"
    assert all(sorted(order) == sorted(result.tokens_per_s) for order in result.orders)
    assert len({tuple(o) for o in result.orders}) > 1, "every round in the same order: not shuffled"
    assert all(b == a[::-1] for a, b in zip(result.orders[::2], result.orders[1::2]))  # counterbalanced pairs
    again = compare.compare_configs(tiny, {"two-pass RMSNorm": dict(rmsnorm="two_pass")}, prompt_len=4,
                                    new_tokens=8, rounds=6, seed=3)
    assert again.orders == result.orders  # a fixed seed: the same shuffles every run
    assert not any(isinstance(m, slower_kernels.TritonRMSNorm) for m in tiny.modules())  # the model is restored
    table = result.table()
    assert list(table["configuration"]) == list(result.tokens_per_s)
    aa = table.set_index("configuration").loc[ORIGINAL_AGAIN, "verdict"]
    assert aa.startswith("A/A floor: ") and aa.endswith("% off 1")  # the floor is not "1.05x slower" than itself


def test_compare_configs_warms_each_distinct_configuration_once(tiny, monkeypatch):
    """One untimed generation per distinct configuration before the rounds: the A/A copy is warm already."""
    runs = []

    def fake_generate(model, ids, new_tokens, use_cache=True):
        modes = {m.mode for m in model.modules() if isinstance(m, slower_kernels.TritonRMSNorm)}
        runs.append((modes.pop() if modes else "original", new_tokens))
        return None, 1.0

    monkeypatch.setattr(decoders, "generate", fake_generate)
    configs = {"two-pass": dict(rmsnorm="two_pass"), "two-pass again": dict(rmsnorm="two_pass"),
               "fused": dict(rmsnorm="fused")}
    compare.compare_configs(tiny, configs, prompt_len=4, new_tokens=8, rounds=2)
    assert runs[:3] == [("original", 8), ("two_pass", 8), ("fused", 8)]  # three warm-ups, no copy warmed
    assert len(runs) == 3 + 2 * 5 * 2  # then per round every configuration once, each with its 1-token run


def test_compare_configs_on_the_real_generation_path(tiny):
    result = compare.compare_configs(tiny, {"fused RMSNorm": dict(rmsnorm="fused")}, prompt_len=4,
                                     new_tokens=3, rounds=2)
    assert len(result.seconds["fused RMSNorm"]) == 2 and all(s > 0 for s in result.seconds[ORIGINAL])


def test_compare_configs_times_a_graph_decoder_and_profiles_it(tiny):
    """decoder="graph": a static cache and one CUDA-graph replay per token (the step runs eagerly on a CPU)."""
    result = compare.compare_configs(tiny, {"graph": dict(decoder="graph")}, prompt_len=4, new_tokens=3, rounds=2)
    compare.profile_configs(result, tiny, names=["graph"])
    assert len(result.seconds["graph"]) == 2 and result.profile("graph").launches_per_token is not None or \
        not env.HAS_GPU
    new, _ = decoders.decoder_for(tiny, make_prompt(4, vocab_size=tiny.config.vocab_size), 5, "graph")(5)
    expected, _ = decoders.generate(tiny, make_prompt(4, vocab_size=tiny.config.vocab_size), 5)
    assert torch.equal(new, expected.cpu())


def test_compare_configs_rejects_bad_input(tiny):
    with pytest.raises(ValueError, match="added by compare_configs itself"):
        compare.compare_configs(tiny, {ORIGINAL: {}}, rounds=1)
    with pytest.raises(TypeError, match=r"configs\['x'\] must be a dict"):
        compare.compare_configs(tiny, {"x": "two_pass"}, rounds=1)
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        compare.compare_configs(tiny, {}, rounds=0)


def test_compare_configs_prices_the_modules_of_each_eager_configuration(tiny):
    configs = {"fused RMSNorm": dict(rmsnorm="fused"), "graph": dict(decoder="graph")}
    prices = compare.capture_prices(tiny, configs, prompt_len=4, new_tokens=3)
    assert set(prices.calls) == {ORIGINAL, "fused RMSNorm"}  # the graph decoder launches no module call
    result = compare.compare_configs(tiny, configs, prompt_len=4, new_tokens=3, rounds=2, prices=prices)
    compare.profile_configs(result, tiny)
    assert set(result.module_calls) == {ORIGINAL, "fused RMSNorm"}
    p = result.profile("fused RMSNorm")
    assert list(p.modules) == ["TritonRMSNorm(fused)"] and len(result.module_us["fused RMSNorm"]["TritonRMSNorm(fused)"]) == 2
    assert p.modules["TritonRMSNorm(fused)"].alone_us > 0
    assert p.modules["TritonRMSNorm(fused)"].twin == "Qwen3RMSNorm"
    original = result.profile(ORIGINAL)  # the original's norms, priced in the original's rounds
    assert list(original.modules) == ["Qwen3RMSNorm"] and len(result.module_us[ORIGINAL]["Qwen3RMSNorm"]) == 2
    assert original.modules["Qwen3RMSNorm"].per_token == p.modules["TritonRMSNorm(fused)"].per_token
    # the budget reads these profiles' priced modules. The tiny model's own wall times are the host's noise on a GPU
    # (where its fused norm may cost the host less than the original's): set them 2x its swap apart, no GPU time
    added = budget.ModuleBudget(1.0, dict(original.modules), 1.0, ()).swapped_ms(p)
    assert added != 0
    base = dataclasses.replace(original, wall_ms_per_token=20 * abs(added), gpu_busy_ms_per_token=None)
    fused = dataclasses.replace(p, wall_ms_per_token=base.wall_ms_per_token + 2 * added, gpu_busy_ms_per_token=None)
    fitted = budget.fit_module_budget({ORIGINAL: base, "fused RMSNorm": fused}, (ORIGINAL, "fused RMSNorm"))
    assert fitted.in_situ == pytest.approx(2.0) and fitted.predict_ms(fused) == pytest.approx(fused.wall_ms_per_token)
    timing_order.PROFILED_BY.clear()  # the comparison above was profiled after its rounds; this one times again
    unpriced = compare.compare_configs(tiny, {"fused RMSNorm": dict(rmsnorm="fused")}, prompt_len=4, new_tokens=3,
                                       rounds=1)
    assert unpriced.module_calls == {}  # nothing priced, the original's modules neither
    with pytest.raises(ValueError, match=r"names: \['graph'\] are not configurations here that generate\(\) eagerly"):
        compare.capture_prices(tiny, {"graph": dict(decoder="graph")}, names=["graph"])
    with pytest.raises(ValueError, match=r"names: \['no cache'\] .* with the KV cache"):  # priced as decode steps
        compare.capture_prices(tiny, {"no cache": dict(rmsnorm="fused", use_cache=False)}, names=["no cache"])


def test_compare_configs_refuses_prices_of_other_sizes_or_configurations(tiny, monkeypatch):
    """Prices are timed in the rounds as they were captured: a Prices of other sizes, or of a configuration this
    comparison does not run, is refused before anything generates."""
    fused = {"fused RMSNorm": dict(rmsnorm="fused")}
    prices = compare.capture_prices(tiny, fused, prompt_len=4, new_tokens=3)
    assert set(prices.calls) == {ORIGINAL, "fused RMSNorm"} and (prices.prompt_len, prices.new_tokens) == (4, 3)
    monkeypatch.setattr(decoders, "generate", lambda *a, **k: pytest.fail("generated before refusing the prices"))
    with pytest.raises(ValueError, match=r"prices: captured for prompt_len=4, new_tokens=3; this comparison runs "
                                         r"4 and 5: capture them with the same sizes"):
        compare.compare_configs(tiny, fused, prompt_len=4, new_tokens=5, rounds=1, prices=prices)
    with pytest.raises(ValueError, match=r"prices: captured for prompt_len=4, new_tokens=3; this comparison runs "
                                         r"6 and 3"):
        compare.compare_configs(tiny, fused, prompt_len=6, new_tokens=3, rounds=1, prices=prices)
    with pytest.raises(ValueError, match=r"prices: \['fused RMSNorm'\] are not configurations here"):
        compare.compare_configs(tiny, {"two-pass": dict(rmsnorm="two_pass")}, prompt_len=4, new_tokens=3, rounds=1,
                                prices=prices)
    with pytest.raises(ValueError, match="capture_prices: counting calls per decoded token needs new_tokens >= 2"):
        compare.capture_prices(tiny, fused, prompt_len=4, new_tokens=1)
    # the same sizes and configurations: accepted, every priced call timed alone in every round
    monkeypatch.setattr(decoders, "generate", lambda model, ids, n, use_cache=True: (None, float(n)))
    result = compare.compare_configs(tiny, fused, prompt_len=4, new_tokens=3, rounds=2, prices=prices)
    assert result.module_calls == prices.calls
    assert {name: {kind: len(us) for kind, us in kinds.items()} for name, kinds in result.module_us.items()} == {
        ORIGINAL: {"Qwen3RMSNorm": 2}, "fused RMSNorm": {"TritonRMSNorm(fused)": 2}}


def test_wall_time_per_token_comes_from_the_same_rounds(tiny, monkeypatch):
    """A fake clock: 0.1 s of prefill plus 1 s (original) or 2 s (two-pass) per further token."""
    def fake_generate(model, ids, new_tokens, use_cache=True):
        slow = any(isinstance(m, slower_kernels.TritonRMSNorm) for m in model.modules())
        return None, 0.1 + (new_tokens - 1) * (2.0 if slow else 1.0)

    monkeypatch.setattr(decoders, "generate", fake_generate)
    if env.HAS_GPU:  # the fake generations launch no kernel, which a GPU profile refuses to count per token
        monkeypatch.setattr(compare, "count_decode", lambda *args, **kwargs: (100.0, 1.0, 0.0))
    result = compare.compare_configs(tiny, {"two-pass": dict(rmsnorm="two_pass")}, prompt_len=4, new_tokens=5,
                                     rounds=3)
    compare.profile_configs(result, tiny)
    assert result.decode_ms("two-pass").median == pytest.approx(2000.0)
    assert result.prefill_ms(ORIGINAL) == pytest.approx(100.0)
    assert result.decode_ratio("two-pass").median == pytest.approx(2.0)
    prof = result.profile("two-pass")
    assert prof.wall_ms_per_token == pytest.approx(2000.0) and set(result.counts) == {ORIGINAL, "two-pass"}
    assert "wall ms per decoded token" in result.table(per_token=True).columns
    with pytest.raises(KeyError, match="was not profiled"):
        result.profile(ORIGINAL_AGAIN)
    with pytest.raises(ValueError, match="not configurations of this comparison"):
        compare.profile_configs(result, tiny, names=["nope"])
    timing_order.PROFILED_BY.clear()  # the comparison above was profiled after its rounds; this one times again
    single = compare.compare_configs(tiny, {}, prompt_len=4, new_tokens=1, rounds=1)
    with pytest.raises(ValueError, match="needs new_tokens > 1"):
        single.decode_ms(ORIGINAL)


def test_profile_configs_refuses_names_it_did_not_compare(tiny, monkeypatch):
    monkeypatch.setattr(decoders, "generate", lambda model, ids, n, use_cache=True: (None, float(n)))
    if env.HAS_GPU:  # the fake generations launch no kernel, which a GPU profile refuses to count per token
        monkeypatch.setattr(compare, "count_decode", lambda *args, **kwargs: (100.0, 1.0, 0.0))
    result = compare.compare_configs(tiny, {"fused": dict(rmsnorm="fused")}, prompt_len=4, new_tokens=3, rounds=1)
    every = [ORIGINAL, ORIGINAL_AGAIN, "fused"]
    with pytest.raises(ValueError, match=re.escape(f"names: ['nope'] are not configurations of this comparison; "
                                                   f"choose from {every}")):
        compare.profile_configs(result, tiny, names=["fused", "nope"])
    assert result.counts == {} and timing_order.PROFILED_BY == []  # refused before profiling anything
    with pytest.raises(KeyError, match="'fused' was not profiled"):
        result.profile("fused")
    single = compare.compare_configs(tiny, {}, prompt_len=4, new_tokens=1, rounds=1)
    with pytest.raises(ValueError, match="profile_configs: counting per decoded token needs a comparison with "
                                         "new_tokens >= 2"):
        compare.profile_configs(single, tiny)
    profiles = compare.profile_configs(result, tiny, names=["fused"])  # a name it compared: profiled, alone
    assert set(profiles) == set(result.counts) == {"fused"} and profiles["fused"] == result.profile("fused")


def test_profiling_warms_a_decoder_built_afresh(tiny, monkeypatch):
    """generate() is warm from the rounds; a graph decoder is built anew for the profile and captures on its first
    run, whose capture kernels must not be counted as a decoded token's (they were, once: 716 kernels, not 499); its
    cache is as long as the rounds' (a graph decoder's attention splits its keys by the cache's length)."""
    seen, lengths = {}, set()
    count = compare.count_decode

    def spy(model, ids, n, use_cache=True, decoder="generate", warm=True, max_new_tokens=None):
        seen[decoder] = warm
        lengths.add(max_new_tokens)
        return count(model, ids, n, use_cache, decoder, warm, max_new_tokens)

    monkeypatch.setattr(compare, "count_decode", spy)
    result = compare.compare_configs(tiny, {"graph": dict(decoder="graph")}, prompt_len=4, new_tokens=3, rounds=1)
    compare.profile_configs(result, tiny)
    assert seen == {"generate": False, "graph": True} and lengths == {3}


# --- Between any two configurations, round by round ----------------------------------------------
def made_up_comparison(first: bool = True) -> compare.Comparison:
    """Three rounds of made-up seconds: whole generations of 3 tokens and, with ``first``, their 1-token ones."""
    seconds = {ORIGINAL: [1.0, 2.0, 1.5], ORIGINAL_AGAIN: [1.0, 2.0, 1.5], "a": [3.0, 4.0, 3.0], "b": [1.5, 1.0, 1.5]}
    first_seconds = {ORIGINAL: [0.2, 0.4, 0.3], ORIGINAL_AGAIN: [0.2, 0.4, 0.3], "a": [0.5, 1.0, 0.6],
                     "b": [0.5, 0.2, 0.3]} if first else {}
    ratios = compare._ratios_to(seconds, ORIGINAL)
    tps = {name: 3 / sorted(ts)[1] for name, ts in seconds.items()}
    return compare.Comparison(tps, seconds, ratios, [list(seconds)] * 3, 4, 3 if first else 1, first_seconds)


def test_a_comparison_reads_any_two_configurations_round_by_round():
    c = made_up_comparison()
    assert c.between("a", "b").values == pytest.approx([2.0, 4.0, 2.0])  # whole generations, by default
    assert c.between("a", "b", of="generation").values == pytest.approx([2.0, 4.0, 2.0])
    # a decode step: (3-token time - 1-token time) / 2, of a over b's: 1250/500, 1500/400, 1200/600
    assert c.between("a", "b", of="decode").values == pytest.approx([2.5, 3.75, 2.0])
    assert c.between("a", "b", of="prefill").values == pytest.approx([1.0, 5.0, 2.0])  # the 1-token generations
    assert c.between("b", "a", of="prefill").values == pytest.approx([1.0, 0.2, 0.5])  # the other way round
    # against the original: what ratios and decode_ratio hold
    assert c.between("a", ORIGINAL).values == pytest.approx(c.ratios["a"].values)
    assert c.between("a", ORIGINAL, of="decode").values == pytest.approx(c.decode_ratio("a").values)
    assert c.between("a", "b", of="decode").median == pytest.approx(2.5)
    with pytest.raises(ValueError, match=re.escape("of must be one of ['decode', 'generation', 'prefill'], "
                                                   "got 'wall'")):
        c.between("a", "b", of="wall")
    one_token = made_up_comparison(first=False)  # new_tokens=1: every generation is all prefill
    assert one_token.between("a", "b").values == pytest.approx([2.0, 4.0, 2.0])
    with pytest.raises(ValueError, match=re.escape("between(of='prefill'): this comparison generated one token")):
        one_token.between("a", "b", of="prefill")
    with pytest.raises(ValueError, match="decode_ms: needs new_tokens > 1"):
        one_token.between("a", "b", of="decode")


def test_compare_configs_sets_any_two_configurations_side_by_side(tiny, monkeypatch):
    """A fake clock: prefill 0.3 s (two-pass), 0.2 s (fused), 0.1 s (original), then 3, 1.5 and 1 s per token."""
    clock = {"two_pass": (0.3, 3.0), "fused": (0.2, 1.5), "original": (0.1, 1.0)}

    def fake_generate(model, ids, new_tokens, use_cache=True):
        prefill, per_token = clock[rmsnorm_mode(model)]
        return None, prefill + (new_tokens - 1) * per_token

    monkeypatch.setattr(decoders, "generate", fake_generate)
    result = compare.compare_configs(tiny, {"two-pass": dict(rmsnorm="two_pass"), "fused": dict(rmsnorm="fused")},
                                     prompt_len=4, new_tokens=5, rounds=4)
    assert result.between("two-pass", "fused").median == pytest.approx(12.3 / 6.2)
    assert result.between("two-pass", "fused", of="decode").median == pytest.approx(2.0)
    assert result.between("two-pass", "fused", of="prefill").median == pytest.approx(1.5)
    assert result.between("fused", ORIGINAL, of="decode").median == pytest.approx(1.5)
    assert result.between(ORIGINAL_AGAIN, ORIGINAL).values == pytest.approx([1.0] * 4)


def test_a_call_comparison_reads_any_two_calls_the_reference_included():
    ratios = {REFERENCE_AGAIN: Ratio.of([1.0, 1.0]), "a": Ratio.of([2.0, 4.0]), "b": Ratio.of([1.0, 2.0])}
    c = compare.CallComparison({}, ratios, "GPU time", 2)
    assert c.between("a", "b").values == pytest.approx([2.0, 2.0])
    assert c.between("b", "a").values == pytest.approx([0.5, 0.5])
    assert c.between("a", REFERENCE).values == pytest.approx([2.0, 4.0])  # what ratios holds
    assert c.between(REFERENCE, "a").values == pytest.approx([0.5, 0.25])
    assert c.between(REFERENCE, REFERENCE).values == [1.0, 1.0]
    named = compare.CallComparison({}, {"F.linear (again)": Ratio.of([1.0, 1.0]), "gemv": Ratio.of([0.5, 0.25])},
                                   "GPU time", 2, reference="F.linear")
    assert named.between("F.linear", "gemv").values == pytest.approx([2.0, 4.0])
    with pytest.raises(KeyError):  # the default name is no call of this comparison
        named.between(REFERENCE, "gemv")


def test_compare_calls_sets_any_two_calls_side_by_side(monkeypatch):
    clock = {"fast": 1.0, "mid": 1.5, "slow": 3.0}
    monkeypatch.setattr(clocks, "gpu_ms_per_call", lambda fn: clock[fn()])
    monkeypatch.setattr(clocks, "loop_ms", lambda fn, calls=None, repeats=5: clock[fn()])  # CPU mode's clock
    result = compare.compare_calls({"slow": lambda: "slow", "mid": lambda: "mid"}, lambda: "fast", rounds=4)
    assert result.between("slow", "mid").values == pytest.approx([2.0] * 4)
    assert result.between(REFERENCE, "slow").values == pytest.approx([1 / 3] * 4)
    assert result.between("mid", REFERENCE).median == pytest.approx(1.5)


# --- Kernel calls against a reference -----------------------------------------------------------
def test_compare_calls_has_its_own_a_a_floor(monkeypatch):
    clock = {"fast": 1.0, "slow": 3.0}
    monkeypatch.setattr(clocks, "gpu_ms_per_call", lambda fn: clock[fn()])
    # CPU mode's clock: ms_per_call's loop (clocks), and the host clock's (compare)
    monkeypatch.setattr(clocks, "loop_ms", lambda fn, calls=None, repeats=5: clock[fn()])
    monkeypatch.setattr(compare, "loop_ms", lambda fn, calls=None, repeats=5: clock[fn()])
    result = compare.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=4)
    assert result.ratios["ours"].median == 3.0 and result.floor.median == 1.0
    assert result.verdict("ours").text == "3.00x slower" and result.rounds == 4
    assert result.ms[REFERENCE] == 1.0
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        compare.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=0)
    with pytest.raises(TypeError, match=r"calls\['ours'\] must be a zero-argument callable"):
        compare.compare_calls({"ours": 3}, lambda: "fast", rounds=1)
    with pytest.raises(ValueError, match="at least one call"):
        compare.compare_calls({}, lambda: "fast", rounds=1)
    with pytest.raises(ValueError, match="clock must be one of"):
        compare.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=1, clock="wall")


def test_compare_calls_on_the_host_clock(monkeypatch):
    monkeypatch.setattr(env, "HAS_GPU", True)
    monkeypatch.setattr(clocks, "gpu_ms_per_call", lambda fn: {"fast": 1.0, "slow": 1.0}[fn()])  # the GPU: equal
    monkeypatch.setattr(compare, "loop_ms", lambda fn, calls=None, repeats=5: {"fast": 1.0, "slow": 2.0}[fn()])
    on_gpu = compare.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=2)
    on_host = compare.compare_calls({"ours": lambda: "slow"}, lambda: "fast", rounds=2, clock="host")
    assert on_gpu.ratios["ours"].median == 1.0 and on_gpu.clock == clocks.CLOCK_LABELS["gpu"]
    assert on_host.ratios["ours"].median == 2.0 and on_host.clock == clocks.CLOCK_LABELS["host"]


def test_a_comparison_records_its_ratio_with_quartiles_and_verdict(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(env, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(decoders, "generate", lambda model, ids, n, use_cache=True:
                        (None, n * (1.0 if use_cache else 3.0)))
    result = compare.compare_configs(tiny, {"no cache": dict(use_cache=False)}, prompt_len=4, new_tokens=4, rounds=3)
    v = result.record("no cache", "full.slowdown")
    row = results.results(tmp_path / "results.csv").set_index("id").loc["full.slowdown"]
    assert (row["value"], row["low"], row["high"], row["verdict"]) == (3.0, 3.0, 3.0, "3.00x slower") and v.real
    assert "A/A floor 1.000" in row["note"]


def test_a_noisy_floor_stands_out_of_the_minimum_effect():
    """Judged against itself a floor could never stand out; against the 5% minimum a noisy host shows."""
    noisy = Ratio.of([1.14, 1.16, 1.18, 1.2])
    result = compare.Comparison({}, {}, {ORIGINAL_AGAIN: noisy, "swap": Ratio.of([2.0] * 4)}, [], 4, 8)
    assert result.verdict(ORIGINAL_AGAIN).text == "1.17x slower"
    assert verdict(noisy, noisy).text == "within noise"  # judged against itself: always quiet
    assert result.verdict("swap").text == "2.00x slower"
    calls = compare.CallComparison({}, {REFERENCE_AGAIN: noisy}, "GPU time", 4)
    assert calls.verdict(REFERENCE_AGAIN).text == "1.17x slower"


def test_shuffled_rounds_give_every_name_the_same_mean_position():
    """ABBA: over each pair of rounds every configuration sits at the same mean position, so a steady drift of
    the host within a round biases no ratio, the A/A pair's included."""
    names = ["original", "original (again)", "a", "b", "c"]
    orders = [compare._shuffled(names, r, seed=0) for r in range(8)]
    assert len({tuple(o) for o in orders[::2]}) > 1  # the pairs differ from each other
    for name in names:
        assert sum(o.index(name) for o in orders) / len(orders) == (len(names) - 1) / 2
