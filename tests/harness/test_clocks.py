"""slower_harness.clocks: the two clocks (GPU time, host time), the kernels a call launches, a launch's price."""
import pytest
import torch

import slower_kernels
from slower_harness import clocks, env, timing_order


def test_the_two_clocks_and_the_launch_count_of_one_call():
    x = torch.randn(1000, device=env.DEVICE, dtype=env.DTYPE)
    call = lambda: slower_kernels.add(x, x)  # noqa: E731
    assert clocks.launches_per_call(call) == 1
    assert clocks.host_ms_per_call(call, calls=2) > 0
    gpu_ms = clocks.gpu_ms_per_call(call)
    assert gpu_ms > 0 if env.HAS_GPU else gpu_ms is None  # CPU mode: no GPU clock


def test_launch_prices_time_an_empty_kernel_and_a_one_element_op():
    prices = clocks.launch_prices(calls=3)
    assert prices.triton_us > 0 and prices.torch_us > 0 and prices.calls == 3
    with slower_kernels.count_launches() as counted:
        slower_kernels.empty(torch.zeros(1, device=env.DEVICE, dtype=env.DTYPE))
    assert counted == {"empty_kernel": 1}


@pytest.mark.skipif(not env.HAS_GPU, reason="CUDA graphs and torch.profiler need a GPU")
def test_launches_per_call_counts_what_the_profiler_sees():
    """The CUDA graph's kernel nodes of one call, against the kernels torch.profiler sees that call run: the same
    count for our kernels, PyTorch's ops, a cuBLAS matmul and the per-head attention loop, and no profile made."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    x = torch.randn(3, 1024, device=env.DEVICE, dtype=env.DTYPE)
    w = torch.randn(3072, 1024, device=env.DEVICE, dtype=env.DTYPE)
    norm = Qwen3RMSNorm(1024).to(env.DEVICE, env.DTYPE)
    q, k, v = (torch.randn(1, 8, n, 128, device=env.DEVICE, dtype=env.DTYPE) for n in (1, 37, 37))
    calls = {"Triton add": lambda: slower_kernels.add(x, x), "torch.add": lambda: torch.add(x, x),
             "Qwen3RMSNorm": lambda: norm(x), "two-pass RMSNorm": lambda: slower_kernels.rmsnorm_two_pass(x, norm.weight),
             "cuBLAS matmul": lambda: x @ w.T, "tiled matmul": lambda: slower_kernels.matmul(x, w.T),
             "per-head attention": lambda: slower_kernels.attention_slow(q, k, v, scale=0.1, causal=True)}
    for name, fn in calls.items():
        counted = clocks.launches_per_call(fn)
        assert timing_order.PROFILED_BY == [], name  # the profiler notes every session it runs (kernel_stats)
        assert counted == clocks.kernel_stats(fn)[0] > 0, name
        assert timing_order.PROFILED_BY == ["torch.profiler"], name
        timing_order.PROFILED_BY.clear()


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
    assert clocks._device_kernels(fast) == clocks._device_kernels(slow) == [("gemv", 3.0), ("add", 1.5)]
    older = NS(profiler=NS(kineto_results=NS(events=lambda: [NS(name=lambda: "gemv")])), events=lambda: objects)
    assert clocks._device_kernels(older) == [("gemv", 3.0), ("add", 1.5)]  # raw events without duration_ns
