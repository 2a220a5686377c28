"""The machine: what a GPU is made of (its data sheet beside this one's own report), the memory hierarchy and the
roofline drawn from it, and what the compiler made of a kernel for a T4 and an H200 (registers, loads, PTX)."""
from __future__ import annotations

from slower_harness import env  # first: it picks matplotlib's backend

import json
import os
import re
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from slower_harness.display import save_figure
from slower_harness.specs import GPU_SPECS, NOMINAL_GB_S, NOMINAL_TFLOPS
from slower_harness.formats import bytes_label


def plot_roofline(points, slug: str | None = None, name: str | None = None):
    """Arithmetic intensity (flop per byte moved) against achieved TFLOP/s, under the roofs of GPU ``slug``
    (default: this one): bandwidth x intensity, and the two compute peaks of ``NOMINAL_TFLOPS``.
    ``points``: a DataFrame with columns label, group, flops, bytes, gpu_ms (GPU time per call). A kernel on
    the slanted roof is memory-bound at full bandwidth; one far below any roof is paying for something else
    (launch overhead inside its time, idle multiprocessors, a poor access pattern)."""
    slug = slug or env.SLUG
    if slug not in NOMINAL_GB_S or slug not in NOMINAL_TFLOPS:
        raise ValueError(f"slug: no nominal bandwidth and compute for {slug!r}; known: {sorted(NOMINAL_TFLOPS)}")
    missing = {"label", "group", "flops", "bytes", "gpu_ms"} - set(points.columns)
    if missing:
        raise ValueError(f"points: missing columns {sorted(missing)}")
    gb_s, (tensor, fma) = NOMINAL_GB_S[slug], NOMINAL_TFLOPS[slug]
    intensity = points["flops"] / points["bytes"]
    tflops = points["flops"] / (points["gpu_ms"] * 1e-3) / 1e12
    lo, hi = min(intensity.min(), 0.05) / 2, max(intensity.max(), 2 * tensor * 1e3 / gb_s) * 2
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(12, 5.5))
    for peak, what, style in ((tensor, "fp16 tensor cores", "-"), (fma, "fp32 FMA, no tensor cores", "--")):
        ax.plot(x, np.minimum(peak, x * gb_s / 1e3), color="black", ls=style, lw=1,
                label=f"roof: {gb_s:,} GB/s x intensity, {peak:g} TFLOP/s ({what})")
    # every point its own marker (its group's shape) and colour, named in the legend: points that share an
    # intensity (the tiles of one matmul) stay apart by colour instead of by labels stacked on each other
    colours = plt.get_cmap("tab10" if len(points) <= 10 else "tab20")
    for i, (group, label, xi, yi) in enumerate(zip(points["group"], points["label"], intensity, tflops)):
        marker = "os^Dv"[list(dict.fromkeys(points["group"])).index(group) % 5]
        ax.scatter([xi], [yi], marker=marker, s=55, color=colours(i % colours.N), edgecolor="black", linewidth=0.5,
                   label=f"{group}: {label}", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop per byte moved)")
    ax.set_ylabel("achieved TFLOP/s (GPU time)")
    gpu = GPU_SPECS.get(slug, {}).get("name") or (env._gpu_name() if slug == env.SLUG and env.HAS_GPU else slug)
    ax.set_title(f"Roofline of the {gpu}: nominal bandwidth and compute", loc="left")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    if name:
        save_figure(fig, name)
    return fig


def _nominal_rows(slug: str) -> dict:
    gb_s = NOMINAL_GB_S.get(slug)
    tensor, fma = NOMINAL_TFLOPS.get(slug, (None, None))
    return {"memory bandwidth (GB/s, nominal)": gb_s, "fp16 tensor-core TFLOP/s (nominal)": tensor,
            "fp32 FMA TFLOP/s (nominal)": fma,
            "ridge point (flop per byte)": round(tensor * 1e3 / gb_s) if gb_s and tensor else None}


def gpu_specs() -> dict:
    """This GPU's figures in ``GPU_SPECS``'s rows, from ``torch.cuda.get_device_properties`` (sizes) and the
    nominal tables (bandwidth, compute); {} in CPU mode."""
    if not env.HAS_GPU:
        return {}
    p = torch.cuda.get_device_properties(0)
    smem = getattr(p, "shared_memory_per_multiprocessor", 0) or getattr(p, "shared_memory_per_block_optin", 0)
    regs = getattr(p, "regs_per_multiprocessor", 0)
    threads = getattr(p, "max_threads_per_multi_processor", 0)
    return {"name": p.name, "compute capability": f"{p.major}.{p.minor}", "SMs": p.multi_processor_count,
            "warps per SM (most resident)": threads // 32 or None,
            "registers per SM (KiB)": regs * 4 // 1024 or None, "shared memory per SM (KiB)": smem // 1024 or None,
            "L2 (MiB)": round(getattr(p, "L2_cache_size", 0) / 2**20, 1) or None,
            "memory (GiB)": round(p.total_memory / 2**30), "memory": "", **_nominal_rows(env.SLUG)}


def gpu_table():
    """The reader's GPU beside the T4 and the H200: one row per property, one column per GPU."""
    columns = {}
    if env.HAS_GPU:
        columns[f"yours ({env._gpu_name()})"] = gpu_specs()
    for slug, spec in GPU_SPECS.items():
        columns[spec["name"]] = {**spec, **_nominal_rows(slug)}
    df = pd.DataFrame(columns).drop(index=["name"])
    df.index.name = "property"
    return df.fillna("")


def plot_memory_hierarchy(name: str | None = None):
    """Where data can live on each GPU of ``gpu_table``: registers and shared memory (all SMs together), L2
    and device memory, on one log axis of bytes, with the device memory's bandwidth. Device memory, the
    farthest, is by far the largest: a kernel that reads its weights once is paced by the last row."""
    specs = {spec["name"]: {**spec, **_nominal_rows(slug)} for slug, spec in GPU_SPECS.items()}
    if env.HAS_GPU and env.SLUG not in GPU_SPECS:
        specs[f"yours ({env._gpu_name()})"] = gpu_specs()
    levels = (("registers (all SMs)", lambda s: s["registers per SM (KiB)"] * s["SMs"] * 2**10),
              ("shared memory (all SMs)", lambda s: s["shared memory per SM (KiB)"] * s["SMs"] * 2**10),
              ("L2 cache", lambda s: s["L2 (MiB)"] * 2**20), ("device memory", lambda s: s["memory (GiB)"] * 2**30))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    height = 0.8 / len(specs)
    for i, (gpu, spec) in enumerate(specs.items()):
        sizes = [size(spec) if all(spec.get(k) for k in ("SMs", "registers per SM (KiB)")) else 0
                 for _, size in levels]
        y = [row + i * height for row in range(len(levels))]
        ax.barh(y, sizes, height=height * 0.9, label=gpu)
        gb_s = spec.get("memory bandwidth (GB/s, nominal)")
        for row, (yi, size) in enumerate(zip(y, sizes)):
            if size:
                text = bytes_label(size) + (f", read at {gb_s:,} GB/s" if gb_s and row == len(levels) - 1 else "")
                ax.annotate(text, (size, yi), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(1e5, 1e13)
    ax.set_yticks([row + 0.4 - height / 2 for row in range(len(levels))], [name for name, _ in levels])
    ax.invert_yaxis()
    ax.set_xlabel("bytes (log scale; nominal sizes)")
    ax.set_title("Where the data lives: closer to the cores towards the top", loc="left", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    if name:
        save_figure(fig, name)
    return fig


def _aot(*args: str) -> str:
    """``python -m slower_kernels.aot ARGS`` in a fresh process with Triton's compiler (the interpreter, which
    CPU mode uses, replaces it): compiles ahead of time for a T4 and an H200, with or without a GPU."""
    compiler_env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-m", "slower_kernels.aot", *args], cwd=env.ROOT, env=compiler_env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"python -m slower_kernels.aot {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


_COMPILER_TABLE = None


_PTX = {}  # (kernel, label, cc) -> PTX text, from the same run as _COMPILER_TABLE


def compiler_table(kernels=None):
    """``slower_kernels.aot.compiler_table`` as a DataFrame (one row per kernel, configuration and target: sm_75
    and sm_90 side by side), optionally only the kernels named in ``kernels``. Computed once per process,
    with every row's PTX kept for ``ptx_excerpt``."""
    global _COMPILER_TABLE
    if _COMPILER_TABLE is None:
        rows = json.loads(_aot("--ptx", "--with-text"))
        _PTX.update({(r["kernel"], r["label"], r["cc"]): r.pop("ptx") for r in rows})
        _COMPILER_TABLE = pd.DataFrame(rows)
    df = _COMPILER_TABLE
    if kernels is not None:
        unknown = set(kernels) - set(df["kernel"])
        if unknown:
            raise ValueError(f"kernels: not in the compiler table: {sorted(unknown)}; known: {sorted(set(df['kernel']))}")
        df = df[df["kernel"].isin(kernels)]
    return df.reset_index(drop=True)


def ptx_excerpt(kernel: str, label: str, cc: int, pattern: str, max_lines: int = 8) -> str:
    """The first ``max_lines`` PTX lines of one compiled kernel (``compiler_table``'s kernel and label, for
    compute capability ``cc``) that match the regular expression ``pattern``, stripped, with a count of
    the rest: an excerpt to annotate, not pages of PTX. A kernel of ``compiler_table`` reads the PTX that
    table compiled; any other compiles in a fresh process."""
    if max_lines < 1:
        raise ValueError(f"max_lines must be at least 1, got {max_lines}")
    ptx = _PTX.get((kernel, label, cc)) or _aot("--ptx-text", kernel, label, str(cc))
    lines = [line.strip() for line in ptx.splitlines() if re.search(pattern, line)]
    more = f"\n... and {len(lines) - max_lines} more matching lines" if len(lines) > max_lines else ""
    return "\n".join(lines[:max_lines]) + more if lines else f"(no line of the PTX matches {pattern!r})"
