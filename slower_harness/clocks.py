"""The two clocks, named: GPU time (CUDA-graph replay, or the profiler's kernel time) and host time (the host's wall
clock per call), the graph's gap between kernels, the kernels a call launches, and the price of one launch.
In CPU mode there is one clock: the interpreter's wall time (numpy doing the kernel's work)."""
from __future__ import annotations

from slower_harness import env  # first: it settles TRITON_INTERPRET before Triton loads

import ctypes
import gc
import statistics
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import triton.testing
from torch.profiler import ProfilerActivity, profile

import slower_kernels
from slower_harness import timing_order
from slower_harness.timing_order import host_clock_free, profiled


def sync() -> None:
    if env.HAS_GPU:
        torch.cuda.synchronize()


@contextmanager
def no_gc():
    """Python's garbage collector off inside a timed region (as ``timeit`` does): a generation-2 collection
    in the middle of one run adds tens of ms to it alone. Re-enabled after (a full collection before each
    region would cost more than it saves: ~0.1 s with a model loaded)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _device_kernels(prof) -> list[tuple[str, float]]:
    """(name, GPU µs) of each device-side kernel of a torch.profiler run (copies and memsets left out), read from
    the profiler's raw Kineto events where this PyTorch has them: ``prof.events()`` builds a Python object per
    event, with the CPU side's tree, which on an H200 took 2.96 s for the 26,194 kernels of an 8-token all-custom
    generation against 0.17 s from the raw events (the same kernels, the same count)."""
    skip = ("Memcpy", "Memset")
    raw = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    try:
        return [(e.name(), e.duration_ns() / 1e3) for e in raw.events()
                if e.device_type() == torch.autograd.DeviceType.CUDA and not e.name().startswith(skip)]
    except AttributeError:  # no raw events here (raw is None), or an older event API: the profiler's own list
        pass
    return [(e.name, e.time_range.elapsed_us()) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(skip)]


def kernel_events(fn) -> list[tuple[str, float]]:
    """(name, GPU µs) of every kernel the GPU ran while ``fn`` ran, from torch.profiler's CUDA activity."""
    if not timing_order.PROFILED_BY:  # the callers name themselves (``profiled``); a caller that did not is still noted
        profiled("torch.profiler")
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": expected here
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:  # device activity only: cheap bookkeeping
            fn()
            sync()
    return _device_kernels(prof)


def kernel_totals(events: list[tuple[str, float]]) -> tuple[int, float]:
    """(kernels, summed GPU ms) of ``kernel_events``' list."""
    return len(events), sum(us for _, us in events) / 1e3


def kernel_stats(fn) -> tuple[int, float]:
    """(kernels launched, summed GPU ms) while ``fn`` runs, from torch.profiler's CUDA activity."""
    return kernel_totals(kernel_events(fn))


# --- Two clocks ---------------------------------------------------------------------------------
# Every kernel timing names its clock:
# * GPU time: how long the GPU works on one call, from replaying the call in a CUDA graph
#   (``triton.testing.do_bench_cudagraph``): the host is out of the loop, so microsecond kernels are
#   timed, not the launches that start them.
# * host time: the host's wall clock per call when calls run back to back, synchronised before and after
#   the loop. For a microsecond kernel this is the price of launching it, not of running it.
# In CPU mode there is one clock: the interpreter's wall time (numpy doing the kernel's work).
CLOCK_LABELS = {"gpu": "GPU time (CUDA-graph replay)", "host": "host time per call (back to back, synchronised)",
                "interpreter": "interpreter wall time (CPU mode)"}


def host_ms_per_call(fn, calls: int | None = None, repeats: int = 5) -> float:
    """Median host wall time of one call, from ``repeats`` synchronised loops of ``calls`` calls (before any
    profile in this process: ``host_clock_free``)."""
    host_clock_free("host_ms_per_call")
    return loop_ms(fn, calls, repeats)


def loop_ms(fn, calls: int | None = None, repeats: int = 5) -> float:
    """``host_ms_per_call`` without the order check: the interpreter's clock in CPU mode (``ms_per_call``), and
    ``compare_calls``' host clock, which checks the order itself."""
    calls = calls or (200 if env.HAS_GPU else 2)
    fn()  # warm-up: compilation and caches
    sync()
    loops = []
    with no_gc():
        for _ in range(repeats if env.HAS_GPU else 3):
            sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            loops.append((time.perf_counter() - start) / calls)
    return statistics.median(loops) * 1e3


GPU_REP_MS = 10  # do_bench_cudagraph's graph: about this many ms of calls, replayed 10 times (Triton's default: 20)


def gpu_ms_per_call(fn) -> float | None:
    """GPU time of one call from CUDA-graph replay (median); None in CPU mode, where there is no GPU.
    Each graph holds about ``GPU_REP_MS`` ms of calls (thousands of a microsecond kernel), so one timing
    averages over that many calls ten times; half Triton's default window halves the time every timing
    takes (capture and replays), and the chapters time several hundred calls this way."""
    if not env.HAS_GPU:
        return None
    fn()  # compile outside the graph capture
    sync()
    return triton.testing.do_bench_cudagraph(fn, rep=GPU_REP_MS, return_mode="median")


def ms_per_call(fn) -> float:
    """The clock ``compare_calls`` uses: GPU time (``gpu_ms_per_call``) on a GPU, interpreter wall time
    (one synchronised loop) in CPU mode."""
    return gpu_ms_per_call(fn) if env.HAS_GPU else loop_ms(fn, repeats=1)


GRAPH_GAP_KERNELS = 200  # one-element adds in a row: the graph that graph_kernel_gap_us times


def graph_kernel_gap_us(kernels: int = GRAPH_GAP_KERNELS) -> float | None:
    """GPU µs per kernel that a CUDA-graph replay spends beyond the kernels' own run time: from one kernel's end
    to the next one's start, with no host launch in between. None in CPU mode, where there is no GPU.

    Replayed from a graph, a decode step's 500-1,850 kernels still start one after another on the GPU; their
    summed kernel time (the profiler's GPU-busy ms) leaves these gaps out. Measured on ``kernels`` one-element
    in-place adds in a row: their GPU time per call (``gpu_ms_per_call``, CUDA-graph replay) minus their summed
    kernel time (``torch.profiler``), over ``kernels``. A negative value says the profiler's kernel times already
    cover what the graph spends (no gap to add)."""
    if not isinstance(kernels, int) or kernels < 1:
        raise ValueError(f"kernels must be a positive int, got {kernels!r}")
    profiled("graph_kernel_gap_us")  # in CPU mode too, where it returns at once: the order is checked there
    if not env.HAS_GPU:
        return None
    x = torch.zeros(1, device=env.DEVICE, dtype=env.DTYPE)

    def adds():
        for _ in range(kernels):
            x.add_(1)

    with torch.no_grad():
        replay_ms = gpu_ms_per_call(adds)
        counted, busy_ms = kernel_stats(adds)
    if counted != kernels:
        raise RuntimeError(f"graph_kernel_gap_us: the profiler saw {counted} kernels for {kernels} adds")
    return 1e3 * (replay_ms - busy_ms) / kernels


CU_GRAPH_NODE_TYPE_KERNEL = 0  # the CUDA driver's CUgraphNodeType of a kernel (cuda.h)


def _graph_kernels(fn) -> int:
    """Kernels one call of ``fn`` launches, read from a CUDA graph of that call (its kernel nodes), without
    the profiler: a profile would leave CUPTI attached and slow every later launch (``host_clock_free``).
    The call is captured, never run; copies and memsets are left out, as ``_device_kernels`` leaves them out."""
    try:
        graph = torch.cuda.CUDAGraph(keep_graph=True)  # keeps the captured graph to read (PyTorch 2.8)
    except TypeError:
        raise RuntimeError("launches_per_call reads a CUDA graph's nodes, which needs PyTorch 2.8 or newer "
                           f"(torch.cuda.CUDAGraph(keep_graph=True)); this is {torch.__version__}") from None

    def check(status: int, call: str) -> None:
        if status != 0:
            raise RuntimeError(f"launches_per_call: the CUDA driver's {call} returned error {status}")

    try:
        with torch.cuda.graph(graph):
            fn()
        driver = ctypes.CDLL("libcuda.so.1")
        handle, n, kind = ctypes.c_void_p(graph.raw_cuda_graph()), ctypes.c_size_t(0), ctypes.c_int(0)
        check(driver.cuGraphGetNodes(handle, None, ctypes.byref(n)), "cuGraphGetNodes")
        nodes = (ctypes.c_void_p * n.value)()
        check(driver.cuGraphGetNodes(handle, nodes, ctypes.byref(n)), "cuGraphGetNodes")
        count = 0
        for node in nodes[:n.value]:
            check(driver.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType")
            count += kind.value == CU_GRAPH_NODE_TYPE_KERNEL
        return count
    finally:
        graph.reset()  # the captured graph and its memory pool go back


def launches_per_call(fn) -> float:
    """CUDA kernels one call launches on a GPU, read from a CUDA graph of the call (``_graph_kernels``: no
    profiler, so host timings may follow); our Triton kernels in CPU mode."""
    if env.HAS_GPU:
        fn()  # compiled and warm outside the capture, as gpu_ms_per_call's
        sync()
        return float(_graph_kernels(fn))
    with slower_kernels.count_launches() as counted:
        fn()
    return float(sum(counted.values()))


def host_us_alone(fn, calls: int | None = None, repeats: int = 3, reset=None) -> float:
    """Host µs to issue one call of ``fn`` on its own: the median of ``repeats`` loops of ``calls`` calls, each
    loop timed from a synchronised start to its last call returning, without waiting for the GPU to finish
    (the wait comes after the clock stops). What the host pays per call before the GPU does anything; in CPU
    mode the interpreter runs the kernels inside the call, so it is the interpreter's time. ``reset`` (if
    given) runs before each loop, untimed: it puts back what the calls change (a KV cache they append to).
    Before any profile in this process (``host_clock_free``)."""
    host_clock_free("host_us_alone")
    calls = calls or (20 if env.HAS_GPU else 1)
    reset = reset or (lambda: None)
    reset()
    fn()  # warm-up: compilation and caches
    sync()
    loops = []
    with no_gc():
        for _ in range(repeats):
            reset()
            sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            loops.append((time.perf_counter() - start) / calls)
            sync()
    return statistics.median(loops) * 1e6


@dataclass
class LaunchPrices:
    """Host time of one launch that does no work: what every kernel costs before it runs."""
    triton_us: float  # an empty Triton kernel (slower_kernels.empty): our launcher's Python and Triton's dispatch
    torch_us: float   # a one-element PyTorch op (x.add_(1)): PyTorch's dispatcher and the CUDA launch
    calls: int        # launches per synchronised loop

    @property
    def clock(self) -> str:
        return CLOCK_LABELS["host" if env.HAS_GPU else "interpreter"]


def launch_prices(calls: int | None = None) -> LaunchPrices:
    """The price of one launch on this host: an empty Triton kernel against a one-element PyTorch op."""
    host_clock_free("launch_prices")
    calls = calls or (3000 if env.HAS_GPU else 5)
    x = torch.zeros(1, device=env.DEVICE, dtype=env.DTYPE)
    triton_ms = host_ms_per_call(lambda: slower_kernels.empty(x), calls)
    torch_ms = host_ms_per_call(lambda: x.add_(1), calls)
    return LaunchPrices(triton_ms * 1e3, torch_ms * 1e3, calls)


def graph_us_per_launch(launches: list, replays: int = 7) -> float:
    """GPU µs per launch of ``launches`` (callables, one kernel each), captured in order in one CUDA graph: the
    median of ``replays`` replays (CUDA events) over the number of launches, the gaps between kernels included,
    as a decode step's graph pays them."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for f in launches:  # compiles, and warms the allocator's pool
            f()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for f in launches:
            f()
    graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / len(launches))
    return statistics.median(times)


def cold_copies(t: torch.Tensor, l2_fills: int = 4) -> list:
    """``t`` and copies of it, enough for all of them to fill the GPU's L2 cache ``l2_fills`` times (at least 2):
    a call that walks them in turn reads each from memory, as a decode step reads a weight the 1.2 GB since its
    last read have pushed out of the cache."""
    l2 = torch.cuda.get_device_properties(t.device).L2_cache_size
    n = max(2, -(-l2_fills * l2 // (t.numel() * t.element_size())))
    return [t] + [t.clone() for _ in range(n - 1)]


def cold_gpu_us(call, operands: list, launches: int = 32) -> float:
    """GPU µs per ``call(operand)``, cycling through ``operands`` (``cold_copies`` of a weight) in one CUDA graph of
    at least ``launches`` calls (``graph_us_per_launch``). ``do_bench_cudagraph`` replays one call on one operand,
    which the L2 cache then serves: a weight of a few MiB would read at the cache's speed, not memory's."""
    n = max(launches, len(operands))
    return graph_us_per_launch([lambda o=operands[i % len(operands)]: call(o) for i in range(n)])


def copy_gpu_us(nbytes: int, device, launches: int = 32) -> float:
    """GPU µs of a device-to-device copy that moves ``nbytes`` (reads half, writes half), over buffers that do not
    fit the L2 cache, as ``cold_gpu_us``: the copy bandwidth at that size is nbytes / this."""
    src = cold_copies(torch.empty(max(1, nbytes // 4), dtype=torch.float16, device=device))
    dst = [torch.empty_like(s) for s in src]
    n = max(launches, len(src))
    return graph_us_per_launch([lambda i=i: dst[i % len(src)].copy_(src[i % len(src)]) for i in range(n)])
