"""slower_harness.modes: the modes and how one is chosen, the sizes per mode, CPU pinning."""
import os
import subprocess
import sys

import pytest

from slower_harness import env, modes


def test_full_sizes_are_the_chapters_sizes():
    full = modes.SIZES_BY_MODE["full"]
    assert (full.prompt_len, full.new_tokens, full.new_tokens_full_stack, full.new_tokens_context) == (32, 8, 384, 8)
    assert full.context_prompts == (128, 256, 512, 1024)  # the blog's sweep (it generated 32 tokens: chapter 7 says why 8)
    assert (full.rounds, full.rounds_sweep) == (24, 16)  # at least the 8 rounds that held the A/A within 6%
    for sizes in modes.SIZES_BY_MODE.values():  # effects near the noise get at least the usual rounds; even counts
        assert sizes.rounds_small >= sizes.rounds and sizes.rounds_small % 2 == 0 and sizes.rounds_sweep % 2 == 0
    assert full.rounds_small == 2 * full.rounds
    assert full.rounds_kernel >= 5 and full.profile_tokens <= full.new_tokens
    assert full.add_n == 2**20 and full.add_sweep[0] == 2**12 and full.add_sweep[-1] == 2**26
    assert full.rmsnorm_sweep_rows[:7] == (1, 4, 16, 64, 256, 1024, 4096)
    assert 2 * 2 * full.rmsnorm_sweep_rows[-1] * full.rmsnorm_hidden > 63e6  # fp16 in + out  # the sweep ends past an H200's L2
    assert full.kv_lengths[-1] == 512 and all(s.rounds_kv % 2 == 0 for s in modes.SIZES_BY_MODE.values())
    assert full.matmul_shape == (128, 1024, 3072) and full.matmul_decode_shape[0] == 1


@pytest.mark.parametrize("requested", ["quick", "full", "QUICK "])
def test_a_gpu_mode_without_a_gpu_is_an_error(requested):
    with pytest.raises(RuntimeError, match="SLOWER_MODE=.*asks for a GPU"):
        modes.resolve_mode(requested, gpu_available=False)


@pytest.mark.parametrize("requested, gpu, mode", [(None, False, "cpu"), ("", True, "full"), ("cpu", True, "cpu"),
                                                  ("cpu", False, "cpu"), ("quick", True, "quick"),
                                                  ("full", True, "full")])
def test_mode_is_what_was_asked_for_or_what_the_machine_has(requested, gpu, mode):
    assert modes.resolve_mode(requested, gpu) == mode


def test_an_unknown_mode_names_the_choices():
    with pytest.raises(ValueError, match="SLOWER_MODE must be one of full, quick, cpu"):
        modes.resolve_mode("fast", gpu_available=True)


@pytest.mark.parametrize("spec, cpus", [("3", {3}), ("2-4", {2, 3, 4}), ("0,2", {0, 2}), (" 1 , 5-6", {1, 5, 6})])
def test_parse_cpus(spec, cpus):
    assert modes.parse_cpus(spec) == cpus


@pytest.mark.parametrize("spec", ["", "a", "3-", ","])
def test_parse_cpus_rejects_what_taskset_would(spec):
    with pytest.raises(ValueError, match="SLOWER_PIN_CPUS must list CPU cores"):
        modes.parse_cpus(spec)


def test_pinning_switch_pins_the_process_and_shows_in_the_environment_line():
    core = min(os.sched_getaffinity(0))
    code = ("import helpers, os, torch; print(torch.get_num_threads()); "  # what a chapter imports
            "print(sorted(os.sched_getaffinity(0)), helpers.env_info()['pinned'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=env.ROOT, capture_output=True, text=True,
                          env=dict(os.environ, SLOWER_PIN_CPUS=str(core)), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-3:-1] == ["1", f"[{core}] cores {core}"]  # one core, one CPU thread
    assert modes.pin_cpus(None) is None and modes.pin_cpus("") is None
    with pytest.raises(ValueError, match="names cores this process cannot use"):
        modes.pin_cpus("100000")
