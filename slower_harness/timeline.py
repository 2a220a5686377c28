"""One decode step on a time axis, read from torch.profiler's trace: the host's launch calls and the GPU's kernels
as two lanes, what share of the span each is busy, and the figure that draws them (every kernel at least a pixel,
one layer zoomed)."""
from __future__ import annotations

from slower_harness import env  # noqa: F401  (first: it picks matplotlib's backend)

import matplotlib.pyplot as plt
import pandas as pd

from slower_harness.display import save_figure

HOST_LAUNCH_NAMES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cuGraphLaunch")  # and their Ex forms


TIMELINE_LANES = ("host launches", "GPU kernels")


# timeline_summary's two times: the trace's span (wall time under the profiler, which inflates it) and the GPU's
SPAN_US, BUSY_US = "traced span, trace µs (wall time under the profiler)", "GPU-busy µs (profiler kernel time)"


def timeline_from_trace(trace: dict):
    """The two lanes of a torch.profiler Chrome trace (``prof.export_chrome_trace``): every launch call on
    the host (CUDA runtime or driver: kernels, and graphs) and every kernel on the GPU, in µs from the first
    event. Returns a DataFrame: lane, name, start_us, dur_us, sorted by start."""
    rows = []
    for e in trace.get("traceEvents", []):
        if e.get("ph") != "X" or "ts" not in e:
            continue
        cat, name = e.get("cat", ""), e.get("name", "")
        if cat in ("cuda_runtime", "cuda_driver") and name.startswith(HOST_LAUNCH_NAMES):
            lane = TIMELINE_LANES[0]
        elif cat == "kernel":
            lane = TIMELINE_LANES[1]
        else:
            continue
        rows.append({"lane": lane, "name": name, "start_us": float(e["ts"]), "dur_us": float(e.get("dur", 0.0))})
    df = pd.DataFrame(rows, columns=["lane", "name", "start_us", "dur_us"])
    if len(df):
        df["start_us"] -= df["start_us"].min()
    return df.sort_values("start_us", kind="stable").reset_index(drop=True)


def timeline_summary(df) -> dict:
    """What a step's timeline adds up to: host launches, GPU kernels, the step's traced span (``SPAN_US``: first
    event to the last one's end, on the profiler's clock, which slows the host), the GPU-busy µs (``BUSY_US``:
    the union of the kernels' intervals) and the GPU's idle fraction."""
    kernels_ = df[df["lane"] == TIMELINE_LANES[1]].sort_values("start_us")
    span = float((df["start_us"] + df["dur_us"]).max()) if len(df) else 0.0
    busy, end = 0.0, float("-inf")
    for start, dur in zip(kernels_["start_us"], kernels_["dur_us"]):
        stop = start + dur
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return {"host launches": int((df["lane"] == TIMELINE_LANES[0]).sum()), "GPU kernels": len(kernels_),
            SPAN_US: span, BUSY_US: busy, "GPU idle fraction": 1 - busy / span if span else float("nan")}


def plot_timelines(timelines: dict, name: str | None = None, zoom: float = 1 / 28):
    """One row per configuration ({label: ``step_timeline`` DataFrame}): the host's launches above, the GPU's
    kernels below, so the gaps where the GPU waits for the host are visible. Left, the whole step: every
    event is drawn at least one pixel wide, so 1,600 kernels of a few µs each show as 1,600 marks, not a few
    dozen. Right, a zoom on ``zoom`` of the step's GPU kernels (1/28: one of Qwen3-0.6B's 28 decoder layers),
    taken from the middle of the step, where each kernel and each gap can be told apart."""
    if not 0 < zoom <= 1:
        raise ValueError(f"zoom must be a fraction of the step in (0, 1], got {zoom!r}")
    fig, axes = plt.subplots(len(timelines), 2, figsize=(13, 1.9 * len(timelines) + 0.9), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    colors = {TIMELINE_LANES[0]: "tab:orange", TIMELINE_LANES[1]: "tab:blue"}
    for (ax, zax), (label, df) in zip(axes, timelines.items()):
        s = timeline_summary(df)
        kernels_ = df[df["lane"] == TIMELINE_LANES[1]]
        first = len(kernels_) // 2 - int(len(kernels_) * zoom) // 2
        window = kernels_.iloc[first:first + max(1, int(len(kernels_) * zoom))]
        lo = float(window["start_us"].min()) if len(window) else 0.0
        hi = float((window["start_us"] + window["dur_us"]).max()) if len(window) else 1.0
        for axis, (x0, x1) in ((ax, (0.0, max(s[SPAN_US], 1e-9))), (zax, (lo, max(hi, lo + 1e-9)))):
            px = (x1 - x0) / (axis.get_window_extent().width or 1)  # µs per pixel: the narrowest visible bar
            for row, lane in enumerate(TIMELINE_LANES):
                part = df[(df["lane"] == lane) & (df["start_us"] < x1) & (df["start_us"] + df["dur_us"] > x0)]
                axis.broken_barh(list(zip(part["start_us"], part["dur_us"].clip(lower=px))), (1 - row - 0.4, 0.8),
                                 color=colors[lane], linewidth=0)
            axis.set_xlim(x0, x1)
            axis.set_ylim(-0.6, 1.6)
            axis.grid(axis="x", alpha=0.3)
        n, k = s["host launches"], s["GPU kernels"]
        ax.set_yticks([1, 0], [f"{n} host launch{'es' if n != 1 else ''}", f"{k} GPU kernel{'s' if k != 1 else ''}"])
        zax.set_yticks([1, 0], ["host", "GPU"])
        ax.set_title(f"{label}: one decode step traced\n{s[SPAN_US] / 1e3:.2f} trace ms span; GPU busy "
                     f"{s[BUSY_US] / 1e3:.2f} ms of profiler kernel time "
                     f"({100 * (1 - s['GPU idle fraction']):.0f}% of the step)", fontsize=10, loc="left")
        zax.set_title(f"zoom: {len(window)} kernels ({zoom:.3g} of the step)\n{hi - lo:,.0f} µs", fontsize=10, loc="left")
    axes[-1, 0].set_xlabel("µs from the step's first event (torch.profiler; host and GPU clocks aligned by it)")
    axes[-1, 1].set_xlabel("µs, the same clock")
    fig.tight_layout()
    if name:
        save_figure(fig, name)
    return fig
