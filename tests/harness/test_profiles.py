"""slower_harness.profiles: what a decoded token launches and keeps the GPU busy for, one step on a time axis, and
the weight-read floor."""
import pytest
import torch

from slower_harness import clocks, compare, decoders, env, patching, profiles
from slower_harness.model import make_prompt, module_census


def test_patched_generation_runs_and_counts_launches(tiny):
    with patching.patched(tiny, **patching.ALL_CUSTOM) as counts:
        pass
    result = compare.compare_configs(tiny, {"swapped": patching.ALL_CUSTOM}, prompt_len=6, new_tokens=3, rounds=1)
    profiled = compare.profile_configs(result, tiny, names=["swapped"])
    prof = result.profile("swapped")
    assert profiled == {"swapped": prof} and set(result.counts) == {"swapped"}  # only the names asked for
    assert prof.wall_ms_per_token > 0 and prof.tokens_profiled == 3 == result.profiled_tokens
    cfg = tiny.config
    per_token = (2 * counts["rmsnorm"] + counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]
                 + 3 * cfg.num_attention_heads * counts["attention"])
    assert prof.project_launches_per_token == per_token
    if not env.HAS_GPU:
        assert prof.launches_per_token is None and prof.gpu_busy_ms_per_token is None and "CPU" in prof.note
    else:
        assert prof.launches_per_token >= per_token and 0 <= prof.gpu_idle_fraction <= 1


def test_bandwidth_floor(tiny):
    bw = profiles.bandwidth(tiny, tokens_per_s=10.0)
    assert bw["model_bytes"] == module_census(tiny)["bytes"]
    assert bw["achieved_gb_s"] == pytest.approx(bw["model_bytes"] * 10 / 1e9)
    if not env.HAS_GPU:
        assert bw["floor_fraction"] is None and bw["note"]


def test_count_decode_refuses_a_profile_that_lost_its_events(tiny, monkeypatch):
    """A 1-token profile that sees as many kernels as the n-token one (a profile that lost its GPU events, as a
    CUPTI teardown racing the next profile can make it) fails loudly instead of giving a per-token count."""
    seen = iter([[("k", 10.0)] * 100, [("k", 10.0)] * 100])  # 100 kernels, 1 GPU ms, for n tokens and for 1
    monkeypatch.setattr(env, "HAS_GPU", True)
    # no CUDA here: the generations run on the CPU (generate() synchronises through decoders' own sync)
    monkeypatch.setattr(profiles, "sync", lambda: None)
    monkeypatch.setattr(decoders, "sync", lambda: None)
    monkeypatch.setattr(profiles, "kernel_events", lambda fn: (fn(), next(seen))[1])
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    with pytest.raises(RuntimeError, match="a profile lost GPU events"):
        profiles.count_decode(tiny, ids, 3, warm=False)


@pytest.mark.skipif(not env.HAS_GPU, reason="CUPTI and CUDA graphs need a GPU")
def test_profiles_back_to_back_count_the_same(tiny):
    """Profiles back to back see every kernel, also with CUDA graphs captured and replayed between them (a
    graph decoder's, and the graphs launches_per_call reads its counts from): the counts repeat."""
    x = torch.randn(4096, device=env.DEVICE, dtype=env.DTYPE)
    ops = [clocks.kernel_stats(lambda: torch.add(x, x))[0] for _ in range(4)]
    ids = make_prompt(5, vocab_size=tiny.config.vocab_size)
    graph = [profiles.count_decode(tiny, ids, 4, decoder="graph")[0] for _ in range(2)]
    ops += [clocks.launches_per_call(lambda: torch.add(x, x)), clocks.kernel_stats(lambda: torch.add(x, x))[0]]
    assert ops == [1] * 6
    assert graph[0] == graph[1] > 0


def test_step_timeline_says_it_needs_a_gpu(tiny):
    if env.HAS_GPU:
        pytest.skip("CPU mode only")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        profiles.step_timeline(tiny, make_prompt(4, vocab_size=tiny.config.vocab_size))
