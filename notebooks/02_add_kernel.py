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
# Our kernel is not meant to beat `torch.add`. The point is to see where the time goes, on which clock, and why.

# %%
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
import statistics
from collections import Counter

import matplotlib.pyplot as plt
import pandas as pd
import torch

import helpers
import slower_kernels

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES

# %% [markdown]
# ## The kernel
#
# Here is the whole file, `slower_kernels/add.py`: the `@triton.jit` kernel first, then the launcher, the plain
# Python function that checks its inputs, allocates the output, decides how many programs to start and
# launches them. At the end of the file sits a kernel that does nothing at all, `empty`: we use it below to
# price a launch on its own.

# %%
print(inspect.getsource(inspect.getmodule(slower_kernels.add)))

# %% [markdown]
# ### Programs, blocks and masks
#
# A GPU kernel is written from the point of view of **one program**: one running instance of the kernel,
# in charge of one block of the data. The launcher starts a *grid* of programs, here
# `cdiv(n_elements, BLOCK_SIZE)` of them, rounded up, and they all run the same code. The only thing that
# tells them apart is `tl.program_id(axis=0)`: 0 for the first, 1 for the second, and so on.
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
# Where do the programs run? A GPU is built from **streaming multiprocessors** (**SMs**), each a processor
# with its own cores, registers and small on-chip memories: a T4 has 40, an H200 132 ([chapter 1](01_setup.ipynb#The-GPU-you-are-on)
# has your GPU's figures beside theirs). The GPU hands each
# program of the grid to one SM, which runs it from start to end, several programs side by side; programs
# beyond what the SMs can hold at once wait for a free place. (CUDA calls a program a *thread block*.)
# Inside the SM a program's threads run in **warps**: groups of 32 threads that execute one instruction
# together, each on its own data. `num_warps`, an option of every Triton launch, sets how many warps one
# program gets; our launcher leaves Triton's default, 4 warps (128 threads), so each thread handles 8 of
# a block's 1024 elements. The **block size** (`BLOCK_SIZE`, a `tl.constexpr`: fixed when the kernel is
# compiled) is therefore a choice with consequences: it sets how many programs the grid has and how many
# elements each thread holds. At $2^{20}$ elements the grid has 1024 programs: about 8 per SM on an H200,
# about 26 on a T4.
#
# The cell below replays the offsets and the mask in plain PyTorch for a toy case, 10 elements in blocks
# of 4, so you can see what each program would touch.

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
ours, theirs = slower_kernels.add(x, y), torch.add(x, y)
max_err = (ours.float() - theirs.float()).abs().max().item()
print(f"{n_check:,} elements of {str(DTYPE)[6:]}, max |ours - torch| = {max_err}")
print("add check:", "PASS" if torch.equal(ours, theirs) else "FAIL")
assert torch.equal(ours, theirs), "the add kernel disagrees with torch.add"

# %% [markdown]
# The launcher also refuses inputs the kernel cannot handle, with a message that names the argument:

# %%
try:
    slower_kernels.add(x, y[:-1])
except ValueError as err:
    print("ValueError:", err)

# %% [markdown]
# ## What the compiler made
#
# Triton turns the Python of `add_kernel` into **PTX**, NVIDIA's portable assembly language, and `ptxas`
# (the assembler Triton ships) turns that into the machine code of one GPU generation. Neither needs the
# GPU to be there: `helpers.compiler_table` compiles the kernel ahead of time, in a separate process (on
# the CPU if need be, so this section reads the same in every mode), for a T4 (`sm_75`, compute
# capability 7.5) and an H100/H200 (`sm_90`), each target named after its GPU generation's compute capability
# ([chapter 1](01_setup.ipynb#The-GPU-you-are-on)). It compiles the kernel as Triton's JIT does at run time for
# fp16 data whose length is a multiple of 16 (the exercises at the end change that), and reads off:
#
# - **registers per thread**: the fastest storage of the GPU, private to each thread, where `x`, `y` and
#   their sum live between the load and the store. An SM has 65,536 32-bit registers to share among every
#   thread it holds, so a kernel that needs many per thread leaves room for fewer programs;
# - **shared memory per program**: a small on-chip memory in each SM that the threads of one program
#   share, the way they hand values to each other. A kernel whose threads never need each other's data,
#   like this one, uses none;
# - **programs per SM**: how many programs of this kernel one SM can hold at once, and the limit that sets
#   it: warps (an SM keeps a fixed number of warps resident), programs, registers or shared memory;
# - the **instruction mix**: how many global-memory loads and stores, shared-memory loads and stores and
#   fused multiply-adds (`fma`) the PTX contains, each counted once as written (not as often as it runs),
#   and how wide the loads are. A **vectorised load** fills several registers of a thread from
#   neighbouring addresses with one instruction: `ld.global.v4.b32` reads four 32-bit words, 16 bytes,
#   eight fp16 numbers at once. Fewer, wider instructions move the same bytes with less work for the SM.

# %%
from slower_kernels import aot
from slower_kernels.configs import ELEMENTWISE_BLOCK_SIZE

ADD_LABEL = f"BLOCK_SIZE={ELEMENTWISE_BLOCK_SIZE}"  # the one configuration the launcher uses
CC_SLUG = {75: "t4", 90: "h200"}  # the GPU of each target in helpers.GPU_SPECS (an H100 has 132 SMs too)
PROPERTIES = {"num_warps": "warps per program (num_warps)", "registers": "registers per thread",
              "shared": "shared memory per program (bytes)", "programs_per_sm": "programs per SM at once",
              "limited_by": "... limited by", "global loads": "global loads (PTX instructions)",
              "widest global load": "widest global load", "global stores": "global stores",
              "shared loads": "shared-memory loads", "shared stores": "shared-memory stores", "fma": "fma"}


def side_by_side(table):
    """``helpers.compiler_table`` rows as one column per kernel and target, one row per property."""
    names = table["kernel"].nunique() > 1
    columns = {(f"{k.removesuffix('_kernel')}, " if names else "") + f"sm_{cc}": row
               for k, cc, row in zip(table["kernel"], table["cc"], table[list(PROPERTIES)].to_dict("records"))}
    return pd.DataFrame(columns).rename(index=PROPERTIES).rename_axis("compiled for")


compiled = helpers.compiler_table(["add_kernel"])
helpers.show(side_by_side(compiled))
print(f"add_kernel, {ADD_LABEL}, fp16; sm_75: {aot.SM_LIMITS[75]['gpu']}, sm_90: {aot.SM_LIMITS[90]['gpu']}; "
      "instructions counted as written in the PTX (static counts)")


# %%
def load_bytes(width: str) -> int:
    """Bytes one global load of this width moves: 'v4' is four 32-bit words, 'scalar' one fp16 number."""
    return 4 * int(width[1:]) if width.startswith("v") else 2


def plural(count: int, word: str) -> str:
    """'1 global load', '2 global loads'."""
    return f"{count} {word}" + ("" if count == 1 else "s")


def vector_words(width: str) -> str:
    """'v4' as '16 bytes, 8 fp16 numbers per instruction'."""
    return f"{load_bytes(width)} bytes, {plural(load_bytes(width) // 2, 'fp16 number')} per instruction"


def occupancy_words(row) -> str:
    """Programs per SM for one target, the limit that sets it, and what the grid at SIZES.add_n makes of it."""
    limits, spec = aot.SM_LIMITS[row["cc"]], helpers.GPU_SPECS[CC_SLUG[row["cc"]]]
    threads = 32 * row["num_warps"]
    per_warp = -(-row["registers"] // 8) * 8 * 32  # registers are handed out per warp, 8 per thread at a time
    by_registers = limits["registers"] // (per_warp * row["num_warps"])
    at_once = row["programs_per_sm"] * spec["SMs"]
    grid = -(-SIZES.add_n // ELEMENTWISE_BLOCK_SIZE)
    waves = grid / at_once
    return (f"on sm_{row['cc']} ({spec['name']}) a thread needs {row['registers']} registers, so the registers "
            f"alone would let {by_registers} programs of {threads} threads share an SM; the limit that binds is "
            f"**{row['limited_by']}**: {row['programs_per_sm']} programs per SM (an SM holds at most "
            f"{limits['max_warps']} warps and {limits['max_programs']} programs). With {spec['SMs']} SMs, "
            f"{at_once:,} programs run at once, so the {grid:,} programs of this run's {SIZES.add_n:,}-element add "
            + ("all fit in one wave" if waves <= 1 else f"take {waves:.1f} waves, one after the other"))


lines = []
for width, rows in compiled.groupby("widest global load"):
    targets = " and ".join(f"sm_{cc}" for cc in rows["cc"])
    per_thread = ELEMENTWISE_BLOCK_SIZE // (32 * int(rows["num_warps"].iloc[0]))  # elements of one thread
    loads, stores = int(rows["global loads"].max()), int(rows["global stores"].max())
    per_input = max(1, per_thread * 2 // load_bytes(width))  # load instructions per thread and input
    lines.append(f"For {targets} the PTX holds {plural(loads, 'global load')} and {plural(stores, 'global store')}, "
                 f"the widest `{width}`: {vector_words(width)}. A program of {ELEMENTWISE_BLOCK_SIZE:,} elements "
                 f"has {32 * int(rows['num_warps'].iloc[0])} threads, {per_thread} elements each, so each thread "
                 f"reads its share of `x` with {plural(per_input, 'load instruction')}, `y` the same, and writes "
                 "its sums the same way.")
shared = sorted(set(compiled["shared"]))
lines.append("It uses " + ("no shared memory at all: its threads never exchange a value. " if shared == [0] else
                           f"{' or '.join(map(str, shared))} bytes of shared memory per program. ")
             + ("No `fma` and no tensor-core `mma`: the only arithmetic is the addition itself."
                if not (compiled["fma"].any() or compiled["tensor-core mma"].any()) else
                f"It also holds {compiled['fma'].max()} `fma` and {compiled['tensor-core mma'].max()} `mma`."))
lines.append("Programs per SM: " + "; ".join(occupancy_words(row) for _, row in compiled.iterrows()) + ".")
helpers.md("\n\n".join(lines))

# %% [markdown]
# Here are those lines of the PTX for `sm_90`, picked out by a pattern (`helpers.ptx_excerpt`): the two
# loads, the additions and the store, nothing else.

# %%
print(helpers.ptx_excerpt("add_kernel", ADD_LABEL, 90, r"ld\.global|st\.global|add\.f16"))

# %% [markdown]
# How to read them:
#
# - `@%p1` in front of an instruction is a **predicate**: the thread runs it only where the register `%p1`
#   holds true. That is the mask, `offsets < n_elements`, decided once for all of a thread's elements
#   (the compiler may, because the length is a multiple of 16: a group of eight either lies wholly inside
#   the vector or wholly past its end).
# - `ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ]` loads four 32-bit words from the global
#   (main) memory address in `%rd1` into four registers: 16 bytes, eight fp16 elements of `x`, in one
#   instruction. The next line does the same for `y`.
# - `add.f16x2` adds two pairs of fp16 numbers packed in one 32-bit register, so a few of them add all of
#   a thread's elements.
# - `st.global.v4.b32` writes the sums back, 16 bytes at a time.
#
# So per thread the whole kernel is a handful of instructions around three memory accesses: there is
# nothing to make faster in the arithmetic, and the time goes to the launch and the bytes, as the rest of
# the chapter measures.

# %% [markdown]
# ## How long does it take? A prediction first
#
# At the headline size, $2^{20}$ elements on a GPU in full mode, the addition moves $3 \times n$ elements
# of 2 bytes each (fp16): it reads $x$ and $y$ and writes the output. Where those bytes come from matters.
# Between the GPU's cores and its main memory (HBM on an H200, GDDR6 on a T4: chapter 1) sits the **L2
# cache**, an on-chip memory shared by all the SMs that keeps recently used data, tens of megabytes on an
# H200, a few on a T4. The GPU clock below replays the same call over and over on the same three tensors;
# when they fit in L2 they are still there at the next call, and the main memory's nominal bandwidth no
# longer bounds the time. So the prediction depends on one comparison: the working set
# (3 x n x element size) against the L2 cache's size, which the next cell reads from the GPU.

# %%
n = SIZES.add_n
element_bytes = torch.tensor([], dtype=DTYPE).element_size()
L2_BYTES = torch.cuda.get_device_properties(0).L2_cache_size if helpers.HAS_GPU else None
nominal = helpers.NOMINAL_GB_S.get(helpers.SLUG) if helpers.HAS_GPU else None


def working_set(size):
    """Bytes one call moves: read x, read y, write out."""
    return 3 * size * element_bytes


def mb(nbytes) -> str:
    """Bytes as megabytes for prose: '6.29 MB', '62.9 MB'."""
    return f"{nbytes / 1e6:.3g} MB"


def in_l2(size) -> bool:
    """Whether the three tensors fit in the GPU's L2 cache together (never, in CPU mode)."""
    return L2_BYTES is not None and working_set(size) <= L2_BYTES


moved = working_set(n)
print(f"n = {n:,} elements, {mb(moved)} moved per call")
if L2_BYTES is None:
    print("CPU mode: no GPU memory, no L2 cache, no bandwidth to compare with")
else:
    print(f"L2 cache of this GPU: {mb(L2_BYTES)} ({L2_BYTES / 2**20:.0f} MiB, as chapter 1's table gives it): the "
          f"working set {'fits in it' if in_l2(n) else 'exceeds it'}")
    if nominal and not in_l2(n):
        print(f"streamed from main memory at the nominal {nominal} GB/s, this takes at least "
              f"{moved / (nominal * 1e9) * 1e6:.3g} µs of GPU time")
    elif nominal:
        print(f"replayed back to back, the call finds its tensors in L2: the main memory's nominal {nominal} GB/s "
              f"({moved / (nominal * 1e9) * 1e6:.3g} µs of GPU time for these bytes) is no floor for it")

# %% [markdown]
# ### Two clocks
#
# "How long does a kernel take" has two answers, and for a kernel of a few microseconds they differ a lot.
#
# - **GPU time**: how long the GPU works on one call. `triton.testing.do_bench_cudagraph` records the call
#   into a CUDA graph (a recorded sequence of kernels that the GPU replays from a single launch, [chapter
#   1](01_setup.ipynb#Three-regimes)) and replays it, so the host, Python and the launcher are out of the
#   loop: what is left is the kernel itself.
# - **Host time per call**: the host's wall clock per call when calls run back to back, with a
#   synchronisation before and after the loop. The host cannot issue calls faster than its own work on
#   each allows, and it has to wait for the GPU whenever the GPU falls behind, so this is the slower of
#   the two: the launch price for a tiny kernel, the GPU time for a large one.
#
# A kernel of one or two microseconds is short enough for the GPU clock's own noise to matter, so one
# timing of each is not a comparison. `helpers.compare_calls` times the two additions in rounds: every
# round replays our kernel, `torch.add`, and `torch.add` *again*, in a shuffled order. The ratio of
# `torch.add` to itself (an *A/A* test) is this clock's noise floor, measured in the same run. The
# verdict (`helpers.verdict`, one rule for the whole series) calls a ratio "slower" or "faster" only when
# it lies further from 1 than twice that floor's distance from 1 *and* than the series' smallest real
# effect, 5%, with the middle half of the rounds on one side of 1; when it says "within noise", its
# `reason` names the rule that held the difference back. Host time comes from `helpers.host_ms_per_call`:
# one reading per call and size, the median of 5 synchronised loops of 200 calls, with no rounds and no A/A
# floor, so a host-time ratio below is shown as a single reading, without a verdict. The kernels one call
# launches come from `helpers.launches_per_call`, which reads them from a CUDA graph of one call (its kernel
# nodes) rather than from a profile: a profile leaves NVIDIA's profiling interface (CUPTI) attached to the
# process, and it adds host time to every later launch, so the series times first and profiles after.
# (Triton's own tutorials use `triton.testing.do_bench`: it records a GPU event before and after each
# call, with a cache-clearing kernel in between. The start event fires on the GPU as soon as the GPU gets
# there, so if the host is still busy launching the kernel, that wait is counted: for a microsecond kernel
# `do_bench` sees part of the launch, more on a slow host, less on a fast one. It mixes the two clocks.)
# In CPU mode there is a single clock, the interpreter's wall time: numpy doing the kernel's work.
#
# **The prediction.** Both kernels read and write the same bytes, so on the GPU clock they should take
# about the same time. On the host clock our kernel should cost more per call: our launcher is Python
# (input checks, allocating the output, Triton's dispatch), and at this size the launch, not the bytes,
# sets the pace of back-to-back calls.
#
# What sets that pace gets three words in this chapter, read from the two clocks at each size. A call is
# **launch-bound** when the GPU works less than half of its host time: [chapter 1](01_setup.ipynb#Three-regimes)'s
# *overhead-bound*. It is **GPU-bound** when its host time is within noise of its GPU time, the host
# waiting for the GPU: for an add, 1 flop per 6 bytes, that is chapter 1's *memory-bound*. In between,
# **mixed**: the GPU works for half the host time or more, and the launch still adds more than noise to it.
#
# We measure every size of this chapter's sweep now, in one loop, so that all the host times come from the
# same stretch of the host's life; the headline size is one row of it, read here, and the sweep further
# down reads the other rows. Nothing is timed twice.

# %%
OURS, TORCH = "Triton add", "torch.add"
HOST_CLOCK = helpers.CLOCK_LABELS["host" if helpers.HAS_GPU else "interpreter"]
HOST_CALLS, HOST_LOOPS = 200, 5  # a host reading: the median of HOST_LOOPS synchronised loops of HOST_CALLS calls
HOST_READING = (f"one reading, the median of {HOST_LOOPS} synchronised loops of {HOST_CALLS} calls"
                if helpers.HAS_GPU else "the median of the comparison's shuffled rounds")


def measure(size):
    """Both additions at one size: GPU time against torch.add with its A/A floor (compare_calls), and host
    time per call. In CPU mode the comparison's interpreter wall time is the only clock, so it is not
    measured a second time."""
    a = torch.randn(size, device=DEVICE, dtype=DTYPE)
    b = torch.randn(size, device=DEVICE, dtype=DTYPE)
    ours, theirs = (lambda: slower_kernels.add(a, b)), (lambda: torch.add(a, b))
    calls = helpers.compare_calls({OURS: ours}, theirs)
    if helpers.HAS_GPU:
        host = {OURS: helpers.host_ms_per_call(ours, HOST_CALLS, HOST_LOOPS),
                TORCH: helpers.host_ms_per_call(theirs, HOST_CALLS, HOST_LOOPS)}
    else:
        host = {OURS: calls.ms[OURS], TORCH: calls.ms[helpers.REFERENCE]}
    return calls, host


SWEEP = sorted(set(SIZES.add_sweep) | {n})  # the headline size is one of the sweep's points
measured = {size: measure(size) for size in helpers.progress(SWEEP, desc="add, every size")}

x = torch.randn(n, device=DEVICE, dtype=DTYPE)
y = torch.randn(n, device=DEVICE, dtype=DTYPE)
launches = {OURS: helpers.launches_per_call(lambda: slower_kernels.add(x, y)),
            TORCH: helpers.launches_per_call(lambda: torch.add(x, y)) if helpers.HAS_GPU else None}

calls, host = measured[n]
kernel_ms = {OURS: calls.ms[OURS], TORCH: calls.ms[helpers.REFERENCE]}  # GPU time (interpreter in CPU mode)
gpu_ratio, floor, gpu_verdict = calls.ratios[OURS], calls.floor, calls.verdict(OURS)
if helpers.HAS_GPU:  # one host reading of each: a ratio, but no verdict (no rounds, no spread)
    host_ratio, host_verdict = host[OURS] / host[TORCH], None
else:  # one clock: the comparison's ratio (shuffled rounds) is the host-time ratio too
    host_ratio, host_verdict = gpu_ratio.median, gpu_verdict

setting = f"{n} elements, {str(DTYPE)[6:]}"
calls.record(OURS, "add.ratio", f"Triton / torch.add, {setting} (below 1: Triton faster)")
rounds_note = f"{calls.clock}, median of {calls.rounds} shuffled rounds, {setting}"
helpers.record("add.triton_ms", kernel_ms[OURS], "ms", f"{OURS}, {rounds_note}")
helpers.record("add.torch_ms", kernel_ms[TORCH], "ms", f"{TORCH}, {rounds_note}")
helpers.record("add.host_triton_ms", host[OURS], "ms", f"{HOST_CLOCK}, {HOST_READING}, {setting}")
helpers.record("add.host_torch_ms", host[TORCH], "ms", f"{HOST_CLOCK}, {HOST_READING}, {setting}")
helpers.record("add.host_ratio", host_ratio, "x slower", f"Triton / torch, {HOST_CLOCK}, {HOST_READING}",
               verdict=host_verdict.text if host_verdict else "")  # no verdict for a single reading


def us(ms):
    """Milliseconds to microseconds, for the table; None (no GPU clock) stays None."""
    return None if ms is None else 1e3 * ms


helpers.show(pd.DataFrame([
    {"version": version, "kernels per call": helpers.fmt(launches[version], 0),
     "GPU µs": helpers.fmt(us(kernel_ms[version]) if helpers.HAS_GPU else None, 2),
     ("host µs per call (one reading)" if helpers.HAS_GPU else "interpreter µs per call"):
         round(us(host[version]), 2)}
    for version in (OURS, TORCH)
]))
print(f"{calls.clock}, ratio Triton / torch.add: median {gpu_ratio.median_text} of {calls.rounds} shuffled rounds "
      f"(quartiles {gpu_ratio.quartiles}); torch.add against itself {floor.median:.3f} "
      f"({floor.quartiles}); verdict: {gpu_verdict.text}"
      + (f" ({gpu_verdict.reason})" if not gpu_verdict.real else ""))
if helpers.HAS_GPU:
    print(f"{HOST_CLOCK}, ratio Triton / torch.add: {host_ratio:.2f} ({HOST_READING} each: no rounds, no spread, "
          "so no verdict)")
print("kernels per call: the kernel nodes of a CUDA graph of one call" if helpers.HAS_GPU else f"kernels per call: {helpers.launch_note('call')}")

# %% [markdown]
# ## The price of one launch
#
# How much of that host time is the launch itself? `helpers.launch_prices` measures two launches that do
# no work, each in synchronised loops of thousands of back-to-back calls, on the host clock:
#
# - an **empty Triton kernel** (`slower_kernels.empty`, the last function of `slower_kernels/add.py` above): one program
#   that does nothing, launched through a launcher that checks its argument, as ours do. This is the
#   price of our launcher's Python and Triton's dispatch;
# - a **one-element PyTorch op** (`x.add_(1)` on a one-element tensor): PyTorch's dispatcher and the CUDA
#   launch, with no work worth the name.
#
# Every kernel pays its launch price before it runs. The later chapters use these two numbers: chapter 3
# prices the launches of its RMSNorm swap with them before measuring it, and chapter 8 sets them beside the
# price of each module call, ours and the original's, each timed on its own. Each is one host reading (the median of a few
# synchronised loops, no rounds), so a small difference between the two is read against how far single
# host readings move, never as a finding of its own.
#
# Each prices *a* launch; neither is a floor under every call. The one-element op is an in-place add of a
# Python number, which takes its own path through PyTorch's dispatcher, a path that can cost the host more
# or less than `torch.add` of two tensors; the empty Triton kernel takes one argument where our add takes
# four. So a real call can come out cheaper than its "empty" launch, and the readings below say where it
# did, and by how much.

# %%
def num(value) -> str:
    """A time or a rate for prose, to three significant digits: 0.00612, 1.83, 13.0, 245, 4,308."""
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".")  # '#' keeps the zeros that count (13.0), rstrip the point of '245.'


prices = helpers.launch_prices()
PRICE_LOOPS = 5 if helpers.HAS_GPU else 3  # the loops helpers.host_ms_per_call takes the median of
price_reading = f"one reading, the median of {PRICE_LOOPS} loops of {prices.calls}"
helpers.record("add.launch_us_triton", prices.triton_us, "us",
               f"empty Triton kernel (slower_kernels.empty), {prices.clock}, {price_reading}")
helpers.record("add.launch_us_torch", prices.torch_us, "us",
               f"one-element PyTorch op (x.add_(1)), {prices.clock}, {price_reading}")
print(f"one empty Triton launch:   {num(prices.triton_us):>8} µs")
print(f"one one-element torch op:  {num(prices.torch_us):>8} µs")
print(f"clock: {prices.clock}; one reading each: the median of {PRICE_LOOPS} loops of {prices.calls:,} calls")


# %%
def gb_s(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9  # bytes moved / seconds, in GB/s


REGIME_RULE = ("launch-bound where the GPU works less than half of a call's host time (chapter 1's overhead-bound); "
               "GPU-bound where the host time is within noise of the GPU time, the host waiting for the GPU (for an "
               "add, chapter 1's memory-bound); mixed in between")
REGIME_WHY = {  # one regime's reason, for prose that has just named the regime (REGIME_RULE would repeat the word)
    "launch-bound": "chapter 1's overhead-bound: the GPU works less than half of a call's host time",
    "mixed": "the GPU works half of a call's host time or more, and the launch still adds more than noise to it",
    "GPU-bound": ("for an add, chapter 1's memory-bound: the host time is within noise of the GPU time, the host "
                  "waiting for the GPU"),
}


def regime(host_us, gpu_us) -> str:
    """What sets the pace of back-to-back calls at one size, read from its two times (``REGIME_RULE``):
    'launch-bound', 'mixed' or 'GPU-bound'. Within noise goes by ``helpers.verdict``, the series' one rule."""
    v = helpers.verdict(host_us / gpu_us)
    if not v.real or v.ratio < 1:  # the host time never drops below the GPU time for long: it waits
        return "GPU-bound"
    return "launch-bound" if host_us > 2 * gpu_us else "mixed"


def times_us(size, version):
    """(host µs per call, GPU µs per call) of one version at one size of the sweep."""
    c, h = measured[size]
    return us(h[version]), us(c.ms[OURS if version == OURS else helpers.REFERENCE])


def both_launch_bound() -> dict:
    """size -> host-time ratio (ours over torch.add's, single readings) at the sizes where both calls are
    launch-bound: there the ratio compares the two launch costs."""
    return {size: times_us(size, OURS)[0] / times_us(size, TORCH)[0] for size in measured
            if regime(*times_us(size, OURS)) == regime(*times_us(size, TORCH)) == "launch-bound"}


def launch_bound_readings(version) -> list:
    """The host readings (µs per call) of ``version`` at the sizes where it is launch-bound: there each reading
    prices the launch, so together they show how much one host reading moves from one measurement to the next."""
    return [times_us(size, version)[0] for size in measured if regime(*times_us(size, version)) == "launch-bound"]


PRICE_US = {OURS: prices.triton_us, TORCH: prices.torch_us}  # each version's empty launch, host clock
WHO = {OURS: "ours", TORCH: "`torch.add`"}  # the versions as the prose names them
POSSESSIVE = {OURS: "Our kernel's", TORCH: "`torch.add`'s"}  # the same, opening a sentence as an owner


def and_list(items) -> str:
    """'a', 'a and b', 'a, b and c' ('' for none)."""
    items = list(items)
    if not items:
        return ""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def size_list(sizes) -> str:
    """Sizes as '4K, 16K elements' (a list or a pandas Series: never tested for truth, which a Series refuses)."""
    sizes = [int(s) for s in sizes]
    return (", ".join(helpers.count_label(s) for s in sizes) + " elements") if sizes else "no size"


def span(values) -> str:
    """'19.1 to 25.5' (or one number where they are all the same)."""
    lo, hi = min(values), max(values)
    return num(lo) if num(lo) == num(hi) else f"{num(lo)} to {num(hi)}"


def scatter(readings_us) -> float:
    """How far single host readings of one call moved across its launch-bound sizes (highest minus lowest, µs):
    this chapter's measure of the host's variation between readings (0 with fewer than two)."""
    return max(readings_us) - min(readings_us) if len(readings_us) > 1 else 0.0


def against_price(name, reading_us, price_us, readings_us, on_top) -> str:
    """One host reading of a call beside its empty launch's price, both single readings; the call's cost is then
    read from the median of its launch-bound readings (``flat_median``), not from this one reading, which may be
    the one that moved: that median against the price, judged against the spread of those readings
    (``scatter``). A difference inside that spread is no finding."""
    text = (f"{name}: {num(reading_us)} µs per call against {num(price_us)} µs for its empty launch, "
            f"{num(abs(reading_us - price_us))} µs {'more' if reading_us > price_us else 'less'}, both single readings")
    if len(readings_us) < 2:
        return text + ("; with no second launch-bound reading of the call to say how far one moves, the difference "
                       "is no finding. ")
    mid, spread_us = statistics.median(readings_us), scatter(readings_us)
    diff = mid - price_us
    span = (f"{num(spread_us)} µs ({num(min(readings_us))} to {num(max(readings_us))} µs at its "
            f"{len(readings_us)} launch-bound sizes)")
    text += (f". One reading can move (below), so the call's cost is read from the median of its launch-bound "
             f"readings, {num(mid)} µs, {num(abs(diff))} µs {'above' if diff > 0 else 'below'} the price")
    if abs(diff) <= spread_us:
        return text + (f"; those readings spread over {span}, and a difference inside that variation of the host is "
                       "no finding either way. ")
    if diff > 0:
        return text + f", more than those readings' spread, {span}: {on_top} comes on top of the launch. "
    return text + (f", more than those readings' spread, {span}. The empty launch is no floor under the call (it "
                   "takes another path, see above), and the two come from different loops "
                   f"({prices.calls:,} calls against {HOST_CALLS}) at different moments. ")


def prices_against_each_other() -> str:
    """The two empty-launch prices side by side: single readings, their difference read against the spread of
    each version's launch-bound readings (the larger of the two), never as a finding of its own."""
    diff = prices.triton_us - prices.torch_us
    spread_us = max(scatter(launch_bound_readings(v)) for v in (OURS, TORCH))
    text = (f"The two prices differ by {num(abs(diff))} µs (the empty Triton launch "
            f"{'above' if diff > 0 else 'below'} the one-element PyTorch op), one reading each. ")
    if spread_us == 0.0:
        return text + "This run has no spread of readings to set that against, so the order is no finding. "
    if abs(diff) <= spread_us:
        return text + (f"Single readings of one launch-bound call moved by up to {num(spread_us)} µs across this "
                       f"chapter's sweep: a difference of {num(abs(diff))} µs is inside the host's variation, so "
                       "this chapter calls neither launch the dearer. ")
    return text + (f"That is more than single readings of one launch-bound call moved across this chapter's sweep "
                   f"(up to {num(spread_us)} µs), so on this host the "
                   f"{'Triton launch' if diff > 0 else 'PyTorch op'} cost more, by one reading of each. ")


def host_step(version):
    """``version``'s launch-bound host readings split, in size order, into the sizes below a step and those above
    it, where the sweep shows one: the medians of the two groups differ by more than the series' smallest real
    effect (``helpers.verdict``) and by more than the flat prediction's bar (``helpers.PREDICTION_BAR``), each
    group holds at least two sizes, and the nearest readings across the split lie further apart than either group's
    own readings (highest over lowest). The clearest such split, as (sizes below, sizes above), or None."""
    bound = sorted(size for size in measured if regime(*times_us(size, version)) == "launch-bound")
    host_of = {size: times_us(size, version)[0] for size in bound}
    best = None
    for k in range(2, len(bound) - 1):  # two sizes at least on each side: one odd reading is no step
        below, above = [host_of[s] for s in bound[:k]], [host_of[s] for s in bound[k:]]
        high, low = (below, above) if statistics.median(below) > statistics.median(above) else (above, below)
        gap = min(high) / max(low)  # the nearest readings across the split
        within = max(max(high) / min(high), max(low) / min(low))
        apart = statistics.median(high) / statistics.median(low)
        if (gap > within and apart > 1 + helpers.PREDICTION_BAR and helpers.verdict(apart).real
                and (best is None or gap > best[0])):
            best = (gap, bound[:k], bound[k:])
    return None if best is None else (best[1], best[2])


def step_side(version, size) -> str | None:
    """'higher' or 'lower': which group of ``host_step(version)`` holds ``size`` (None: no step, or not there)."""
    step = host_step(version)
    if step is None or not any(size in group for group in step):
        return None
    medians = [statistics.median(times_us(s, version)[0] for s in group) for group in step]
    mine = 0 if size in step[0] else 1
    return "higher" if medians[mine] > medians[1 - mine] else "lower"


def beside_bar(ratio, bar=1 + helpers.PREDICTION_BAR) -> str:
    """A ratio to 2 decimals, more (up to 4) where it would print as the bar itself: 1.197 must not read 1.20 beside
    a 20% bar."""
    return f"{ratio:.{helpers.places_apart(ratio, (bar,))}f}"


def flat_median(version) -> float:
    """The median of ``version``'s launch-bound host readings (µs): where the flat launch price predicts them all."""
    return statistics.median(launch_bound_readings(version))


def off_flat(version) -> dict:
    """size -> (host µs, GPU µs) of the launch-bound readings of ``version`` more than ``helpers.PREDICTION_BAR``
    away from its median launch-bound reading (either side): where the flat launch price the sweep predicts did
    not hold. The same rule as chapter 3's flat host-time prediction."""
    bound = {size: times_us(size, version) for size in measured if regime(*times_us(size, version)) == "launch-bound"}
    if len(bound) < 2:
        return {}
    mid = flat_median(version)
    return {size: t for size, t in bound.items() if abs(t[0] / mid - 1) > helpers.PREDICTION_BAR}


def bandwidth_reading(size, ms_ours, ms_torch) -> str:
    """What the GB/s of one size say, given where its working set lives (L2 or main memory)."""
    nbytes = working_set(size)
    rates = gb_s(nbytes, ms_ours), gb_s(nbytes, ms_torch)
    text = f"By GPU time that is {num(rates[0])} GB/s for ours and {num(rates[1])} GB/s for PyTorch's. "
    if in_l2(size):
        return text + (
            f"The three tensors, {mb(nbytes)}, fit in this GPU's {mb(L2_BYTES)} L2 cache, and the "
            "replayed call finds them there: these are the cache's rates, not the main memory's"
            + (f" (the main memory's nominal {nominal} GB/s is " + ("below them" if max(rates) > nominal else
                                                                    "no floor for them") + ")" if nominal else "")
            + ". The sweep below compares with the main memory only where the working set outgrows L2. ")
    if not nominal:
        return text + "(This GPU's nominal bandwidth is unknown: add it to `helpers.NOMINAL_GB_S`.) "
    floor_us = nbytes / (nominal * 1e9) * 1e6
    text += (f"The working set, {mb(nbytes)}, exceeds the {mb(L2_BYTES)} L2 cache, so every call "
             f"streams it from main memory: at the nominal {nominal} GB/s that takes {num(floor_us)} µs. ")
    if max(rates) > nominal:
        return text + ("At least one kernel beat that figure: part of the data still came from L2, or the "
                       "datasheet's number is conservative, so no floor can be read from it here. ")
    return text + (f"Ours took {1e3 * ms_ours / floor_us:.1f}x that time and PyTorch's "
                   f"{1e3 * ms_torch / floor_us:.1f}x. ")


def gpu_words(v) -> str:
    """A GPU-time verdict in bold, with the rule that held it back when it is 'within noise'."""
    return f"**{v.text}**" + ("" if v.real else f", {v.reason}")


h_ours, h_torch = us(host[OURS]), us(host[TORCH])
prices_text = (f"An empty Triton launch costs {num(prices.triton_us)} µs and a one-element PyTorch op "
               f"{num(prices.torch_us)} µs on this host")
spread_text = (f"median of {calls.rounds} shuffled rounds, quartiles {gpu_ratio.quartiles}; "
               f"`torch.add` against itself {floor.median:.3f}")
if not helpers.HAS_GPU:
    text = (f"In CPU mode there is no GPU clock. By the interpreter's wall time one call of our kernel took "
            f"{num(h_ours)} µs and `torch.add` {num(h_torch)} µs: {gpu_words(gpu_verdict)} (ratio "
            f"{gpu_ratio.median_text}, {spread_text}). That compares numpy interpreting our kernel with PyTorch's "
            "compiled CPU code, so only the method carries over, not the ratio. " + prices_text + ": the first is "
            "the interpreter's price, the second a CPU op's, and neither is a GPU launch. A GPU run measures the "
            "real prices, the ones chapters 3 and 8 use.")
else:
    g_ours, g_torch = us(kernel_ms[OURS]), us(kernel_ms[TORCH])
    pace = {OURS: regime(h_ours, g_ours), TORCH: regime(h_torch, g_torch)}
    text = (f"**GPU time.** At {n:,} elements our kernel ran for {num(g_ours)} µs and `torch.add` for "
            f"{num(g_torch)} µs: ratio {gpu_ratio.median_text} ({spread_text}), {gpu_words(gpu_verdict)}. "
            + ("Same bytes, different GPU time: the two kernels split the work differently (block size, "
               "programs per launch, how each program loads its block), and the GPU's own clock sees it. "
               if gpu_verdict.real else
               "Same bytes, and no difference in GPU time that the series' rule counts: on the GPU our kernel "
               "holds its own against PyTorch's. ")
            + bandwidth_reading(n, kernel_ms[OURS], kernel_ms[TORCH])
            + f"\n\n**Host time.** Called back to back, one call took {num(h_ours)} µs (ours) and {num(h_torch)} µs "
            f"(`torch.add`), a ratio of {host_ratio:.2f}. Each time is {HOST_READING}, with no rounds, so the ratio "
            f"has no spread and no verdict. That is {h_ours / g_ours:.1f}x and {h_torch / g_torch:.1f}x their GPU "
            "times: at this size "
            + (f"both calls are {pace[OURS]} ({REGIME_WHY[pace[OURS]]}). " if pace[OURS] == pace[TORCH] else
               f"ours is {pace[OURS]} ({REGIME_WHY[pace[OURS]]}) and `torch.add` {pace[TORCH]} "
               f"({REGIME_WHY[pace[TORCH]]}). ")
            + prices_text + f" (one reading each, the median of {PRICE_LOOPS} loops of {prices.calls:,} calls). "
            + prices_against_each_other()
            + against_price("Ours", h_ours, prices.triton_us, launch_bound_readings(OURS),
                            "the launcher's own work (checking both inputs, allocating the output)")
            + against_price("`torch.add`", h_torch, prices.torch_us, launch_bound_readings(TORCH),
                            "the op's own work (allocating the output)")
            + (f"In the sweep below, the launch-bound host readings of "
               f"{and_list(WHO[v] for v in (OURS, TORCH) if host_step(v))} fall into two groups, a higher and a "
               "lower one; at this size "
               + (f"both lie in the {step_side(OURS, n)} one" if step_side(OURS, n) == step_side(TORCH, n) else
                  and_list(f"{WHO[v]} lies in the {step_side(v, n)} one" for v in (OURS, TORCH) if step_side(v, n)))
               + ": a host reading of one launch-bound size is no fixed price. "
               if any(step_side(v, n) for v in (OURS, TORCH)) else
               f"At this size the host readings of {and_list(WHO[v] for v in (OURS, TORCH) if n in off_flat(v))} "
               f"lie more than {100 * helpers.PREDICTION_BAR:.0f}% from their median launch-bound readings: the "
               "sweep below reads that from the two clocks. "
               if any(n in off_flat(v) for v in (OURS, TORCH)) else "")
            + ("So at this size the launch, not the GPU's work, sets the pace of back-to-back calls of both: "
               "the host-time ratio is a ratio of launch costs."
               if set(pace.values()) == {"launch-bound"} else
               "So at this size the host time is not the launch alone: for at least one of the two, the GPU's "
               "work takes half the host time or more.")
            )
helpers.md(text)

# %% [markdown]
# The spread the two prices are read against is the widest of the sweep's single host readings of one
# launch-bound call, every launch-bound size included. Check where it comes from: if one size stands far from
# the rest, the ruling rests on that one reading. The cell below reads each version's spread with and without
# its reading farthest from the median of its launch-bound readings.


# %%
def spread_reading() -> str:
    """Where the spread the two prices were ranked against came from: each version's launch-bound host readings
    with and without the one farthest from their median, and whether leaving that one out changes the ruling."""
    gap = abs(prices.triton_us - prices.torch_us)
    parts, spreads, farthest = [], [], set()
    for v in (OURS, TORCH):
        reads = {size: times_us(size, v)[0] for size in measured if regime(*times_us(size, v)) == "launch-bound"}
        if len(reads) < 2:
            continue
        middle = statistics.median(reads.values())
        far = max(reads, key=lambda size: abs(reads[size] - middle))  # the reading that stands farthest out
        rest = [h for size, h in reads.items() if size != far]
        farthest.add(far)
        spreads.append((scatter(list(reads.values())), scatter(rest)))
        parts.append(f"{WHO[v]} read {span(reads.values())} host µs at its {len(reads)} launch-bound sizes, around "
                     f"a median of {num(middle)} µs; farthest from it at {size_list([far])} ({num(reads[far])} µs)"
                     + (", a single reading without it" if len(rest) < 2 else
                        f", {num(scatter(rest))} µs apart without it"))
    if not parts:
        return "No version was launch-bound at two sizes or more, so there was no spread to rank the prices against."
    # the size left out: one for both versions, or each version's own
    out = size_list(sorted(farthest)) if len(farthest) == 1 else "each version's farthest reading"
    readings_out = f"the readings at {out}" if len(farthest) == 1 else out
    widest, without = max(w for w, _ in spreads), max(r for _, r in spreads)
    text = (f"Here {'; '.join(parts)}. The widest spread is {num(widest)} host µs, "
            f"{f'{num(without)} µs' if without else 'none'} without {out}; the two empty launches' prices differ by "
            f"{num(gap)} host µs, ")
    if gap > widest:
        return text + f"more than either, so the ranking does not rest on {readings_out}."
    if gap <= without or without == 0.0:  # no spread left without that reading: no ranking either
        return text + f"no more than the widest spread, and without {out} the two stay unranked too."
    return text + (f"within {num(widest)} µs but beyond {num(without)} µs: \"neither launch the dearer\" rests on "
                   f"{readings_out}, so read it as \"not ranked\", not "
                   "as \"equal\".")


helpers.md(spread_reading() if helpers.HAS_GPU else
           "In CPU mode there is no GPU clock: no size is read as launch-bound, and the two prices are not ranked.")

# %% [markdown]
# ### Beside the blog's numbers
#
# The blog timed its kernel against `torch.add` on a T4 with `triton.testing.do_bench`, and did not say at
# which size. `do_bench` mixes the host's launching with the GPU's work (see "Two clocks" above), so its
# numbers are neither of our clocks: we set them beside both.

# %%
BLOG_RATIO = helpers.blog("add.ratio")  # the post's stated ratio; its rounded times give a slightly different one
blog_triton, blog_torch = helpers.blog("add.triton_ms"), helpers.blog("add.torch_ms")
text = (f"The blog measured {1e3 * blog_triton:.0f} µs against {1e3 * blog_torch:.0f} µs on a T4 (`do_bench`, "
        f"host and GPU time mixed) and called it {BLOG_RATIO}x slower (its rounded times give "
        f"{blog_triton / blog_torch:.2f}x). ")
if not helpers.HAS_GPU:
    text += (f"In CPU mode your only clock is the interpreter's wall time ({num(h_ours)} µs against "
             f"{num(h_torch)} µs, {gpu_verdict.text}): it compares Triton's interpreter with PyTorch's compiled "
             "CPU code, so only the method carries over, not the ratio.")
else:
    direction = ("ours slower, the blog's direction" if gpu_verdict.real and gpu_verdict.ratio > 1 else
                 "ours faster, the other way round from the blog" if gpu_verdict.real else
                 "neither direction, by the series' rule")
    text += (f"Yours, at {n:,} elements on {helpers.env_info()['gpu']}: GPU time {num(us(kernel_ms[OURS]))} µs "
             f"against {num(us(kernel_ms[TORCH]))} µs, ratio {gpu_ratio.median_text}, {gpu_verdict.text} "
             f"({direction}); host time per call {num(h_ours)} µs against {num(h_torch)} µs, ratio "
             f"{host_ratio:.2f}, one reading each and so no verdict. ")
    paired = both_launch_bound()
    if paired:
        longer = sum(r > 1 for r in paired.values())
        text += (f"Where both calls are launch-bound ({len(paired)} sizes of the sweep below, each its own reading), "
                 f"ours took the host longer per call at {'all ' if longer == len(paired) > 1 else ''}{longer} of "
                 f"them (ratios {num(min(paired.values()))} to {num(max(paired.values()))}). ")
    text += ("A launch-bound `do_bench` number leans towards the host clock on a slow host, and towards the GPU "
             "clock where the kernel is long enough to hide the launch behind it.")
helpers.md(text)

# %% [markdown]
# ## A sweep over sizes
#
# One size tells little. The loop above measured both additions from a few thousand elements up to tens of
# millions (the sizes come from `helpers.SIZES`, smaller in CPU mode), each size with its own shuffled rounds
# and its own A/A floor; the headline row is the one read above. Two views of the data: the time per call on
# both clocks, and the bandwidth achieved on the GPU clock, bytes moved divided by GPU time. The table also
# says, for each size, whether the working set fits in the L2 cache.
#
# What we expect: for small vectors the bytes are negligible. The GPU time sits at a floor of its own
# (even an almost empty kernel keeps the GPU busy for a moment), and the host time per call at the price
# of a launch, far above it: the calls are **launch-bound** (what chapter 1 calls *overhead-bound*, the
# first of [the three regimes](01_setup.ipynb#Three-regimes)), and their host time should stay flat from size
# to size (we hold each version's launch-bound readings to the series' prediction bar,
# `helpers.PREDICTION_BAR`: each within 20% of that version's median launch-bound reading, the rule chapter 3
# uses too). For large vectors the time grows in proportion
# to $n$ on both clocks (*memory-bound*, chapter 1's second regime): once the GPU time exceeds what a call
# costs the host (its launch-bound host time), the host has to wait for the GPU, and
# its time per call should follow the GPU time (again within the bar). The bandwidth climbs with the
# size while the working set fits in L2, where it can exceed the main memory's nominal figure (the replayed
# call reads from the cache); past L2 it can drop, since only there does it measure the main memory, and it
# levels off near what that can deliver. Where the regimes meet depends on the GPU and on the host: the faster the memory and the
# slower the host, the larger the vector must be before the bytes outweigh the launch.

# %%
rows = []
for size, (c, h) in measured.items():
    r, nbytes = c.ratios[OURS], working_set(size)
    row = {"n": size, "MB_moved": nbytes / 1e6}
    if helpers.HAS_GPU:
        row.update({"fits_L2": in_l2(size),
                    "triton_gpu_us": us(c.ms[OURS]), "torch_gpu_us": us(c.ms[helpers.REFERENCE]),
                    "gpu_ratio": r.median, "gpu_quartiles": r.quartiles,
                    "gpu_floor": c.floor.median, "gpu_verdict": c.verdict(OURS).text,
                    "triton_host_us": us(h[OURS]), "torch_host_us": us(h[TORCH]), "host_ratio": h[OURS] / h[TORCH],
                    "triton_regime": regime(*times_us(size, OURS)), "torch_regime": regime(*times_us(size, TORCH)),
                    "triton_GB_s": gb_s(nbytes, c.ms[OURS]), "torch_GB_s": gb_s(nbytes, c.ms[helpers.REFERENCE])})
    else:  # one clock, the interpreter's: the comparison's medians, its ratio and its floor
        row.update({"triton_host_us": us(h[OURS]), "torch_host_us": us(h[TORCH]), "host_ratio": r.median,
                    "quartiles": r.quartiles, "floor": c.floor.median,
                    "verdict": c.verdict(OURS).text})
    rows.append(row)
sweep = pd.DataFrame(rows)
helpers.save_sweep(sweep, "add_sweep")
helpers.show(sweep.apply(lambda column: column.map(lambda v: helpers.fmt(v, 3) if v is None or isinstance(v, float)
                                                   else v)))
if helpers.HAS_GPU:
    print(f"GPU = {helpers.CLOCK_LABELS['gpu']}, medians of {calls.rounds} shuffled rounds (floor: torch.add against "
          f"itself); host = {HOST_CLOCK}, {HOST_READING} per size and version; regime: {REGIME_RULE}; GB/s from "
          f"GPU time; fits_L2: 3 x n x {element_bytes} bytes <= {mb(L2_BYTES)}")
else:
    print(f"host = {HOST_CLOCK}: medians of {calls.rounds} shuffled rounds (floor: torch.add against itself)")

# %%
fig, (ax_t, ax_bw) = plt.subplots(1, 2, figsize=(12, 5.5))
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
LEGEND_BELOW = {"fontsize": 8, "ncol": 2, "loc": "upper center", "bbox_to_anchor": (0.5, -0.16)}  # off the data points
if helpers.HAS_GPU:
    l2_edge = L2_BYTES / (3 * element_bytes)  # the largest n whose working set fits in L2
    for ax in (ax_t, ax_bw):
        ax.axvspan(sweep["n"].min() / 1.5, min(l2_edge, sweep["n"].max() * 1.5), color="grey", alpha=0.12,
                   label=f"working set fits in L2 ({mb(L2_BYTES)})")
    ax_bw.set(yscale="log", ylabel="achieved bandwidth, GB/s (bytes moved / GPU time)")
    if nominal:
        ax_bw.axhline(nominal, color="grey", ls="--", label=f"nominal main-memory bandwidth, {nominal} GB/s")
        ax_bw.set_ylim(top=1.6 * max(nominal, sweep[["triton_GB_s", "torch_GB_s"]].max().max()))
    ax_bw.legend(**LEGEND_BELOW)
else:
    ax_bw.text(0.5, 0.5, "no GPU time in CPU mode:\nno bandwidth to plot", ha="center", va="center",
               transform=ax_bw.transAxes)
    ax_bw.set_axis_off()
for ax in ((ax_t, ax_bw) if helpers.HAS_GPU else (ax_t,)):
    ax.set_xlim(sweep["n"].min() / 1.5, sweep["n"].max() * 1.5)
    helpers.plain_log_ticks(ax, "x", sweep["n"], [helpers.count_label(v) for v in sweep["n"]])
    helpers.plain_log_ticks(ax, "y")
    ax.grid(True, which="both", alpha=0.3)
ax_t.legend(**LEGEND_BELOW)
fig.suptitle(f"Vector add, {str(DTYPE)[6:]}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "add_sweep")
plt.show()


# %%
def held_back(verdicts: dict) -> str:
    """size -> Verdict: the 'within noise' sizes grouped by the rule that held them back ('at 4K, 16K elements
    the ratio lies closer to 1 than the series' smallest real effect (5%)'), from ``Verdict.reason``."""
    groups = {}
    for size, v in verdicts.items():
        if not v.real:
            groups.setdefault(v.reason, []).append(size)
    return "; ".join(f"at {size_list(sizes)} " + ("the ratio lies " if reason.startswith("closer") else "") + reason
                     for reason, sizes in groups.items())


def memory_reading(sweep) -> str:
    """The bandwidth paragraph: inside L2 the cache's rates, beyond it the main memory's, against its nominal."""
    inside, beyond = sweep[sweep["fits_L2"]], sweep[~sweep["fits_L2"]]
    best = sweep[["triton_GB_s", "torch_GB_s"]].max(axis=1)
    text = f"**Bandwidth.** This GPU's L2 cache holds {mb(L2_BYTES)}. The working set (3 x n x {element_bytes} bytes) "
    text += (f"fits in it at {size_list(inside['n'])}: there the replayed call reads its tensors from the cache, "
             "and the rates are the cache's. " if len(inside) else "outgrows it at every size of the sweep. ")
    if nominal:
        above = sweep.loc[sweep["fits_L2"] & (best > nominal), "n"]
        if len(above):
            text += (f"At {size_list(above)} they even exceed the main memory's nominal {nominal} GB/s, which a "
                     "kernel streaming from main memory could not. ")
    if not len(beyond):
        return text + ("No size of this sweep outgrows L2, so none of them measures the main memory: larger "
                       "vectors would be needed to compare with its nominal bandwidth.")
    big = beyond.iloc[-1]
    text += (f"Beyond L2, at {size_list(beyond['n'])}, every call streams its tensors from main memory. At the "
             f"largest size our kernel moved {num(big['triton_GB_s'])} GB/s and PyTorch's "
             f"{num(big['torch_GB_s'])} GB/s")
    if not nominal:
        return text + " (this GPU's nominal bandwidth is unknown: add it to `helpers.NOMINAL_GB_S`)."
    shares = 100 * big["triton_GB_s"] / nominal, 100 * big["torch_GB_s"] / nominal
    text += (f", both about {shares[0]:.0f}% of the nominal {nominal} GB/s: " if f"{shares[0]:.0f}" == f"{shares[1]:.0f}"
             else f", {shares[0]:.0f}% and {shares[1]:.0f}% of the nominal {nominal} GB/s: ")
    if max(shares) > 100:
        return text + ("above the datasheet's figure, so it is no ceiling on this GPU; read the two against each "
                       "other, not against it.")
    return text + ("both are close to what the memory can give, so neither kernel has much left to win."
                   if min(shares) > 50 else
                   "PyTorch's is close to what the memory can give, ours is not yet." if shares[1] > 50 else
                   "ours is close to what the memory can give, PyTorch's is not yet." if shares[0] > 50 else
                   "both are still well below the memory's limit, so larger sizes might keep climbing.")


def flat_reading() -> str:
    """The flat prediction (each launch-bound host reading within ``helpers.PREDICTION_BAR`` of its version's
    median, ``off_flat``), and the shape of the readings: two groups where ``host_step`` finds them, else the
    readings beyond the bar. Read from the two clocks: where the GPU time stays below the launch price, the host
    does not wait for the GPU, so the GPU's work cannot be what moved the host time. The first size measured is
    named as a possible warm-up only where it alone stands apart."""
    bar = 100 * helpers.PREDICTION_BAR
    versions = (OURS, TORCH)
    off = {v: off_flat(v) for v in versions}
    steps = {v: host_step(v) for v in versions if host_step(v)}
    missed = [v for v in versions if off[v]]
    if not missed and not steps:
        return (f"At every launch-bound size each call's host reading lies within {bar:.0f}% of its median "
                "launch-bound reading: flat, as the launch price predicts. ")
    text = (f"**The flat prediction, read.** The launch price predicts the same host time at every launch-bound "
            f"size, each reading within {bar:.0f}% of its version's median launch-bound reading. ")
    held = [v for v in versions if not off[v] and len(launch_bound_readings(v)) > 1]
    text += ((f"It failed for {and_list(WHO[v] for v in missed)}" if missed else "It held")
             + (f" and held for {and_list(WHO[v] for v in held)}" if missed and held else "") + ". ")
    moved = {}  # version -> the sizes whose host readings moved: all launch-bound sizes of a step, else those off
    parts, off_parts = [], []  # the versions with two groups; those only off the bar
    for v in versions:
        if v in steps:
            below, above = steps[v]
            hb, ha = [times_us(s, v)[0] for s in below], [times_us(s, v)[0] for s in above]
            mb_, ma = statistics.median(hb), statistics.median(ha)
            parts.append(f"{WHO[v]} took {span(hb)} µs per call at {size_list(below)} and {span(ha)} µs at "
                         f"{size_list(above)}, the two groups' medians {max(mb_, ma) / min(mb_, ma):.2f}x apart")
            moved[v] = below + above
        elif off[v]:
            mid, sizes = flat_median(v), sorted(off[v])
            host_off = [off[v][size][0] for size in sizes]
            off_parts.append(f"{WHO[v]} took {and_list(num(h) for h in host_off)} µs per call at {size_list(sizes)} "
                             f"({and_list(helpers.signed_pct(100 * (h / mid - 1), sign='+') for h in host_off)} from "
                             f"its median launch-bound reading, {num(mid)} µs)")
            moved[v] = sizes
    if steps:
        bounds = {v: (max(below), min(above), statistics.median(times_us(s, v)[0] for s in below)
                      > statistics.median(times_us(s, v)[0] for s in above)) for v, (below, above) in steps.items()}
        shared = len(steps) == len(versions) and len(set(bounds.values())) == 1
        text += (f"The launch-bound host readings of {and_list(WHO[v] for v in steps)} fall into two groups"
                 + (", split between the same two sizes for both versions" if shared else "") + ": "
                 + "; ".join(parts) + ". ")
        if off_parts:
            text += "Off the bar without two groups: " + "; ".join(off_parts) + ". "
    else:
        shared, bounds = False, {}
        text += "Instead, " + "; ".join(off_parts) + ". "
    below_price = [v for v, sizes in moved.items() if all(times_us(s, v)[1] < PRICE_US[v] for s in sizes)]
    if below_price:
        text += ("At those sizes the GPU time stayed below the launch price ("
                 + "; ".join(f"{WHO[v]} at most {num(max(times_us(s, v)[1] for s in moved[v]))} µs against "
                             f"{num(PRICE_US[v])} µs" for v in below_price)
                 + "): the GPU was done with each call long before the host could issue the next, so the host never "
                 f"waited for it there, and the GPU's work cannot be what moved the host time of "
                 f"{and_list(WHO[v] for v in below_price)}; the host's own time per call did. ")
    first = min(measured)  # the loop measured the sizes in increasing order
    first_alone = [v for v in moved if (v in steps and steps[v][0] == [first] and bounds[v][2])
                   or (v not in steps and list(moved[v]) == [first])]
    if first_alone:
        text += (f"{size_list([first])} is the first size the loop measured, and the only one that stands apart for "
                 f"{and_list(WHO[v] for v in first_alone)}: a host still warming up (caches, the allocator, its clock "
                 "speed) would show there. ")
    if shared:
        low_size, high_size, down = next(iter(bounds.values()))
        text += (f"Both versions step {'down' if down else 'up'} between {helpers.count_label(low_size)} and "
                 f"{size_list([high_size])}. The loop measured the sizes in increasing order, both versions' readings "
                 "of one size one right after the other, so a change in the host's state between two sizes and host "
                 "work that changes with the size would look alike here; single readings cannot tell them apart, "
                 "and this chapter leaves the cause open. ")
    elif not first_alone:
        text += "Single readings cannot say what moved them, and this chapter leaves the cause open. "
    return text


def host_cost_us(version) -> float:
    """What one call of ``version`` costs the host when the GPU is no constraint: the median of its launch-bound
    readings (``flat_median``), or its empty launch's price where the sweep has none."""
    return flat_median(version) if launch_bound_readings(version) else PRICE_US[version]


def follows_gpu_reading() -> str:
    """Where a version's GPU time exceeds its own host cost per call (``host_cost_us``): does the host time per
    call follow the GPU time (within ``helpers.PREDICTION_BAR``), as it must once the host waits for the GPU?"""
    parts, mixed = [], {}  # mixed: version -> sizes the regime rule calls mixed although the host time followed
    never = []  # versions whose GPU time stayed below their host cost at every size
    for version in (OURS, TORCH):
        over = {size: times_us(size, version) for size in measured
                if times_us(size, version)[1] > host_cost_us(version)}
        if not over:
            never.append(version)
            continue
        pairs = and_list(f"{num(h)} µs of host time against {num(g)} µs of GPU time at {size_list([size])} "
                         f"({beside_bar(h / g)}x)" for size, (h, g) in over.items())
        close = all(h / g - 1 <= helpers.PREDICTION_BAR for h, g in over.values())
        if close:
            mixed[version] = [size for size, (h, g) in over.items() if regime(h, g) == "mixed"]
        parts.append(f"for {WHO[version]}, {pairs}: "
                     + (f"within {100 * helpers.PREDICTION_BAR:.0f}% of the GPU time, so the host time followed it"
                        if close else
                        f"more than {100 * helpers.PREDICTION_BAR:.0f}% above the GPU time at least once, so the "
                        "launch still shows through"))
    costs = and_list(f"{num(host_cost_us(v))} µs for {WHO[v]}"
                     + ("" if launch_bound_readings(v) else " (its empty launch's price: no launch-bound reading)")
                     for v in (OURS, TORCH))
    if not parts:
        return ("At no size of this sweep does the GPU time exceed a call's own host cost (the median of its "
                f"launch-bound host readings: {costs}), so the host never waits for the GPU: larger vectors would be "
                "needed to see the host time follow the GPU time.\n\n")
    named = {v: sizes for v, sizes in mixed.items() if sizes}
    two_bars = (f"both versions at {size_list(next(iter(named.values())))}"
                if len(named) == 2 and len({tuple(sizes) for sizes in named.values()}) == 1 else
                and_list(f"{WHO[v]} at {size_list(sizes)}" for v, sizes in named.items()))
    return (f"Once the GPU time exceeds a call's own host cost (the median of its launch-bound host readings: "
            f"{costs}) the host has to wait for the GPU: {'; '.join(parts)}. "
            + "".join(f"{POSSESSIVE[v]} GPU time stayed below its host cost at every size (at most "
                      f"{num(max(times_us(size, v)[1] for size in measured))} µs), so the host never waited for it. "
                      for v in never)
            + (f"The regime column calls {two_bars} *mixed*, and that is no second answer: there the host time lies "
               "beyond the GPU time by more than the series' smallest real effect, 5%, so a little of the launch "
               f"still shows, yet within this prediction's {100 * helpers.PREDICTION_BAR:.0f}% bar the host time "
               "follows the GPU time. " if two_bars else "")
            + "\n\n")


def host_reading(sweep) -> str:
    """The host-time paragraph: each size's regime, per version, what the launch-bound readings say, where they
    stepped up, and where the host time follows the GPU time."""
    regimes = {}
    for name, col in ((OURS, "triton"), (TORCH, "torch")):
        groups = {k: sweep.loc[sweep[f"{col}_regime"] == k, "n"] for k in ("launch-bound", "mixed", "GPU-bound")}
        regimes[name] = and_list([f"{k} at {size_list(sizes)}" for k, sizes in groups.items() if len(sizes)])
    text = (f"**Host time** (each time {HOST_READING}, per size and version). Each size's regime is read from its two "
            f"clocks: {REGIME_RULE}. Ours was {regimes[OURS]}; `torch.add` was {regimes[TORCH]}. ")
    readings = {name: launch_bound_readings(name) for name in (OURS, TORCH)}
    priced = [f"{span(r)} µs ({WHO[name]})" for name, r in readings.items() if r]
    if priced:
        text += ("Where a call is launch-bound its host time prices the launch and the host's work around it "
                 f"(Python, dispatch, driver), not the bytes: there one call cost the host {' and '.join(priced)}, "
                 f"against {num(prices.triton_us)} µs for an empty Triton launch and {num(prices.torch_us)} µs for a "
                 "one-element PyTorch op. ")
    for name, r in readings.items():
        cheaper = [h for h in r if h < PRICE_US[name]]
        if cheaper:
            text += (f"At {len(cheaper)} of its {len(r)} launch-bound sizes {WHO[name]} cost the host less than its "
                     f"empty launch ({num(PRICE_US[name])} µs): as said where the prices were measured, that launch "
                     "takes another path than the call, so it prices a launch and is no floor under every call. ")
    paired = both_launch_bound()
    if paired:
        text += (f"Where both are launch-bound ({len(paired)} sizes), the host-time ratio, ours over `torch.add`'s, "
                 f"ran from {min(paired.values()):.2f} to {max(paired.values()):.2f}.\n\n")
    else:
        text += "\n\n"
    return text + flat_reading() + follows_gpu_reading()


first, last = sweep.iloc[0], sweep.iloc[-1]
size_growth = last["n"] / first["n"]
rule = "the series' rule (twice `torch.add`'s own A/A floor at that size, and never under 5%)"
if not helpers.HAS_GPU:
    verdicts = {size: c.verdict(OURS) for size, (c, _) in measured.items()}
    counts = Counter("within noise" if not v.real else v.text.split(" ")[-1] for v in verdicts.values())
    text = (f"From the smallest to the largest vector the data grew **{size_growth:,.0f}x** while the "
            f"interpreter's time per call of our kernel grew "
            f"**{num(last['triton_host_us'] / first['triton_host_us'])}x**. Judged by {rule}, ours was "
            + (f"{next(iter(counts))} at all {len(sweep)} sizes" if len(counts) == 1 else
               ", ".join(f"{word} at {count} of the {len(sweep)} sizes" for word, count in counts.items()))
            + " against `torch.add`" + (f"; {held_back(verdicts)}" if counts["within noise"] else "")
            + ". In CPU mode there is no GPU time, so no launch-bound region and no bandwidth: the interpreter's "
            "time is numpy's, not a GPU's. Read the shape of the curves on a GPU run.")
else:
    verdicts = {size: c.verdict(OURS) for size, (c, _) in measured.items()}
    noise_sizes = [size for size, v in verdicts.items() if not v.real]
    slower = [size for size, v in verdicts.items() if v.real and v.ratio > 1]
    faster = [size for size, v in verdicts.items() if v.real and v.ratio < 1]
    text = (f"**GPU time.** Each size's ratio is the median of {calls.rounds} shuffled rounds, judged by {rule}. "
            + (f"At all {len(sweep)} sizes" if len(noise_sizes) == len(sweep) else
               f"At {len(noise_sizes)} of the {len(sweep)} sizes")
            + " the two kernels are within noise of each other on the "
            "GPU clock" + (f": {held_back(verdicts)}" if noise_sizes else "")
            + (f"; ours is slower at {size_list(slower)}" if slower else "")
            + (f"; ours is faster at {size_list(faster)}" if faster else "")
            + f". The GPU-time ratios run from {sweep['gpu_ratio'].min():.2f} to {sweep['gpu_ratio'].max():.2f}. "
            f"From the smallest to the largest vector the data grew {size_growth:,.0f}x while our kernel's GPU "
            f"time grew {num(last['triton_gpu_us'] / first['triton_gpu_us'])}x. ")
    rate = last["triton_GB_s"]  # the rate our kernel reached on the largest vector
    bytes_us = first["MB_moved"] * 1e6 / (rate * 1e9) * 1e6
    text += (f"At {helpers.count_label(first['n'])} elements it ran for {num(first['triton_gpu_us'])} µs; at the "
             f"{num(rate)} GB/s it reached on the largest vector, its {num(first['MB_moved'] * 1e3)} KB would take "
             f"{num(bytes_us)} µs, so {100 * (1 - bytes_us / first['triton_gpu_us']):.0f}% of that time is the GPU's "
             "fixed cost of running a kernel at all, not the bytes.\n\n")
    text += host_reading(sweep) + memory_reading(sweep)
helpers.md(text)

# %% [markdown]
# ## Your numbers beside the blog's
#
# The blog's column is its T4 run (`do_bench`: host and GPU time mixed), the `h200` column the committed
# run of this series. `add.triton_ms`, `add.torch_ms` and `add.ratio` are GPU time in your column and the
# `h200` one (interpreter wall time in CPU mode), `add.ratio` the median of its shuffled rounds (its
# quartiles are in the headline printout above, and in `results.csv` beside it); the blog's value in those
# three rows is `do_bench`, whatever the label's clock says. The `host_` rows are host time
# per call and the `launch_us` rows host time per launch that does no work (an empty Triton kernel; a
# one-element PyTorch op), each a single reading (the median of a few synchronised loops), so
# `add.host_ratio` carries no verdict on a GPU.

# %%
helpers.show(helpers.compare("add."))

# %% [markdown]
# ## Takeaway
#
# - A Triton kernel is written for one program; the grid of programs covers the data, and a mask protects
#   the ragged last block.
# - Check first, on fresh random data of an awkward size; time second, and name the clock: GPU time says
#   what the kernel costs the GPU, host time per call what it costs to launch it back to back. A
#   microsecond kernel's GPU time is compared in shuffled rounds against the reference's own A/A floor,
#   never from one timing of each.
# - Small kernels are priced by their launch, large ones by their bytes. The GPU clock compares the work
#   of two kernels; the host clock adds what launching them costs, and there our Python launcher pays
#   its launch price on every call. A model generating one token at a time lives mostly in the
#   launch-bound regime, so the launch prices measured here are the cost to watch.
# - A replayed call whose working set fits in the L2 cache reads it from there: compare achieved bandwidth
#   with the main memory's nominal figure only where the working set outgrows L2.

# %% [markdown]
# ## Try it yourself
#
# Three changes to the add, one at a time, each timed against the unchanged call with `helpers.compare_calls`
# (GPU time by CUDA-graph replay in shuffled rounds, with the reference's A/A floor; interpreter wall time in
# CPU mode) and judged by the series' rule. Make your guess first: set `answer` to `"faster"`, `"slower"` or
# `"same"` and run the cell; with `answer = None` it only shows the measurement. All three work on the
# sweep's largest vector, where the bytes, not the launch, should set the GPU time.
#
# **1. A smaller block.** The same kernel launched with `BLOCK_SIZE=128` instead of 1,024: eight times as many
# programs for the same bytes, and with 4 warps of 32 threads each thread now holds one element instead of
# eight, so the compiler can no longer fill a 16-byte vectorised load from it. Expect it **slower** on both
# GPUs. A memory-bound kernel runs only as fast as the bytes it keeps in flight, waiting for memory: each
# thread now asks for 2 bytes of each input at a time instead of 16, and eight times as many programs have
# to be started and finished by the SMs. An H200 needs far more bytes in flight than a T4 to keep its memory
# busy (15 times the bandwidth, at a similar wait per request), so expect the larger loss there, and a
# smaller one on a T4. (The interpreter, in CPU mode, pays per program too: slower there as well.)

# %%
# the exercises launch add_kernel themselves, with a block size of their own
import triton

from slower_kernels.add import add_kernel

BIG = max(SIZES.add_sweep)  # the sweep's largest vector
a, b = (torch.randn(BIG, device=DEVICE, dtype=DTYPE) for _ in range(2))


def add_with_block(x, y, block):
    """The add with a block size of our choosing (the launcher always uses ELEMENTWISE_BLOCK_SIZE)."""
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK_SIZE=block)
    return out


assert torch.equal(add_with_block(a, b, 128), a + b)  # the same sums, whatever the block

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"BLOCK_SIZE=128": lambda: add_with_block(a, b, 128)},
                            reference=lambda: add_with_block(a, b, ELEMENTWISE_BLOCK_SIZE))
measured = helpers.check_answer(answer, cmp.ratios["BLOCK_SIZE=128"], cmp.floor, change="BLOCK_SIZE=128", clock=cmp.clock)

# %% [markdown]
# **2. A length that is not a multiple of 16.** Drop one element: add the first `BIG - 1` elements instead of
# all `BIG`. The bytes are the same to one part in millions. But Triton's JIT compiles a kernel once per
# *specialisation* of its integer arguments, and a length that is a multiple of 16 is one: it lets the
# compiler prove that a thread's eight elements lie all inside the vector or all past its end, so one
# predicate guards one `v4` load. Without that promise every element needs its own mask bit, and the loads
# become one fp16 number each (the compiler table above, compiled the other way, would show `scalar`).
# Eight load instructions per input where there was one, for the same bytes. Expect it **slower** on an
# H200: its memory delivers bytes so fast that the SMs' work of issuing all those loads becomes the limit.
# On a T4, whose memory is 15 times slower, the SMs have time to spare for the extra instructions, so the
# loss may be small, near the series' 5% threshold or within noise. In the interpreter there are no load
# instructions, so expect no difference there.

# %%
answer = None  # your guess: "faster", "slower" or "same"
a_odd, b_odd = a[:BIG - 1], b[:BIG - 1]  # views of the same memory, one element shorter
cmp = helpers.compare_calls({"length BIG - 1": lambda: slower_kernels.add(a_odd, b_odd)}, reference=lambda: slower_kernels.add(a, b))
measured = helpers.check_answer(answer, cmp.ratios["length BIG - 1"], cmp.floor, change="length BIG - 1", clock=cmp.clock)

# %% [markdown]
# **3. A strided input.** Give the launcher every second element of a vector twice as long, `x[::2]`: the same
# number of elements, but not next to each other in memory. The kernel walks flat memory, so the launcher
# first copies such an input into a contiguous one (`.contiguous()`, see its docstring above): one more
# kernel, which reads the strided elements (dragging their unused neighbours through the memory system with
# them) and writes them again, before the add reads them once more. Count the bytes: the copy reads `2 x BIG`
# elements' worth and writes `BIG`, then the add moves its `3 x BIG` as before, twice the bytes of the plain
# add. Expect it **slower** on both GPUs, about twice the time or more: more where the strided copy streams
# its bytes below the add's rate; in CPU mode the interpreter's add outweighs PyTorch's copy, so expect little
# difference there.

# %%
answer = None  # your guess: "faster", "slower" or "same"
a_wide = torch.randn(2 * BIG, device=DEVICE, dtype=DTYPE)
cmp = helpers.compare_calls({"strided x": lambda: slower_kernels.add(a_wide[::2], b)}, reference=lambda: slower_kernels.add(a, b))
measured = helpers.check_answer(answer, cmp.ratios["strided x"], cmp.floor, change="strided x", clock=cmp.clock)

# %% [markdown]
# Next, in chapter 3, we write a kernel the model actually uses, RMSNorm, and then make it worse on
# purpose by splitting it in two.
