# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Chapter 2: A first kernel, adding two vectors
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/02_add_kernel.ipynb)
#
# In this chapter you will learn:
# - how a Triton kernel splits one job into many *programs*, each handling a *block* of elements;
# - what `tl.program_id`, `tl.arange` and a *mask* do, and why the last block needs one;
# - how to check a kernel against PyTorch on fresh random data;
# - how to time a kernel on two clocks, GPU time and host time per call, and turn GPU time into GB/s;
# - what one launch costs on the host, for a Triton kernel and for a PyTorch op;
# - why a tiny kernel is limited by the cost of launching it, and a large one by memory bandwidth.

# %% [markdown]
# ## The idea
#
# Adding two vectors is the "hello world" of GPU programming: no clever maths, just reading two numbers,
# adding them, writing one number back, a million times over. It is the cleanest place to see the two
# costs that every later chapter plays with:
#
# - **the launch**: a fixed price paid on the CPU each time Python asks the GPU to run a kernel;
# - **the bytes**: an addition of $n$ elements reads $2n$ and writes $n$ of them. The arithmetic (one
#   addition per element) is negligible, so the speed of memory decides how long a large addition takes.
#
# Our kernel will not beat `torch.add`; it is not meant to. The point is to see *when* it loses, and why.

# %%
# Setup: find the repository (or fetch it on a fresh Colab runtime), install what is missing.
# Written by tools/sync_notebooks.py from colab_setup.py: edit it there, not here.
import os, pathlib, subprocess, sys
REPO_URL = os.environ.get("SLOWER_REPO_URL", "https://github.com/slower-on-purpose/slower-on-purpose")
BRANCH = os.environ.get("SLOWER_BRANCH", "main")
ROOT = next((p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
             if (p / "helpers.py").is_file() and (p / "kernels").is_dir()), None)
if ROOT is None:  # the notebook came alone (Colab): clone the rest next to it
    ROOT = pathlib.Path("slower-on-purpose").resolve()
    if not ROOT.exists():
        done = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", BRANCH, REPO_URL, str(ROOT)],
                              capture_output=True, text=True, env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        if done.returncode != 0:
            raise SystemExit(f"Could not clone {REPO_URL} (branch {BRANCH}): {done.stderr.strip()}\n"
                             "Is the address right and the repository public? A fork sets REPO_URL in "
                             "colab_setup.py (see the README), or SLOWER_REPO_URL before this cell.")
sys.path.insert(0, str(ROOT))
import colab_setup
colab_setup.prepare()

# %%
import inspect

import matplotlib.pyplot as plt
import pandas as pd
import torch

import helpers
import kernels

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES

# %% [markdown]
# ## The kernel
#
# Here is the whole file, `kernels/add.py`: the `@triton.jit` kernel first, then the launcher, the plain
# Python function that checks its inputs, allocates the output, decides how many programs to start and
# launches them. At the end of the file sits a kernel that does nothing at all, `empty`: we use it below to
# price a launch on its own.

# %%
print(inspect.getsource(inspect.getmodule(kernels.add)))

# %% [markdown]
# ### Programs, blocks and masks
#
# A GPU kernel is written from the point of view of **one program**. The launcher starts a *grid* of
# programs, here `cdiv(n_elements, BLOCK_SIZE)` of them, rounded up, and they all run the same code. The
# only thing that tells them apart is `tl.program_id(axis=0)`: 0 for the first, 1 for the second, and so on.
#
# - `offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)` gives each program its own slice of the
#   vector: program 0 takes elements 0 to `BLOCK_SIZE - 1`, program 1 the next `BLOCK_SIZE`, and so on.
#   `tl.arange` produces a whole block of indices at once: a Triton program works on blocks, not on
#   single numbers, and the compiler spreads the block over the program's threads.
# - `mask = offsets < n_elements` guards the last program. When $n$ is not a multiple of `BLOCK_SIZE`
#   its block runs past the end of the vector; the masked-off lanes neither read nor write.
# - `tl.load` and `tl.store` move data between the GPU's main memory and the program's registers; the
#   addition in between happens in registers.
#
# The cell below replays that arithmetic in plain PyTorch for a toy case, 10 elements in blocks of 4, so
# you can see what each program would touch.

# %%
toy_n, toy_block = 10, 4
n_programs = -(-toy_n // toy_block)  # the same rounding-up as triton.cdiv
for pid in range(n_programs):
    offsets = pid * toy_block + torch.arange(toy_block)
    mask = offsets < toy_n
    print(f"program {pid}: offsets {offsets.tolist()}  mask {mask.int().tolist()}")

# %% [markdown]
# The third program gets offsets 8 to 11, but only 8 and 9 exist: its mask switches the other two lanes
# off. Without the mask it would read and write past the end of the tensors.
#
# ## Is it correct?
#
# We add two fresh random vectors whose length is deliberately *not* a multiple of the block size, so the
# mask is exercised, and compare with PyTorch. An addition of two numbers rounds the same way whoever
# performs it, so we expect the results to be identical, bit for bit.

# %%
torch.manual_seed(0)
n_check = SIZES.add_n + 3  # an awkward length: the last block is partly masked
x = torch.randn(n_check, device=DEVICE, dtype=DTYPE)
y = torch.randn(n_check, device=DEVICE, dtype=DTYPE)
ours, theirs = kernels.add(x, y), torch.add(x, y)
max_err = (ours.float() - theirs.float()).abs().max().item()
print(f"{n_check:,} elements of {str(DTYPE)[6:]}, max |ours - torch| = {max_err}")
print("add check:", "PASS" if torch.equal(ours, theirs) else "FAIL")
assert torch.equal(ours, theirs), "the add kernel disagrees with torch.add"

# %% [markdown]
# The launcher also refuses inputs the kernel cannot handle, with a message that names the argument:

# %%
try:
    kernels.add(x, y[:-1])
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# ## How long does it take? A prediction first
#
# At the headline size, $2^{20}$ elements on a GPU in full mode, the addition moves $3 \times n$ elements
# of 2 bytes each (fp16). The next cell computes the bytes and, where the GPU is known, the time the
# memory system needs for them at its nominal bandwidth.

# %%
n = SIZES.add_n
element_bytes = torch.tensor([], dtype=DTYPE).element_size()
moved = 3 * n * element_bytes  # read x, read y, write out
nominal = helpers.NOMINAL_GB_S.get(helpers.SLUG) if helpers.HAS_GPU else None
print(f"n = {n:,} elements, {moved / 1e6:.2f} MB moved per call")
if nominal:
    print(f"at the nominal {nominal} GB/s this takes at least {moved / (nominal * 1e9) * 1e6:.3g} µs of GPU time")
else:
    print("no GPU bandwidth to compare with in CPU mode")

# %% [markdown]
# ### Two clocks
#
# "How long does a kernel take" has two answers, and for a kernel of a few microseconds they differ a lot.
#
# - **GPU time**: how long the GPU works on one call. `triton.testing.do_bench_cudagraph` records the call
#   into a CUDA graph and replays it, so the host, Python and the launcher are out of the loop: what is
#   left is the kernel itself.
# - **Host time per call**: the host's wall clock per call when calls run back to back, with a
#   synchronisation before and after the loop. The host cannot issue calls faster than its own work on
#   each allows, and it has to wait for the GPU whenever the GPU falls behind, so this is the slower of
#   the two: the launch price for a tiny kernel, the GPU time for a large one.
#
# `helpers.time_call(fn)` measures both, and counts the kernels one call launches (with `torch.profiler`);
# every timing in this series goes through it, so two cells that time the same call never disagree.
# (Triton's own tutorials use `triton.testing.do_bench`: it records a GPU event before and after each
# call, with a cache-clearing kernel in between. The start event fires on the GPU as soon as the GPU gets
# there, so if the host is still busy launching the kernel, that wait is counted: for a microsecond kernel
# `do_bench` sees part of the launch, more on a slow host, less on a fast one. It mixes the two clocks.)
# In CPU mode there is a single clock, the interpreter's wall time: numpy doing the kernel's work.
#
# **The prediction.** Both kernels read and write the same bytes, so on the GPU clock they should take
# about the same time, near the memory time above. On the host clock our kernel should cost more per
# call: our launcher is Python (input checks, allocating the output, Triton's dispatch), and at this size
# the launch, not the bytes, sets the pace of back-to-back calls.

# %%
x = torch.randn(n, device=DEVICE, dtype=DTYPE)
y = torch.randn(n, device=DEVICE, dtype=DTYPE)
t_ours = helpers.time_call(lambda: kernels.add(x, y))
t_torch = helpers.time_call(lambda: torch.add(x, y))
gpu_ratio = t_ours.gpu_ms / t_torch.gpu_ms if helpers.HAS_GPU else None
host_ratio = t_ours.host_ms / t_torch.host_ms
gpu_verdict = helpers.verdict(gpu_ratio) if gpu_ratio is not None else None
host_verdict = helpers.verdict(host_ratio)

setting = f"{n} elements, {str(DTYPE)[6:]}"
helpers.record("add.triton_ms", t_ours.gpu_ms, "ms", f"GPU time (CUDA-graph replay), {setting}; empty in CPU mode")
helpers.record("add.torch_ms", t_torch.gpu_ms, "ms", f"GPU time (CUDA-graph replay), {setting}; empty in CPU mode")
helpers.record("add.ratio", gpu_ratio, "x slower", "Triton / torch, GPU time (below 1: Triton faster); empty in CPU mode",
               verdict=gpu_verdict.text if gpu_verdict else "")
helpers.record("add.host_triton_ms", t_ours.host_ms, "ms", f"{t_ours.host_clock}, {setting}")
helpers.record("add.host_torch_ms", t_torch.host_ms, "ms", f"{t_torch.host_clock}, {setting}")
helpers.record("add.host_ratio", host_ratio, "x slower", f"Triton / torch, {t_ours.host_clock}",
               verdict=host_verdict.text)


def us(ms):
    """Milliseconds to microseconds, for the table; None (no GPU clock) stays None."""
    return None if ms is None else 1e3 * ms


helpers.show(pd.DataFrame([
    {"version": name, "kernels per call": helpers.fmt(t.launches, 0), "GPU µs": helpers.fmt(us(t.gpu_ms), 2),
     "host µs per call": helpers.fmt(us(t.host_ms), 2)}
    for name, t in (("Triton add", t_ours), ("torch.add", t_torch))
]))
print(f"GPU-time ratio (Triton / torch): {helpers.fmt(gpu_ratio, 2)}, "
      f"verdict: {gpu_verdict.text if gpu_verdict else 'n/a (CPU)'}")
print(f"host-time ratio (Triton / torch): {host_ratio:.2f}, verdict: {host_verdict.text}   "
      f"[host clock: {t_ours.host_clock}]")
print("kernels per call:", helpers.launch_note("call"))

# %% [markdown]
# ## The price of one launch
#
# How much of that host time is the launch itself? `helpers.launch_prices` measures two launches that do
# no work, each in synchronised loops of thousands of back-to-back calls, on the host clock:
#
# - an **empty Triton kernel** (`kernels.empty`, the last function of `kernels/add.py` above): one program
#   that does nothing, launched through a launcher that checks its argument, as ours do. This is the
#   price of our launcher's Python and Triton's dispatch;
# - a **one-element PyTorch op** (`x.add_(1)` on a one-element tensor): PyTorch's dispatcher and the CUDA
#   launch, with no work worth the name.
#
# Every kernel pays its launch price before it runs. The later chapters use these two numbers: chapter 8's
# launch-budget model reads them to predict the wall time per token of each configuration from how many
# kernels (PyTorch's and ours) one token launches.

# %%
prices = helpers.launch_prices()
helpers.record("add.launch_us_triton", prices.triton_us, "us",
               f"empty Triton kernel (kernels.empty), {prices.clock}, loops of {prices.calls}")
helpers.record("add.launch_us_torch", prices.torch_us, "us",
               f"one-element PyTorch op (x.add_(1)), {prices.clock}, loops of {prices.calls}")
print(f"one empty Triton launch:   {prices.triton_us:8.1f} µs")
print(f"one one-element torch op:  {prices.torch_us:8.1f} µs")
print(f"clock: {prices.clock}, {prices.calls} calls per loop")


# %%
def gb_s(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9  # bytes moved / seconds, in GB/s


def num(value):
    """A rate or a time for prose: no decimals when large, three significant digits when small."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def launch_bound(host, gpu) -> bool:
    """Back-to-back calls are launch-bound when their host time per call exceeds their GPU time beyond
    noise: the host, not the GPU, sets the pace. (The host time never drops below the GPU time: the host
    waits for the GPU.)"""
    v = helpers.verdict(host / gpu)
    return v.real and v.ratio > 1


h_ours, h_torch = us(t_ours.host_ms), us(t_torch.host_ms)
prices_text = (f"An empty Triton launch costs {num(prices.triton_us)} µs and a one-element PyTorch op "
               f"{num(prices.torch_us)} µs on this host")
if t_ours.gpu_ms is None:
    text = (f"In CPU mode there is no GPU clock. By the interpreter's wall time one call of our kernel took "
            f"{num(h_ours)} µs and `torch.add` {num(h_torch)} µs: **{host_verdict.text}** (ratio "
            f"{host_ratio:.2f}). That compares numpy interpreting our kernel with PyTorch's compiled CPU code, "
            "so only the method carries over, not the ratio. " + prices_text + ": the first is the interpreter's "
            "price, the second a CPU op's, and neither is a GPU launch. A GPU run measures the real prices, the "
            "ones chapter 8 uses.")
else:
    g_ours, g_torch = us(t_ours.gpu_ms), us(t_torch.gpu_ms)
    floor_us = moved / (nominal * 1e9) * 1e6 if nominal else None
    text = (f"**GPU time.** At {n:,} elements our kernel ran for {num(g_ours)} µs and `torch.add` for "
            f"{num(g_torch)} µs: **{gpu_verdict.text}** (ratio {gpu_ratio:.2f}), moving {num(gb_s(moved, t_ours.gpu_ms))} "
            f"and {num(gb_s(moved, t_torch.gpu_ms))} GB/s. "
            + (f"The memory floor for these bytes is {num(floor_us)} µs, so ours took {g_ours / floor_us:.1f}x the "
               f"floor and PyTorch's {g_torch / floor_us:.1f}x. " if floor_us else "")
            + ("Same bytes, same speed: on the GPU our kernel is as good as PyTorch's. " if not gpu_verdict.real else
               "Same bytes, different GPU time: the two kernels split the work differently (block size, "
               "programs per launch, how each program loads its block), and the GPU's own clock sees it. ")
            + f"\n\n**Host time.** Called back to back, one call took {num(h_ours)} µs (ours) and {num(h_torch)} µs "
            f"(`torch.add`): **{host_verdict.text}** (ratio {host_ratio:.2f}). That is {h_ours / g_ours:.1f}x and "
            f"{h_torch / g_torch:.1f}x their GPU times. " + prices_text + ". "
            + ("So at this size a call costs the host its launch price plus the launcher's own work (for ours: "
               "checking both inputs and allocating the output), and that, not the GPU's work, sets the pace of "
               "back-to-back calls: the host-time ratio is a ratio of launch costs."
               if launch_bound(h_ours, g_ours) and launch_bound(h_torch, g_torch) else
               "At this size the host time is not the launch alone: for at least one of the two, the host "
               "waits for the GPU's work.")
            )
helpers.md(text)

# %% [markdown]
# ### Beside the blog's numbers
#
# The blog timed its kernel at 0.084 ms against 0.046 ms for `torch.add`, on a T4 with
# `triton.testing.do_bench`, and did not say at which size. `do_bench` mixes the host's launching with the
# GPU's work (see "Two clocks" above), so its numbers are neither of our clocks: we set them beside both.

# %%
BLOG_RATIO = helpers.blog("add.ratio")  # the post's stated ratio; its rounded times give a slightly different one
blog_triton, blog_torch = helpers.blog("add.triton_ms"), helpers.blog("add.torch_ms")
text = (f"The blog measured {1e3 * blog_triton:.0f} µs against {1e3 * blog_torch:.0f} µs on a T4 (`do_bench`, "
        f"host and GPU time mixed) and called it {BLOG_RATIO}x slower (its rounded times give "
        f"{blog_triton / blog_torch:.2f}x). ")
if gpu_verdict is None:
    text += (f"In CPU mode your only clock is the interpreter's wall time ({num(h_ours)} µs against "
             f"{num(h_torch)} µs, {host_verdict.text}): it compares Triton's interpreter with PyTorch's compiled "
             "CPU code, so only the method carries over, not the ratio.")
else:
    clocks = {"GPU time": (gpu_ratio, gpu_verdict, us(t_ours.gpu_ms), us(t_torch.gpu_ms)),
              "host time per call": (host_ratio, host_verdict, h_ours, h_torch)}
    text += "Yours, at " + f"{n:,} elements on {helpers.env_info()['gpu']}: " + "; ".join(
        f"{clock} {num(a)} µs against {num(b)} µs, ratio {r:.2f} ({v.text})" for clock, (r, v, a, b) in clocks.items()
    ) + ". "
    same_way = [c for c, (r, v, _, _) in clocks.items() if v.real and v.ratio > 1]
    other_way = [c for c, (r, v, _, _) in clocks.items() if v.real and v.ratio < 1]
    level = [c for c, (r, v, _, _) in clocks.items() if not v.real]
    text += " ".join(filter(None, [
        f"The blog's direction (ours slower) shows on your {' and '.join(same_way)}." if same_way else "",
        f"Your {' and '.join(other_way)} finds ours faster, the other way round from the blog." if other_way else "",
        f"Your {' and '.join(level)} find{'s' if len(level) == 1 else ''} the two within noise." if level else "",
    ]))
    text += (" A launch-bound `do_bench` number leans towards the host clock on a slow host, and towards the GPU "
             "clock where the kernel is long enough to hide the launch behind it.")
helpers.md(text)

# %% [markdown]
# ## A sweep over sizes
#
# One size tells little. We time both additions with `helpers.time_call`, the same function as above,
# from a few thousand elements up to tens of millions (the sizes come from `helpers.SIZES`, smaller in
# CPU mode); the headline size is not timed twice, its row is the measurement above. Two views of the
# data: the time per call on both clocks, and the bandwidth achieved on the GPU clock, bytes moved divided
# by GPU time.
#
# What we expect: for small vectors the bytes are negligible. The GPU time sits at a floor of its own
# (even an almost empty kernel keeps the GPU busy for a moment), and the host time per call at the price
# of a launch, far above it: the calls are **launch-bound**. For large vectors the time grows in
# proportion to $n$ on both clocks, the host ends up waiting for the GPU, and the bandwidth levels off
# near what the memory can deliver. Where the regimes meet depends on the GPU and on the host: the faster
# the memory and the slower the host, the larger the vector must be before the bytes outweigh the launch.

# %%
timed = {n: (t_ours, t_torch)}  # the headline measurement is the sweep's point at that size
rows = []
for size in helpers.progress(SIZES.add_sweep, desc="add sweep"):
    if size not in timed:
        a = torch.randn(size, device=DEVICE, dtype=DTYPE)
        b = torch.randn(size, device=DEVICE, dtype=DTYPE)
        timed[size] = (helpers.time_call(lambda: kernels.add(a, b)), helpers.time_call(lambda: torch.add(a, b)))
    ours, theirs = timed[size]
    nbytes = 3 * size * element_bytes
    ratio = ours.gpu_ms / theirs.gpu_ms if helpers.HAS_GPU else None
    rows.append({"n": size, "MB_moved": nbytes / 1e6,
                 "triton_gpu_us": us(ours.gpu_ms), "torch_gpu_us": us(theirs.gpu_ms),
                 "gpu_ratio": ratio, "gpu_verdict": helpers.verdict(ratio).text if ratio is not None else None,
                 "triton_host_us": us(ours.host_ms), "torch_host_us": us(theirs.host_ms),
                 "host_ratio": ours.host_ms / theirs.host_ms,
                 "triton_GB_s": gb_s(nbytes, ours.gpu_ms) if helpers.HAS_GPU else None,
                 "torch_GB_s": gb_s(nbytes, theirs.gpu_ms) if helpers.HAS_GPU else None})
sweep = pd.DataFrame(rows)
helpers.save_sweep(sweep, "add_sweep")
helpers.show(sweep.apply(lambda column: column.map(lambda v: helpers.fmt(v, 3) if v is None or isinstance(v, float)
                                                   else v)))
print("GPU = GPU time (CUDA-graph replay); host = " + t_ours.host_clock + "; GB/s from GPU time")

# %%
fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(12, 4.5))
colours = {"triton": "C0", "torch": "C1"}
names = {"triton": "Triton add", "torch": "torch.add"}
host_name = "host per call" if helpers.HAS_GPU else "interpreter wall"
for col in ("triton", "torch"):
    if helpers.HAS_GPU:
        ax_t.plot(sweep["n"], sweep[f"{col}_gpu_us"], "o-", color=colours[col], label=f"{names[col]}, GPU time")
        ax_bw.plot(sweep["n"], sweep[f"{col}_GB_s"], "o-", color=colours[col], label=names[col])
    ax_t.plot(sweep["n"], sweep[f"{col}_host_us"], "s--", color=colours[col], label=f"{names[col]}, {host_name}")
xlabel = "elements per vector (K = 1024, M = 1024²)"
ax_t.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="µs per call (solid: GPU time, dashed: host time)"
         if helpers.HAS_GPU else "µs per call (interpreter wall time)",
         title="Where does the launch give way to the bytes?")
ax_bw.set(xscale="log", xlabel=xlabel, title="How close to the memory's speed does the GPU get?")
if helpers.HAS_GPU:
    ax_bw.set(yscale="log", ylabel="achieved bandwidth, GB/s (bytes moved / GPU time)")
    if nominal:
        ax_bw.axhline(nominal, color="grey", ls="--", label=f"nominal {nominal} GB/s")
        ax_bw.set_ylim(top=1.6 * max(nominal, sweep[["triton_GB_s", "torch_GB_s"]].max().max()))
    ax_bw.legend()
else:
    ax_bw.text(0.5, 0.5, "no GPU time in CPU mode:\nno bandwidth to plot", ha="center", va="center",
               transform=ax_bw.transAxes)
    ax_bw.set_axis_off()
for ax in ((ax_t, ax_bw) if helpers.HAS_GPU else (ax_t,)):
    helpers.plain_log_ticks(ax, "x", sweep["n"], [helpers.count_label(v) for v in sweep["n"]])
    helpers.plain_log_ticks(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
ax_t.legend(fontsize=8)
fig.suptitle(f"Vector add, {str(DTYPE)[6:]}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "add_sweep")
plt.show()


# %%
def launch_bound_sizes(sweep, version: str) -> list:
    """The sizes at which ``version``'s host time per call exceeds its GPU time beyond noise (the series'
    one threshold, ``helpers.verdict``): the launch-bound region."""
    return [int(row["n"]) for _, row in sweep.iterrows()
            if launch_bound(row[f"{version}_host_us"], row[f"{version}_gpu_us"])]


def size_list(sizes) -> str:
    """Sizes as '4K, 16K elements' (a list or a pandas Series: never tested for truth, which a Series refuses)."""
    sizes = [int(s) for s in sizes]
    return (", ".join(helpers.count_label(s) for s in sizes) + " elements") if sizes else "no size"


first, last = sweep.iloc[0], sweep.iloc[-1]
size_growth = last["n"] / first["n"]
if not helpers.HAS_GPU:
    text = (f"From the smallest to the largest vector the data grew **{size_growth:,.0f}x** while the "
            f"interpreter's time per call of our kernel grew **{num(last['triton_host_us'] / first['triton_host_us'])}x**. "
            "In CPU mode there is no GPU time, so no launch-bound region and no bandwidth: the interpreter's "
            "time is numpy's, not a GPU's. Read the shape of the curves on a GPU run.")
else:
    verdicts = sweep["gpu_verdict"]
    noise_sizes = sweep.loc[verdicts == "within noise", "n"]
    slower = sweep.loc[sweep["gpu_ratio"].gt(1) & (verdicts != "within noise"), "n"]
    faster = sweep.loc[sweep["gpu_ratio"].lt(1) & (verdicts != "within noise"), "n"]
    text = (f"**GPU time.** At {len(noise_sizes)} of the {len(sweep)} sizes the two kernels are within noise of "
            f"each other on the GPU clock"
            + (f"; ours is slower at {size_list(slower)}" if len(slower) else "")
            + (f"; ours is faster at {size_list(faster)}" if len(faster) else "")
            + f" (GPU-time ratios from {sweep['gpu_ratio'].min():.2f} to {sweep['gpu_ratio'].max():.2f}). "
            f"From the smallest to the largest vector the data grew {size_growth:,.0f}x while our kernel's GPU "
            f"time grew {num(last['triton_gpu_us'] / first['triton_gpu_us'])}x: at {helpers.count_label(first['n'])} "
            f"elements it ran for {first['triton_gpu_us']:.2f} µs"
            + (f", while its {first['MB_moved'] * 1e3:.0f} KB need {first['MB_moved'] * 1e6 / (nominal * 1e3):.3f} µs "
               "at the nominal bandwidth: that time is the GPU's fixed cost of running a kernel at all, not the "
               "bytes. " if nominal else ". ")
            + "\n\n")
    bound_ours, bound_torch = launch_bound_sizes(sweep, "triton"), launch_bound_sizes(sweep, "torch")
    text += (f"**Host time.** The host time per call exceeds the GPU time beyond noise at {size_list(bound_ours)} "
             f"for ours and at {size_list(bound_torch)} for `torch.add`: there the calls are launch-bound, and "
             "what the host time measures is the launch (Python, dispatch, driver), not the bytes (compare the launch prices: "
             f"{num(prices.triton_us)} µs for an empty Triton launch, {num(prices.torch_us)} µs for a one-element "
             "PyTorch op). "
             + ("At the other sizes the host time per call does not exceed the GPU time beyond noise: there the "
                "host waits for the GPU. "
                if len(bound_ours) < len(sweep) or len(bound_torch) < len(sweep) else
                "At no size here does the GPU time overtake it: larger vectors would be needed. ")
             + "The host-time ratio (ours over PyTorch's) ranges from "
             f"{sweep['host_ratio'].min():.2f} to {sweep['host_ratio'].max():.2f}.\n\n")
    if nominal:
        text += (f"**Bandwidth.** At the largest size, by GPU time, our kernel moved {last['triton_GB_s']:.0f} GB/s "
                 f"and PyTorch's {last['torch_GB_s']:.0f} GB/s, {100 * last['triton_GB_s'] / nominal:.0f}% "
                 f"and {100 * last['torch_GB_s'] / nominal:.0f}% of the nominal {nominal} GB/s: "
                 + ("both are close to what the memory can give, so there is little left to lose or win."
                    if min(last["torch_GB_s"], last["triton_GB_s"]) > 0.5 * nominal else
                    "PyTorch's is close to what the memory can give, ours is not yet."
                    if last["torch_GB_s"] > 0.5 * nominal else
                    "ours is close to what the memory can give, PyTorch's is not yet."
                    if last["triton_GB_s"] > 0.5 * nominal else
                    "both are still well below the memory's limit, so larger sizes might keep climbing."))
helpers.md(text)

# %% [markdown]
# ## Your numbers beside the blog's
#
# The blog's column is its T4 run (`do_bench`: host and GPU time mixed), the `h200` column the committed
# run of this series. `add.triton_ms`, `add.torch_ms` and `add.ratio` are GPU time here; the `host_` rows
# are host time per call.

# %%
helpers.show(helpers.compare("add."))

# %% [markdown]
# ## Takeaway
#
# - A Triton kernel is written for one program; the grid of programs covers the data, and a mask protects
#   the ragged last block.
# - Check first, on fresh random data of an awkward size; time second, and name the clock: GPU time says
#   what the kernel costs the GPU, host time per call what it costs to launch it back to back.
# - Small kernels are priced by their launch, large ones by their bytes. The GPU clock compares the work
#   of two kernels; the host clock adds what launching them costs, and there our Python launcher pays
#   its launch price on every call. A model generating one token at a time lives mostly in the
#   launch-bound regime, so the launch prices measured here are the cost to watch.
#
# Next, in chapter 3, we write a kernel the model actually uses, RMSNorm, and then make it worse on
# purpose by splitting it in two.
