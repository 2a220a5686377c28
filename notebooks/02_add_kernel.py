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
# - how to time a kernel properly, and turn the time into GB/s;
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
# launches them.

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
# memory system needs for them at its nominal bandwidth. Compare that with the few microseconds it takes
# to launch a kernel: if the memory time is of the same order, the launch will be a visible part of the
# measurement, and a launcher with more Python in it (ours) will pay for it.

# %%
n = SIZES.add_n
element_bytes = torch.tensor([], dtype=DTYPE).element_size()
moved = 3 * n * element_bytes  # read x, read y, write out
nominal = helpers.NOMINAL_GB_S.get(helpers.SLUG) if DEVICE.type == "cuda" else None
print(f"n = {n:,} elements, {moved / 1e6:.2f} MB moved per call")
if nominal:
    print(f"at the nominal {nominal} GB/s this takes at least {moved / (nominal * 1e9) * 1e6:.1f} µs")
else:
    print("no GPU bandwidth to compare with in CPU mode")

# %% [markdown]
# `helpers.bench_ms` times a function the way Triton's own tutorials do: on a GPU it calls
# `triton.testing.do_bench`, which warms up, runs the function many times and returns the median
# milliseconds; in CPU mode it takes the median wall-clock time of a few calls.

# %%
x = torch.randn(n, device=DEVICE, dtype=DTYPE)
y = torch.randn(n, device=DEVICE, dtype=DTYPE)
triton_ms = helpers.bench_ms(lambda: kernels.add(x, y))
torch_ms = helpers.bench_ms(lambda: torch.add(x, y))
ratio = triton_ms / torch_ms
helpers.record("add.triton_ms", triton_ms, "ms", f"{n} elements, {str(DTYPE)[6:]}")
helpers.record("add.torch_ms", torch_ms, "ms", f"{n} elements, {str(DTYPE)[6:]}")
helpers.record("add.ratio", ratio, "x slower", "Triton time / torch time (below 1: Triton faster)")
print(f"Triton add: {triton_ms:.4f} ms   torch.add: {torch_ms:.4f} ms   ratio: {ratio:.2f}")

# %%
def gb_s(ms):
    return moved / (ms * 1e-3) / 1e9  # bytes moved / seconds, in GB/s


def num(value):
    """A rate for prose: no decimals when large, three significant digits when small."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


word = "slower" if ratio > 1 else "faster"
factor = ratio if ratio > 1 else 1 / ratio
text = (f"At {n:,} elements our kernel took **{triton_ms:.4f} ms** and `torch.add` **{torch_ms:.4f} ms**: "
        f"ours is **{factor:.2f}x {word}**, moving {num(gb_s(triton_ms))} GB/s against {num(gb_s(torch_ms))} GB/s. ")
if nominal:
    text += (f"The memory floor for these bytes is {moved / (nominal * 1e9) * 1e3:.4f} ms, so PyTorch's "
             f"time is {torch_ms / (moved / (nominal * 1e9) * 1e3):.1f}x the floor and ours "
             f"{triton_ms / (moved / (nominal * 1e9) * 1e3):.1f}x. ")
BLOG_RATIO = helpers.blog("add.ratio")  # the post's stated ratio; its rounded times give a slightly different one
blog_triton, blog_torch = helpers.blog("add.triton_ms"), helpers.blog("add.torch_ms")
text += (f"The blog measured {blog_triton} ms against {blog_torch} ms on a T4 and called it {BLOG_RATIO}x slower "
         f"(its rounded times give {blog_triton / blog_torch:.2f}x), without saying at which size. "
         + ("In CPU mode this compares Triton's interpreter with PyTorch's compiled CPU code, so only the "
            "method carries over, not the ratio." if helpers.MODE == "cpu" else
            "Your run shows the same direction, by a larger margin." if ratio > 1.3 * BLOG_RATIO else
            "Your run shows the same direction, by a similar margin." if ratio > BLOG_RATIO / 1.3 else
            "Your run shows the same direction, by a smaller margin." if ratio > 1.1 else
            "Your run shows the same direction, by a much smaller margin: on this GPU the two kernels take "
            "almost the same time." if ratio > 1 else
            "Your run tells a different story from the blog's: here the Triton kernel was not slower."))
helpers.md(text)

# %% [markdown]
# ### Host time and GPU time
#
# What does `bench_ms` actually see? `do_bench` issues the calls back to back and clears the GPU's cache
# before each one. While the GPU is busy clearing, the host is already preparing the next launch, so part
# of the launch cost hides behind GPU work, and how much hides depends on how fast the host is. The
# measurement leans towards GPU time on a fast host and shows more of the launch on a slow one.
#
# `helpers.profile_call` separates the two. It reports the time the GPU spent running kernels
# (**GPU-busy**) and the time one call took by the clock, start to finish, synchronised (**wall**).
# Whatever the wall time has on top of the GPU-busy time is spent outside the kernel: in Python, in the
# launcher, in the driver, and in waiting for the result.

# %%
prof_triton = helpers.profile_call(lambda: kernels.add(x, y))
prof_torch = helpers.profile_call(lambda: torch.add(x, y))


helpers.show(pd.DataFrame([
    {"version": "Triton add", "kernels per call": helpers.fmt(prof_triton.launches, 0),
     "GPU-busy ms": helpers.fmt(prof_triton.gpu_busy_ms, 4), "wall ms": helpers.fmt(prof_triton.wall_ms, 4)},
    {"version": "torch.add", "kernels per call": helpers.fmt(prof_torch.launches, 0),
     "GPU-busy ms": helpers.fmt(prof_torch.gpu_busy_ms, 4), "wall ms": helpers.fmt(prof_torch.wall_ms, 4)},
]))

# %%
if prof_triton.gpu_busy_ms is None:
    helpers.md("In CPU mode there is no GPU time to separate from host time: the whole call is interpreter "
               "work. A GPU run of this cell shows the split.")
else:
    gpu_ratio = prof_triton.gpu_busy_ms / max(prof_torch.gpu_busy_ms, 1e-9)  # guard: a missed profiler event
    helpers.md(
        f"On the GPU the two kernels ran for {prof_triton.gpu_busy_ms * 1e3:.1f} µs (ours) and "
        f"{prof_torch.gpu_busy_ms * 1e3:.1f} µs (PyTorch's), a ratio of {gpu_ratio:.2f}. By the clock, one "
        f"synchronised call took {prof_triton.wall_ms * 1e3:.1f} µs and {prof_torch.wall_ms * 1e3:.1f} µs. "
        + ("Most of each call is host work around the kernel, not the kernel itself: "
           if prof_triton.wall_ms > 2 * prof_triton.gpu_busy_ms else
           "At this size the kernel itself is a large part of each call: ")
        + "keep this split in mind, because a model at batch size 1 launches a long chain of such small "
        "kernels for every token (chapter 1 counted them)."
    )

# %% [markdown]
# ## A sweep over sizes
#
# One size tells little. We time both additions from a few thousand elements up to tens of millions (the
# sizes come from `helpers.SIZES`, smaller in CPU mode) and plot two views of the same data: the time per
# call, and the bandwidth achieved, bytes moved divided by time.
#
# What we expect: for small vectors the bytes are negligible and the time is the fixed cost of a launch,
# so the time curve is flat and the bandwidth tiny. For large vectors the launch is negligible, the time
# grows in proportion to $n$, and the bandwidth levels off near what the memory can deliver. Where the
# two regimes meet depends on the GPU: the faster its memory, the larger the vector must be before the
# bytes outweigh the launch.

# %%
rows = []
for size in helpers.progress(SIZES.add_sweep, desc="add sweep"):
    a = torch.randn(size, device=DEVICE, dtype=DTYPE)
    b = torch.randn(size, device=DEVICE, dtype=DTYPE)
    t_ms, p_ms = helpers.bench_ms(lambda: kernels.add(a, b)), helpers.bench_ms(lambda: torch.add(a, b))
    nbytes = 3 * size * element_bytes
    rows.append({"n": size, "MB moved": nbytes / 1e6, "triton_ms": t_ms, "torch_ms": p_ms,
                 "ratio": t_ms / p_ms, "triton_GB_s": nbytes / (t_ms * 1e-3) / 1e9,
                 "torch_GB_s": nbytes / (p_ms * 1e-3) / 1e9})
sweep = pd.DataFrame(rows)
helpers.save_sweep(sweep, "add_sweep")
helpers.show(sweep.round(4))

# %%
fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(11, 4))
for col, label in (("triton", "Triton add"), ("torch", "torch.add")):
    ax_t.plot(sweep["n"], sweep[f"{col}_ms"], "o-", label=label)
    ax_bw.plot(sweep["n"], sweep[f"{col}_GB_s"], "o-", label=label)
ax_t.set(xscale="log", yscale="log", xlabel="elements per vector (K = 1024, M = 1024²)",
         ylabel="time per call (ms)", title="Where does launch cost give way to memory?")
ax_bw.set(xscale="log", yscale="log", xlabel="elements per vector (K = 1024, M = 1024²)",
          ylabel="achieved bandwidth (GB/s)", title="How close to the memory's speed do we get?")
if nominal:
    ax_bw.axhline(nominal, color="grey", ls="--", label=f"nominal {nominal} GB/s")
for ax in (ax_t, ax_bw):
    helpers.plain_log_ticks(ax, "x", sweep["n"], [helpers.count_label(n) for n in sweep["n"]])
    helpers.plain_log_ticks(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
fig.suptitle(f"Vector add, {str(DTYPE)[6:]}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "add_sweep")
plt.show()

# %%
first, last = sweep.iloc[0], sweep.iloc[-1]
size_growth = last["n"] / first["n"]
time_growth = last["triton_ms"] / first["triton_ms"]
small_flat = sweep.iloc[1]["triton_ms"] / first["triton_ms"]
text = (
    f"From the smallest to the largest vector the data grew **{size_growth:,.0f}x** while our kernel's time "
    f"grew **{time_growth:,.1f}x**. Between the two smallest sizes ({int(first['n']):,} and "
    f"{int(sweep.iloc[1]['n']):,} elements, {sweep.iloc[1]['n'] / first['n']:.0f}x the data) the time changed "
    f"by {small_flat:.2f}x: "
    + ("it even went down: at this size each call is all fixed cost, and what differs is noise. "
       if small_flat < 0.8 else
       "nearly flat, the signature of a fixed cost per launch. " if small_flat < 1.5 else
       "it already grows with the data. ")
    + f"At the smallest size ours is {first['ratio']:.2f}x PyTorch's time; at the largest, {last['ratio']:.2f}x. "
)
if nominal:
    text += (f"At the largest size our kernel moved {last['triton_GB_s']:.0f} GB/s and PyTorch's "
             f"{last['torch_GB_s']:.0f} GB/s, {100 * last['triton_GB_s'] / nominal:.0f}% and "
             f"{100 * last['torch_GB_s'] / nominal:.0f}% of the nominal {nominal} GB/s: "
             + ("both are close to what the memory can give, so there is little left to lose or win."
                if min(last["torch_GB_s"], last["triton_GB_s"]) > 0.5 * nominal else
                "PyTorch's is close to what the memory can give, ours is not yet."
                if last["torch_GB_s"] > 0.5 * nominal else
                "ours is close to what the memory can give, PyTorch's is not yet."
                if last["triton_GB_s"] > 0.5 * nominal else
                "both are still well below the memory's limit, so larger sizes might keep climbing."))
else:
    text += ("In CPU mode the 'bandwidth' is the interpreter's speed, not a memory's: read the shape of the "
             "curves, not their values.")
helpers.md(text)

# %% [markdown]
# ## Your numbers beside the blog's
#
# The blog's column is its T4 run, the `h200` column the committed run of this series.

# %%
helpers.show(helpers.compare("add."))

# %% [markdown]
# ## Takeaway
#
# - A Triton kernel is written for one program; the grid of programs covers the data, and a mask protects
#   the ragged last block.
# - Check first, on fresh random data of an awkward size; time second, with a median over many runs.
# - Small kernels are priced by their launch, large ones by their bytes. A model generating one token at a
#   time lives mostly in the first regime, so the launch is the cost to watch.
#
# Next, in chapter 3, we write a kernel the model actually uses, RMSNorm, and then make it worse on
# purpose by splitting it in two.
