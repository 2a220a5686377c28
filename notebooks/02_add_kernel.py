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
# - how a Triton kernel splits one job into many *programs*, each handling a *block* of elements, and why the
#   last block needs a *mask*;
# - how to check a kernel against PyTorch on fresh random data, and how to read what the compiler made of it;
# - how to time a kernel on two clocks, GPU time and host time per call, and what one launch costs the host.
#
# ## What you will see
#
# **Equal GPU time, unequal host time.** On the committed H200 run, at $2^{20}$ fp16 elements, our kernel kept
# the GPU busy for 1.83 µs per call and `torch.add` for 1.83 µs: a ratio of 1.009 (quartiles 0.999-1.025, A/A
# floor 1.000), within noise. Yet on the same committed H200 run, called back to back, one call of ours cost the
# host 20.3 µs and one call of `torch.add` 7.22 µs: 2.81 times as much, for the same work on the GPU.
#
# The difference is the launch. On the committed H200 run a Triton kernel that does nothing at all cost the
# host 16.0 µs per launch, and a PyTorch op on a single element 9.19 µs. A kernel that runs for two microseconds
# is priced by how it is launched, and ours is launched from Python. Only at tens of millions of elements do
# the bytes outweigh the launch, and there the two clocks and the two kernels meet.
#
# These launch prices matter for the rest of the series: a model that generates one token at a time makes
# hundreds of small calls per token, and later chapters use the prices recorded here to predict what swapping
# in our kernels will cost.
#
# ## The blog's claim (T4)
#
# The blog's first kernel was this same addition. On its T4 it measured 0.084 ms for its kernel against
# 0.046 ms for `torch.add`, 1.81x slower. The post gives neither the length of the vectors, nor their dtype, nor
# how it timed them. Two explanations would fit: a kernel that moves its bytes more slowly than PyTorch's (a
# difference on the GPU clock), or a timing that let the host's work of launching into the measurement (a
# difference on the host clock). This chapter measures both clocks, so you can see which of the
# two a kernel like this one pays.
#
# ## The idea
#
# Adding two vectors is the "hello world" of GPU programming: read two numbers, add them, write one back, a
# million times over. It is the cleanest place to see the two costs every later chapter plays with:
#
# - **the launch**: a fixed price paid on the host (the CPU) every time Python asks the GPU to run a kernel. Our
#   launcher checks its inputs, allocates the output and computes the grid, in Python; Triton's runtime then
#   packs the arguments and hands the kernel to the CUDA driver. PyTorch does the same work in C++, behind one
#   Python call.
# - **the bytes**: adding $n$ fp16 elements reads $2n$ of them and writes $n$, $6n$ bytes in all, for $n$
#   additions. One addition per six bytes is nothing for a GPU: the speed of memory decides how long a large
#   addition takes.
#
# **The prediction.** On the GPU clock, both kernels move the same bytes with one launch each, so they should
# take about the same time. On the host clock ours should cost more per call, because its launcher is Python,
# and at $2^{20}$ elements (6.3 MB, which an H200 moves in a microsecond or two) the launch, not the bytes, sets
# the pace of back-to-back calls. Only once the GPU needs longer for one call than the host needs to launch it
# (tens of microseconds: tens of millions of elements on an H200, about a million on a T4) should the host
# clock follow the GPU clock.
#
# Our kernel is not meant to beat `torch.add`. The point is to see where the time goes, and on which clock.

# %% tags=["hide-input"]
#@title Setup (run it first) { display-mode: "form" }
# Setup: find the repository (or fetch it on a fresh Colab runtime), install what is missing.
# Written by tools/sync_notebooks.py from colab_setup.py: edit it there, not here.
import os, pathlib, subprocess, sys
REPO_URL = os.environ.get("SLOWER_REPO_URL", "https://github.com/slower-on-purpose/slower-on-purpose")
BRANCH = os.environ.get("SLOWER_BRANCH", "main")
ROOT = next((p for p in [pathlib.Path.cwd(), *pathlib.Path.cwd().parents]
             if (p / "helpers.py").is_file() and (p / "slower_kernels").is_dir()), None)
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
import math

import matplotlib.pyplot as plt
import pandas as pd
import torch
import triton
from IPython.display import display

import helpers
import slower_kernels
from slower_kernels.add import add_kernel
from slower_kernels.configs import ELEMENTWISE_BLOCK_SIZE

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES
N = SIZES.add_n  # the headline size: 2**20 elements in full mode
E = torch.tensor([], dtype=DTYPE).element_size()  # bytes per element
CLOCK = "GPU" if helpers.HAS_GPU else "interpreter"  # the clock of every kernel-against-kernel ratio below
OURS, TORCH = "Triton add", "torch.add"

# %% [markdown]
# ## The kernel
#
# Here is the whole file, `slower_kernels/add.py`: the `@triton.jit` kernel, then the launcher (the plain Python
# function that checks its inputs, allocates the output, decides how many programs to start and launches them),
# and at the end a kernel that does nothing at all, `empty`, which prices a launch on its own further down.

# %%
display({"text/plain": inspect.getsource(inspect.getmodule(slower_kernels.add))}, raw=True)

# %% [markdown]
# ### Programs, blocks and masks
#
# A Triton kernel is written from the point of view of **one program**: one running instance of the kernel, in
# charge of one block of the data. The launcher starts a *grid* of `cdiv(n_elements, BLOCK_SIZE)` programs
# (rounded up), and they all run the same code; `tl.program_id(axis=0)` (0, 1, 2, ...) is the only thing that
# tells them apart.
#
# - `offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)` is the program's slice of the vector, a whole block
#   of indices at once: a Triton program works on blocks, and the compiler spreads each block over its threads.
# - `mask = offsets < n_elements` guards the last program. When $n$ is not a multiple of `BLOCK_SIZE` its block
#   runs past the end of the vector; the masked-off lanes neither read nor write.
# - `tl.load` and `tl.store` move data between the GPU's main memory and the program's registers; the addition
#   happens in registers.
#
# The programs run on the GPU's **streaming multiprocessors** (SMs): a T4 has 40, an H200 132
# ([chapter 1](01_setup.ipynb#The-GPU-you-are-on)). Each program goes to one SM, which runs several side by side;
# the rest wait for a free place. Inside an SM a program's threads run in **warps** of 32 that execute one
# instruction together. Our launcher leaves Triton's default of 4 warps per program, 128 threads, so each thread
# handles 8 of a block's 1,024 elements, and at $2^{20}$ elements the grid has 1,024 programs.
#
# The cell below replays the offsets and the mask in plain PyTorch for a toy case, 10 elements in blocks of 4.

# %%
toy_n, toy_block = 10, 4
toy = [(pid, pid * toy_block + torch.arange(toy_block)) for pid in range(triton.cdiv(toy_n, toy_block))]
helpers.show(pd.DataFrame([{"program": pid, "offsets": offsets.tolist(), "mask": (offsets < toy_n).int().tolist()}
                           for pid, offsets in toy]).set_index("program"))

# %% [markdown]
# The third program gets offsets 8 to 11, but only 8 and 9 exist: its mask switches the other two lanes off.
# Without it, the program would read and write past the end of the tensors.
#
# ## Is it correct?
#
# Two fresh random vectors whose length is deliberately *not* a multiple of the block size, so that the mask is
# exercised, against `torch.add`. Adding two fp16 numbers rounds the same way whoever does it, so we expect the
# results to be identical, bit for bit.

# %%
torch.manual_seed(0)
n_check = N + 3  # an awkward length: the last block is partly masked
x = torch.randn(n_check, device=DEVICE, dtype=DTYPE)
y = torch.randn(n_check, device=DEVICE, dtype=DTYPE)
ours, theirs = slower_kernels.add(x, y), torch.add(x, y)
helpers.show(pd.DataFrame([{"elements": n_check, "dtype": str(DTYPE)[6:],
                            "max |ours - torch|": (ours.float() - theirs.float()).abs().max().item(),
                            "check": "PASS" if torch.equal(ours, theirs) else "FAIL"}]))
assert torch.equal(ours, theirs), "the add kernel disagrees with torch.add"

# %% [markdown]
# The launcher also refuses what the kernel cannot handle, with a message that names the argument:

# %%
try:
    slower_kernels.add(x, y[:-1])
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# ## What the compiler made
#
# Triton compiles `add_kernel` to **PTX**, NVIDIA's portable assembly language, and `ptxas` (which Triton ships)
# turns that into one GPU generation's machine code. Neither needs the GPU to be there: `helpers.compiler_table`
# compiles the kernel ahead of time, in a separate process on the CPU, for a T4 (`sm_75`) and an H100/H200
# (`sm_90`), as Triton's JIT does for fp16 vectors whose length is a multiple of 16. So this section reads the
# same in every mode. The rows: **registers** per thread (the GPU's fastest storage, 65,536 per SM to share among
# every thread it holds), **shared memory** per program (on-chip memory a program's threads use to exchange
# values), how many **programs** one SM holds at once and which limit sets that, and the PTX instructions that
# touch memory.

# %%
compiled = helpers.compiler_table(["add_kernel"])
helpers.show(compiled.assign(cc="sm_" + compiled["cc"].astype(str)).set_index("cc")[
    ["num_warps", "registers", "shared", "programs_per_sm", "limited_by", "global loads", "widest global load",
     "global stores", "fma"]].T)
ADD_LABEL = compiled["label"].iloc[0]  # the one configuration the launcher uses: BLOCK_SIZE=1024
display({"text/plain": helpers.ptx_excerpt("add_kernel", ADD_LABEL, 90, r"ld\.global|st\.global|add\.f16")},
        raw=True)

# %% [markdown]
# The table is short because the kernel is. A thread needs about 20 registers and no shared memory: its
# threads never exchange a value. An SM keeps at most 64 warps resident on `sm_90` (32 on `sm_75`), so with 4
# warps per program it holds 16 of our programs (8 on a T4): warps, not registers, set the limit. An H200's 132
# SMs hold 2,112 programs at once, so the 1,024 programs of a $2^{20}$-element add run in one wave; a T4's 40
# SMs hold 320, about three waves.
#
# The PTX excerpt is the whole of the work, per thread:
#
# - `ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ]` loads four 32-bit words from global (main) memory
#   into four registers: 16 bytes, the thread's eight fp16 elements of `x`, in one **vectorised** instruction.
#   The next line does the same for `y`.
# - `add.f16x2` adds two pairs of fp16 numbers packed into one 32-bit register: four of them add eight elements.
# - `st.global.v4.b32` writes the eight sums back, 16 bytes at once.
# - `@%p1` in front of a load or store is a **predicate**, the mask: the thread runs the instruction only where
#   `%p1` is true. Because the length is a multiple of 16, the compiler knows a thread's eight elements lie all
#   inside the vector or all past its end, so one predicate guards all eight (exercise 2 breaks that promise).
#
# Three memory instructions and four additions: there is nothing to speed up in the arithmetic. The time goes
# to the launch and to the bytes.
#
# ## Two clocks, every size
#
# A kernel of two microseconds has two different times, and this chapter measures both
# ([how we measure](01_setup.ipynb#How-we-measure) explains the method once for the series):
#
# - **GPU time**: how long the GPU works on one call, replayed from a CUDA graph so that the host is out of the
#   loop. Our add is compared with `torch.add` in shuffled rounds, with `torch.add` against itself as the A/A
#   floor (`helpers.compare_calls`), and judged by the series' one verdict rule.
# - **Host time per call**: the host's wall clock per call when calls run back to back, synchronised before and
#   after the loop (`helpers.host_ms_per_call`). The host cannot issue calls faster than its own work allows,
#   and it waits whenever the GPU falls behind: for a tiny kernel this is the price of the launch, for a large
#   one the GPU time. It is one reading per call and size, with no rounds, so a host-time ratio gets no verdict.
#
# In CPU mode there is only one clock, the Triton interpreter's wall time (numpy doing the kernel's work), set
# against PyTorch's compiled CPU code: read the method there, not the numbers.
#
# One loop measures every size of the sweep, from a few thousand elements to tens of millions, so that all the
# host readings come from the same stretch of the host's life; the headline size, $2^{20}$, is one of its rows.
# The working set of one call is what decides where its bytes come from: three vectors of $n$ elements
# (`moved_bytes` below) that, replayed call after call, stay in the GPU's **L2 cache** (on-chip, shared by all
# SMs: 60 MiB on an H200, 4 MiB on a T4) as long as they fit in it.

# %%
L2 = torch.cuda.get_device_properties(0).L2_cache_size if helpers.HAS_GPU else None
NOMINAL = helpers.NOMINAL_GB_S.get(helpers.SLUG) if helpers.HAS_GPU else None  # main memory, GB/s


def moved_bytes(n):
    """Bytes one add of n elements moves: reads x and y, writes out, 3 * n elements."""
    return 3 * n * E


def measure(size):
    """Both adds at one size: the GPU-clock comparison against torch.add (shuffled rounds, A/A floor), and one
    host reading per call, the median of 5 synchronised loops of 200 calls. In CPU mode the interpreter's rounds
    are the only clock and stand in for the host reading."""
    a, b = (torch.randn(size, device=DEVICE, dtype=DTYPE) for _ in range(2))
    ours, theirs = (lambda: slower_kernels.add(a, b)), (lambda: torch.add(a, b))
    cmp = helpers.compare_calls({OURS: ours}, reference=theirs)
    if helpers.HAS_GPU:
        return cmp, {OURS: helpers.host_ms_per_call(ours), TORCH: helpers.host_ms_per_call(theirs)}
    return cmp, {OURS: cmp.ms[OURS], TORCH: cmp.ms[helpers.REFERENCE]}


SWEEP = sorted(set(SIZES.add_sweep) | {N})
runs = {size: measure(size) for size in helpers.progress(SWEEP, desc="add, every size")}
x, y = (torch.randn(N, device=DEVICE, dtype=DTYPE) for _ in range(2))
launches = {OURS: helpers.launches_per_call(lambda: slower_kernels.add(x, y)),  # kernels in a CUDA graph of one call
            TORCH: helpers.launches_per_call(lambda: torch.add(x, y)) if helpers.HAS_GPU else None}

cmp, host = runs[N]
host_ratio = host[OURS] / host[TORCH] if helpers.HAS_GPU else cmp.ratios[OURS].median  # one clock in CPU mode
setting = f"{N} elements, {str(DTYPE)[6:]}"
how = f"{cmp.clock}, median of {cmp.rounds} shuffled rounds, {setting}"
host_how = f"{helpers.CLOCK_LABELS['host' if helpers.HAS_GPU else 'interpreter']}, one reading, {setting}"
cmp.record(OURS, "add.ratio", f"Triton / torch.add, {setting} (below 1: Triton faster)")
helpers.record("add.triton_ms", cmp.ms[OURS], "ms", f"{OURS}, {how}")
helpers.record("add.torch_ms", cmp.ms[helpers.REFERENCE], "ms", f"{TORCH}, {how}")
helpers.record("add.host_triton_ms", host[OURS], "ms", f"{OURS}, {host_how}")
helpers.record("add.host_torch_ms", host[TORCH], "ms", f"{TORCH}, {host_how}")
helpers.record("add.host_ratio", host_ratio, "x slower", f"Triton / torch.add, {host_how}",
               verdict="" if helpers.HAS_GPU else cmp.verdict(OURS).text)  # no verdict for single readings

# %% [markdown]
# ### At $2^{20}$ elements
#
# The headline row: kernels per call, both clocks, one verdict line for the GPU-time ratio.

# %%
helpers.show(pd.DataFrame({
    "kernels per call": [helpers.fmt(launches[v], 0) for v in (OURS, TORCH)],
    f"{CLOCK} µs per call": [1e3 * cmp.ms[OURS], 1e3 * cmp.ms[helpers.REFERENCE]],
    **({"host µs per call": [1e3 * host[OURS], 1e3 * host[TORCH]]} if helpers.HAS_GPU else {}),
}, index=[OURS, TORCH]))
print(helpers.verdict_line(f"{OURS} / {TORCH}, {cmp.clock}", cmp.ratios[OURS], cmp.floor))
if helpers.HAS_GPU:
    print(f"{OURS} / {TORCH}, host time per call: {host_ratio:.2f} (single readings, no verdict)")
    print("GPU time as on the committed H200 run" if not cmp.verdict(OURS).real else "GPU time unlike the committed H200 run: see below")

# %% [markdown]
# ## The price of one launch
#
# How much of that host time is the launch itself? `helpers.launch_prices` times two launches that do no work,
# each in synchronised loops of thousands of back-to-back calls on the host clock:
#
# - an **empty Triton kernel** (`slower_kernels.empty`, the end of the file above): one program that does
#   nothing, launched through a launcher that checks its argument, as ours do. This prices our launcher's Python
#   and Triton's dispatch.
# - a **one-element PyTorch op** (`x.add_(1)` on a one-element tensor): PyTorch's dispatcher and the CUDA launch.
#
# The table sets each beside the host time of one add call at $2^{20}$ elements, measured above. Each number is a
# single reading, and neither price is a floor under every call: the empty kernel takes one argument where our
# add takes four, and `x.add_(1)` takes its own path through PyTorch's dispatcher.

# %%
prices = helpers.launch_prices()
price_how = f"{prices.clock}, one reading, the median of {5 if helpers.HAS_GPU else 3} loops of {prices.calls}"
helpers.record("add.launch_us_triton", prices.triton_us, "us", f"empty Triton kernel (slower_kernels.empty), {price_how}")
helpers.record("add.launch_us_torch", prices.torch_us, "us", f"one-element PyTorch op (x.add_(1)), {price_how}")
launch_table = pd.DataFrame({"empty launch, host µs": [prices.triton_us, prices.torch_us],
                             "add call, host µs": [1e3 * host[OURS], 1e3 * host[TORCH]]},
                            index=["Triton: empty kernel / our add", "PyTorch: x.add_(1) / torch.add"])
helpers.show(launch_table.assign(**{"call minus launch, µs": lambda t: t["add call, host µs"]
                                    - t["empty launch, host µs"]}))

# %% [markdown]
# ## What it shows
#
# **On the GPU, a tie.** On the committed H200 run our kernel and `torch.add` took 1.829 and 1.828 µs of GPU time
# at $2^{20}$ elements, a ratio of 1.009 with quartiles 0.999-1.025: well inside the series' 5% threshold, so within
# noise. One launch each and the same bytes: for this job, 20 lines of Triton do what PyTorch's own CUDA kernel
# does. (Your verdict line says whether your GPU agrees.)
#
# **On the host, three to one.** On the committed H200 run one call of ours cost the host 20.3 µs against 7.22 µs
# for `torch.add`, a ratio of 2.81, while the GPU worked on each for under 2 µs: both calls are bound by their
# launch, not by the bytes, and the GPU sits idle most of the time. The launch table says where the host time
# goes. On the committed H200 run the empty Triton kernel cost 16.0 µs, most of our call; the rest, 4.33 µs, is our
# launcher's own Python (checking both inputs, allocating the output). For PyTorch the one-element op, 9.19 µs,
# cost more than the whole add call: single readings of calls this short move by a few microseconds, and both
# say the same thing, that PyTorch's call is its launch. So our add is not slow: our *launch* is, about 1.7 times a
# PyTorch launch, and every Triton kernel in this series pays it on every call.
#
# This is also a possible reading of the blog's 1.81x: had its clock let the host's launching in, a kernel that
# ties with `torch.add` on the GPU could still come out slower. We cannot know which clock it used; chapter 8
# sets all of the blog's numbers beside ours.
#
# ## A sweep over sizes
#
# One size tells little. Here are all the sizes of the loop above, each with its own shuffled rounds and A/A
# floor, and the bandwidth achieved on the GPU clock: bytes moved divided by GPU time.
#
# What to expect: for small vectors the GPU time sits at a floor of its own (even an almost empty kernel keeps
# the GPU busy for a microsecond) and the host time at the price of a launch, far above it and flat from size to
# size: **launch-bound**, chapter 1's *overhead-bound* ([three regimes](01_setup.ipynb#Three-regimes)). For large
# vectors the GPU time grows in proportion to $n$ (*memory-bound*), and once it exceeds the launch price the host
# waits for the GPU and its time per call follows the GPU time. While the three vectors fit in L2 the bandwidth
# can exceed the main memory's nominal figure, because the replayed call finds its data in the cache; past L2 it
# measures the main memory.

# %%
rows = []
for size, (c, h) in runs.items():
    gpu_us = {OURS: 1e3 * c.ms[OURS], TORCH: 1e3 * c.ms[helpers.REFERENCE]}
    rows.append({"n": size, "MB moved": moved_bytes(size) / 1e6,
                 "fits L2": "-" if L2 is None else str(moved_bytes(size) <= L2),
                 **{f"{v} {CLOCK} µs": gpu_us[v] for v in (OURS, TORCH)},
                 "ratio": c.ratios[OURS].median, "quartiles": c.ratios[OURS].quartiles,
                 "A/A floor": c.floor.median, "verdict": c.verdict(OURS).text,
                 **{f"{v} host µs": 1e3 * h[v] if helpers.HAS_GPU else math.nan for v in (OURS, TORCH)},
                 "host ratio": h[OURS] / h[TORCH] if helpers.HAS_GPU else math.nan,
                 **{f"{v} GB/s": moved_bytes(size) / gpu_us[v] / 1e3 if helpers.HAS_GPU else math.nan
                    for v in (OURS, TORCH)}})  # bytes / (µs * 1e-6) / 1e9
sweep = pd.DataFrame(rows)
helpers.save_sweep(sweep, "add_sweep")
helpers.show(sweep.set_index("n"))
print("L2 cache MB:", helpers.fmt(L2 and L2 / 1e6, 1), "| nominal main-memory GB/s:", NOMINAL or "-")

# %%
fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(12, 5))
for v, color in ((OURS, "C0"), (TORCH, "C1")):
    ax_t.plot(sweep["n"], sweep[f"{v} {CLOCK} µs"], "o-", color=color, label=f"{v}, {CLOCK} time")
    if helpers.HAS_GPU:
        ax_t.plot(sweep["n"], sweep[f"{v} host µs"], "s--", color=color, label=f"{v}, host time per call")
        ax_bw.plot(sweep["n"], sweep[f"{v} GB/s"], "o-", color=color, label=v)
if helpers.HAS_GPU:
    for ax in (ax_t, ax_bw):  # where the three vectors of one call fill the L2 cache
        ax.axvline(L2 / (3 * E), color="black", ls=":", lw=1, label=f"3 vectors fill the L2 ({L2 / 1e6:.1f} MB)")
    if NOMINAL:
        ax_bw.axhline(NOMINAL, color="grey", ls="--", label=f"nominal main-memory bandwidth, {NOMINAL} GB/s")
    ax_bw.set(ylabel="GB/s (bytes moved / GPU time)", title="How close to the memory's speed does it get?")
else:
    ax_bw.text(0.5, 0.5, "no GPU time in CPU mode:\nno bandwidth to plot", ha="center", va="center")
    ax_bw.set_axis_off()
for ax in (ax_t, ax_bw) if helpers.HAS_GPU else (ax_t,):
    ax.set(xscale="log", yscale="log", xlabel=f"elements per vector ({str(DTYPE)[6:]}; K = 1024, M = 1024²)")
    helpers.plain_log_ticks(ax, "x", SWEEP, [helpers.count_label(n) for n in SWEEP])
    helpers.plain_log_ticks(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
ax_t.set(ylabel="µs per call", title="Where does the launch give way to the bytes?")
fig.suptitle(f"Vector add, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "add_sweep")
plt.show()

# %% [markdown]
# ### What the sweep shows
#
# **The GPU clock never separates the two kernels.** On the committed H200 run the GPU-time ratio stayed between
# 0.986 and 1.020 at all eight sizes, within noise at each. On the committed H200 run our kernel's GPU time grew
# from 1.134 µs at 4K elements to 93.19 µs at 64M, 82 times for 16,384 times the data: at 4K nearly all of it is
# the GPU's fixed cost of running a kernel at all, not the bytes.
#
# **The host clock is flat, then follows the GPU.** From 4K to 4M elements one call of ours cost the host
# between 20.2 and 38.5 µs on the committed H200 run, and `torch.add` between 7.13 and 12.4 µs: the launch
# price, whatever the size. Both dropped together between 256K and 1M elements, where the GPU time barely moved:
# that is the host's own pace changing (single readings, one after another), not the work. At 16M elements the
# GPU time, about 25 µs, passes our launch price and the host starts to wait: on the committed H200 run the
# host-time ratio was already 1.007 there. At 64M elements both calls cost the host about 95 µs against about
# 93 µs of GPU time. Where the bytes rule, our
# launcher's extra microseconds vanish.
#
# **Bandwidth: the cache, then the memory.** Up to 4M elements (25 MB moved) the three vectors fit in the H200's
# 62.9 MB L2 cache, and at 4M the replayed call reached about 6,800 GB/s, above the main memory's nominal
# 4,800 GB/s: those are the cache's rates. From 16M on, the working set outgrows L2 and every call streams from
# main memory: at 64M both kernels moved about 4,300 GB/s, some 90% of the nominal figure. Neither has much left
# to win. On a T4 (4 MB of L2, 320 GB/s) the cache region ends below 1M elements and the bytes take over much
# sooner, at around a million elements or so.
#
# The crossover is a property of the pair, GPU and host: the faster the memory and the slower the host, the
# larger a vector must be before the bytes outweigh the launch. A model decoding one token at a time works on
# vectors of a thousand numbers, far left on this plot, where only the launch counts.
#
# ## Your numbers beside the blog's
#
# `yours` is this run, `h200` the committed H200 run, `blog_t4` the blog's T4 figures, whatever clock a row's
# label names (the post does not say how it timed). The `add.triton_ms`, `add.torch_ms` and `add.ratio` rows are
# GPU time (interpreter time in CPU mode), the `host_` rows host time per call, the `launch_us` rows the empty
# launches.

# %%
helpers.show(helpers.compare("add."))

# %% [markdown]
# ## Try it yourself
#
# Three changes to the add, one at a time, each timed against the unchanged call with `helpers.compare_calls`
# (GPU time in shuffled rounds with the A/A floor; interpreter wall time in CPU mode) on the sweep's largest
# vector, where the bytes, not the launch, should set the time. Guess first: set `answer` to `"faster"`,
# `"slower"` or `"same"` and run the cell; with `answer = None` it only shows the measurement.
#
# **1. A smaller block.** The same kernel with `BLOCK_SIZE=128` instead of 1,024: eight times as many programs
# for the same bytes, and with 4 warps of 32 threads each thread now holds one element instead of eight, too few
# to fill a 16-byte vectorised load. A memory-bound kernel runs only as fast as the bytes it keeps in flight;
# each thread now asks for 2 bytes of each input at a time instead of 16. An H200 needs far more bytes in flight
# than a T4 to keep its memory busy (15 times the bandwidth), so expect **slower**, by more on an H200 than on a
# T4. The interpreter pays per program too.

# %%
BIG = max(SIZES.add_sweep)  # the sweep's largest vector
a, b = (torch.randn(BIG, device=DEVICE, dtype=DTYPE) for _ in range(2))


def add_with_block(x, y, block):
    """The add with a block size of our choosing (the launcher always uses ELEMENTWISE_BLOCK_SIZE)."""
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK_SIZE=block)
    return out


assert torch.equal(add_with_block(a, b, 128), a + b)  # the same sums, whatever the block

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({"BLOCK_SIZE=128": lambda: add_with_block(a, b, 128)},
                            reference=lambda: add_with_block(a, b, ELEMENTWISE_BLOCK_SIZE))
measured = helpers.check_answer(answer, cmp.ratios["BLOCK_SIZE=128"], cmp.floor, change="BLOCK_SIZE=128", clock=cmp.clock)

# %% [markdown]
# **2. A length that is not a multiple of 16.** Add the first `BIG - 1` elements instead of all `BIG`: the same
# bytes to one part in millions. But Triton's JIT compiles a kernel once per *specialisation* of its integer
# arguments, and "a multiple of 16" is one: it let the compiler guard a thread's eight elements with one
# predicate and one `v4` load (see the PTX above). Without that promise every element needs its own mask bit, and
# the loads shrink to one fp16 number each: eight load instructions per input where there was one. Expect it
# **slower** on an H200, whose memory delivers bytes so fast that issuing all those loads becomes the limit; on a
# T4, whose memory is 15 times slower, the loss may be small or within noise. The interpreter has no load
# instructions: expect no difference there.

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
a_odd, b_odd = a[:BIG - 1], b[:BIG - 1]  # views of the same memory, one element shorter
cmp = helpers.compare_calls({"length BIG - 1": lambda: slower_kernels.add(a_odd, b_odd)}, reference=lambda: slower_kernels.add(a, b))
measured = helpers.check_answer(answer, cmp.ratios["length BIG - 1"], cmp.floor, change="length BIG - 1", clock=cmp.clock)

# %% [markdown]
# **3. A strided input.** Give the launcher every second element of a vector twice as long, `x[::2]`: the same
# number of elements, but not next to each other. The kernel walks flat memory, so the launcher first copies such
# an input into a contiguous one (see its docstring): one more kernel, which reads the strided elements (dragging
# their unused neighbours through the memory system) and writes them again. Count the bytes: the copy reads
# `2 x BIG` elements' worth and writes `BIG`, then the add moves its `3 x BIG`: twice the bytes of the plain add.
# Expect **slower** on both GPUs, about twice the time or more. In CPU mode the interpreter's add outweighs
# PyTorch's copy: expect little difference.

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
a_wide = torch.randn(2 * BIG, device=DEVICE, dtype=DTYPE)
cmp = helpers.compare_calls({"strided x": lambda: slower_kernels.add(a_wide[::2], b)}, reference=lambda: slower_kernels.add(a, b))
measured = helpers.check_answer(answer, cmp.ratios["strided x"], cmp.floor, change="strided x", clock=cmp.clock)

# %% [markdown]
# The answers, to read after your own: on the committed H200 run the smaller block was 3.43x slower, the length
# that is not a multiple of 16 2.82x slower, and the strided input 2.65x slower.
#
# ## Takeaway
#
# - A Triton kernel is written for one program; the grid of programs covers the data, and a mask protects the
#   ragged last block. Check it on fresh random data of an awkward length before timing it.
# - Name the clock: on the GPU clock our add ties with `torch.add`; on the host clock it costs about three times
#   as much per call, because a Triton launch from Python costs the host more than a PyTorch op.
# - Small kernels are priced by their launch, large ones by their bytes. A model decoding one token at a time
#   lives among small kernels, so the launch prices recorded here are the cost to watch in every later chapter.
#
# Next, in chapter 3, we write a kernel the model actually uses, RMSNorm, and then make it worse on purpose by
# splitting it in two.
