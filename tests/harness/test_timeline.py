"""slower_harness.timeline: one decode step on a time axis from the profiler's trace, its summary and its figure."""
import pytest

from slower_harness import timeline


def _trace(*events):
    return {"traceEvents": [dict(ph="X", cat=c, name=n, ts=t, dur=d) for c, n, t, d in events]}


def test_a_timeline_keeps_launches_and_kernels_only():
    trace = _trace(("cpu_op", "aten::mm", 100, 50), ("cuda_runtime", "cudaLaunchKernel", 110, 5),
                   ("kernel", "gemm", 120, 10), ("cuda_driver", "cuLaunchKernelEx", 130, 4),
                   ("kernel", "triton_add", 140, 2), ("cuda_runtime", "cudaStreamSynchronize", 150, 30),
                   ("gpu_memcpy", "Memcpy DtoH", 160, 3), ("cuda_runtime", "cudaGraphLaunch", 170, 6))
    trace["traceEvents"].append({"ph": "i", "cat": "kernel", "name": "marker", "ts": 1})  # not a span
    df = timeline.timeline_from_trace(trace)
    assert list(df["name"]) == ["cudaLaunchKernel", "gemm", "cuLaunchKernelEx", "triton_add", "cudaGraphLaunch"]
    assert list(df["lane"]) == ["host launches", "GPU kernels", "host launches", "GPU kernels", "host launches"]
    assert df["start_us"].iloc[0] == 0 and df["start_us"].iloc[-1] == 60


def test_a_timeline_summary_counts_overlapping_kernels_once():
    df = timeline.timeline_from_trace(_trace(("cuda_runtime", "cudaLaunchKernel", 0, 5), ("kernel", "a", 10, 10),
                                             ("kernel", "b", 15, 10), ("kernel", "c", 40, 10)))
    s = timeline.timeline_summary(df)
    assert (s["host launches"], s["GPU kernels"], s[timeline.SPAN_US], s[timeline.BUSY_US]) == (1, 3, 50.0, 25.0)
    assert s["GPU idle fraction"] == pytest.approx(0.5)
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = timeline.plot_timelines({"eager": df, "graph": df})
    title = fig.axes[0].get_title(loc="left")  # both times with their clocks
    assert len(fig.axes) == 4  # the whole step and its zoom, per configuration
    assert "0.05 trace ms span; GPU busy 0.03 ms of profiler kernel time (50% of the step)" in title
    plt.close(fig)
    with pytest.raises(ValueError, match="zoom must be a fraction"):
        timeline.plot_timelines({"eager": df}, zoom=0)


def test_a_timeline_draws_every_kernel_at_least_a_pixel_wide():
    """1,000 kernels of 1 µs in a 30 ms step: each is drawn (no bar thinner than a pixel), and the zoom shows
    its share of them."""
    events = [("kernel", f"k{i}", 30 * i, 1) for i in range(1000)]
    df = timeline.timeline_from_trace(_trace(*events))
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = timeline.plot_timelines({"eager": df}, zoom=0.1)
    whole, zoom = fig.axes
    bars = [c for c in whole.collections if len(c.get_paths())]
    assert sum(len(c.get_paths()) for c in bars) == 1000
    widths = [p.get_extents().width for c in bars for p in c.get_paths()]
    px = (whole.get_xlim()[1] - whole.get_xlim()[0]) / whole.get_window_extent().width
    assert min(widths) >= px * 0.99
    assert "zoom: 100 kernels" in zoom.get_title(loc="left")
    plt.close(fig)
