"""slower_harness.timing_order: time first, profile after; every profile noted, host-clock timings refused after."""
import re

import pytest
import torch

import slower_kernels
from slower_harness import capture, clocks, compare, env, timing_order


def test_host_clock_timings_refuse_to_run_after_a_profile(tiny, device):
    """Once a process has profiled, CUPTI stays attached and slows every launch: each host-clock timing then
    fails with the order to fix, in every mode (the CPU run of the notebooks checks the order a GPU run needs),
    while the GPU clock (CUDA-graph replay, untouched by the host) still runs."""
    x = torch.ones(7, device=device)
    clocks.host_ms_per_call(lambda: x + x, calls=2, repeats=1)  # before any profile: runs
    comparison = compare.compare_configs(tiny, {}, new_tokens=2, rounds=1)
    assert timing_order.PROFILED_BY == []  # the rounds time; they do not profile
    compare.profile_configs(comparison, tiny)
    assert comparison.profile(compare.ORIGINAL)
    assert timing_order.PROFILED_BY == ["a decode profile (profile_configs, count_decode)"]
    clocks.launches_per_call(lambda: slower_kernels.add(x, x))  # counts from a CUDA graph's nodes: no profile
    assert len(timing_order.PROFILED_BY) == 1
    timings = [("host_ms_per_call", lambda: clocks.host_ms_per_call(lambda: x + x, calls=2, repeats=1)),
               ("launch_prices", lambda: clocks.launch_prices(calls=2)),
               ("host_us_alone", lambda: clocks.host_us_alone(lambda: x + x)),
               ("compare_calls(clock='host')", lambda: compare.compare_calls({"twice": lambda: x + x}, lambda: x * 2,
                                                                             rounds=1, clock="host")),
               ("compare_configs", lambda: compare.compare_configs(tiny, {}, new_tokens=2, rounds=1))]
    for what, timing in timings:
        with pytest.raises(RuntimeError, match=re.escape(what) + r" times the host's clock, but this process has "
                           r"already run torch\.profiler \(a decode profile.*\)\. .*Time first"):
            timing()
    cmp = compare.compare_calls({"twice": lambda: x + x}, lambda: x * 2, rounds=1)  # the GPU clock still runs
    assert cmp.rounds == 1
    known = compare.compare_calls({"twice": lambda: x + x}, lambda: x * 2, rounds=1, clock="host", after_profile=True)
    assert known.clock.endswith(", after a profile (CUPTI attached)") == env.HAS_GPU  # an exercise that knows


@pytest.mark.parametrize("profile, what", [
    (lambda: clocks.graph_kernel_gap_us(5), "graph_kernel_gap_us"),  # it returns at once in CPU mode, and notes
    (lambda: capture.count_module_calls({}), "count_module_calls"),
    (lambda: clocks.kernel_stats(lambda: None) if env.HAS_GPU else timing_order.profiled("torch.profiler"),
     "torch.profiler"),
])
def test_every_profile_is_noted_and_stops_the_host_clock(profile, what):
    profile()
    assert timing_order.PROFILED_BY == [what]
    with pytest.raises(RuntimeError, match=f"already run torch.profiler \\({what}\\)"):
        clocks.host_ms_per_call(lambda: None, calls=1, repeats=1)
