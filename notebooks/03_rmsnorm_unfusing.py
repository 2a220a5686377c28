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
# # Chapter 3: RMSNorm, and making a kernel worse on purpose
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/03_rmsnorm_unfusing.ipynb)
#
# In this chapter you will learn:
# - what RMSNorm computes, and the four places in every Qwen3 layer that use it;
# - how a *fused* kernel does the whole computation in one launch, reading its input once;
# - how to *un-fuse* it into two kernels that pass an intermediate result through memory, and what that
#   costs in bytes and in launches;
# - whether the gap between the two changes with the number of rows;
# - why a microsecond kernel has two times, the GPU's and the host's, and which one a model feels;
# - what happens to tokens per second when all of the model's RMSNorms use the un-fused version, and how to
#   tell an effect from the noise of the machine.

# %% [markdown]
# ## What RMSNorm computes
#
# RMSNorm rescales each row of a tensor (one token's hidden state, say) so that its root mean square is 1,
# then multiplies it element by element by a learned weight vector $w$. For a row $x$ of $H$ numbers:
#
# $$y_j = w_j \cdot \frac{x_j}{\sqrt{\tfrac{1}{H}\sum_{i=1}^{H} x_i^2 + \varepsilon}}$$
#
# The sum runs over the whole row, so every output element depends on every input element of its row:
# a program must see the whole row before it can write anything. Rows are independent of each other,
# which makes "one program per row" the natural way to split the work.
#
# Qwen3's version (`Qwen3RMSNorm` in transformers) computes the mean square in fp32 even for fp16
# inputs, casts the normalised row back to the input dtype, and only then multiplies by the weight. Our
# kernels follow the same order, so they can match it closely.

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
from collections import Counter
from itertools import pairwise

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.lines import Line2D
from transformers import GenerationConfig
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

import helpers
import slower_kernels

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES

# %% [markdown]
# ## Where Qwen3 uses it
#
# We load the model now (we need it at the end of the chapter anyway) and list its RMSNorm modules by
# role. Two of them normalise a layer's whole hidden state; `q_norm` and `k_norm` normalise each
# attention head's query and key vectors separately, so their rows are one head long.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
norms = {name: m for name, m in model.named_modules() if type(m).__name__.endswith("RMSNorm")}
roles = Counter(name.rsplit(".", 1)[-1] for name in norms)
helpers.show(pd.DataFrame([
    {"role": role, "modules": count,
     "row length": next(m.weight.shape[0] for n, m in norms.items() if n.rsplit(".", 1)[-1] == role),
     "example": next(n for n in norms if n.rsplit(".", 1)[-1] == role)}
    for role, count in roles.items()
]))
print(f"{len(norms)} RMSNorm modules in all; each runs once per forward pass, so once per generated token")

# %% [markdown]
# ## Two clocks, in rounds
#
# Every RMSNorm in this chapter, PyTorch's and ours, is timed the same way, on two clocks, with its
# launches counted:
#
# - **GPU time**: the call is captured in a CUDA graph and replayed, so the host is out of the loop and
#   only the kernels' own work is timed. These kernels run for a few microseconds, short enough for the
#   clock's own noise to matter, so `helpers.compare_calls` times them in shuffled rounds: every round
#   replays the fused kernel, the two-pass kernel, PyTorch's `Qwen3RMSNorm` and PyTorch's *again*. The ratio
#   of PyTorch to itself (an A/A test) is the noise floor of that very measurement. The verdict
#   (`helpers.verdict`, one rule for the series) calls a ratio "slower" or "faster" only when it lies further
#   from 1 than twice that floor's distance from 1 and than the series' smallest real effect, 5%, with the
#   middle half of the rounds on one side; a "within noise" comes with the rule that held it back;
# - **host time per call** (`helpers.host_ms_per_call`): the host's wall clock over calls made back to back
#   (synchronised before and after the loop): what one call costs the Python program that makes it,
#   launching included. It is one reading per version and shape, the median of 5 loops of 200 calls, with
#   no rounds and no A/A floor: a host-time ratio below is a single reading, shown without a verdict;
# - **kernels per call** (`helpers.launches_per_call`): every CUDA kernel one call launches, read from a CUDA
#   graph of the call, not from a profile (a profile would slow the host timings that follow it).
#
# A kernel that runs for a few microseconds on the GPU can cost the host several times that to launch, so
# the two clocks can differ widely; every time below says which clock it is. Each shape is measured once,
# on first use, and every later cell (tables, sweep, figure) reads that same measurement, so two cells never
# show two different times for one call. In CPU mode there is one clock, the interpreter's wall time, and
# the rounds are timed on it.
#
# ## PyTorch's version: how many kernels?
#
# `Qwen3RMSNorm.forward` is written as a chain of ordinary tensor operations: a cast to fp32, a square,
# a mean, an addition and a reciprocal square root, a multiplication, a cast back, and the multiplication
# by the weight. In eager PyTorch each of these is its own kernel, and the fp32 intermediates between them
# travel through memory. The launch count says how many kernels one call starts (on a GPU).

# %%
H = SIZES.rmsnorm_hidden
R, R1 = SIZES.rmsnorm_rows, SIZES.rmsnorm_decode_rows  # the many-rows shape and the decode shape
VERSIONS = {"torch": "PyTorch Qwen3RMSNorm", "fused": "fused", "two_pass": "two-pass"}
CLOCK = "GPU" if helpers.HAS_GPU else "interpreter"  # the clock the ratios below are read on
KERNEL_CLOCK = helpers.CLOCK_LABELS["gpu" if helpers.HAS_GPU else "interpreter"]
HOST_CLOCK = helpers.CLOCK_LABELS["host" if helpers.HAS_GPU else "interpreter"]
HOST_CALLS, HOST_LOOPS = 200, 5  # a host reading: the median of HOST_LOOPS synchronised loops of HOST_CALLS calls
HOST_READING = (f"one reading, the median of {HOST_LOOPS} synchronised loops of {HOST_CALLS} calls"
                if helpers.HAS_GPU else "the median of the comparison's shuffled rounds")


def make_case(rows, seed=0):
    """Fresh random input [rows, H] and a Qwen3RMSNorm with random weights (never ones)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, H, generator=g).to(DEVICE, DTYPE)
    norm = Qwen3RMSNorm(H, eps=1e-6).to(DEVICE, DTYPE)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(H, generator=g))
    return x, norm


def calls_for(rows):
    """The three versions as zero-argument calls on one fresh [rows, H] case."""
    x, norm = make_case(rows)
    w, eps = norm.weight, norm.variance_epsilon
    return {"torch": lambda: norm(x), "fused": lambda: slower_kernels.rmsnorm_fused(x, w, eps),
            "two_pass": lambda: slower_kernels.rmsnorm_two_pass(x, w, eps)}


_measured = {}  # rows -> (helpers.CallComparison, host ms per call by version), measured on first use


def measured(rows):
    """Fused and two-pass against Qwen3RMSNorm at [rows, H]: GPU time in shuffled rounds with the A/A floor,
    and host time per call (in CPU mode the comparison's interpreter time is the only clock)."""
    if rows not in _measured:
        fns = calls_for(rows)
        with torch.no_grad():
            calls = helpers.compare_calls({"fused": fns["fused"], "two_pass": fns["two_pass"]}, fns["torch"])
            if helpers.HAS_GPU:
                host = {v: helpers.host_ms_per_call(fn, HOST_CALLS, HOST_LOOPS) for v, fn in fns.items()}
            else:
                host = {v: calls.ms[helpers.REFERENCE if v == "torch" else v] for v in fns}
        _measured[rows] = (calls, host)
    return _measured[rows]


def ms(version, rows):
    """Median GPU time per call over the rounds (interpreter wall time in CPU mode)."""
    return measured(rows)[0].ms[helpers.REFERENCE if version == "torch" else version]


def host_ms(version, rows):
    return measured(rows)[1][version]


def to_torch(version, rows):
    """(Ratio to Qwen3RMSNorm, round by round, and its verdict against the A/A floor)."""
    calls = measured(rows)[0]
    return calls.ratios[version], calls.verdict(version)


def two_pass_to_fused(rows):
    """(Ratio two-pass / fused, round by round, and its verdict): each round's two times share the round, so
    their ratio is the ratio of their ratios to the reference."""
    calls = measured(rows)[0]
    r = helpers.Ratio.of([a / b for a, b in zip(calls.ratios["two_pass"].values, calls.ratios["fused"].values)])
    return r, helpers.verdict(r, calls.floor)


_launches = {}


def kernels_per_call(version, rows):
    """Kernels one call launches; None for PyTorch in CPU mode (the count there sees our kernels only)."""
    if version == "torch" and not helpers.HAS_GPU:
        return None
    if (version, rows) not in _launches:
        with torch.no_grad():
            _launches[version, rows] = helpers.launches_per_call(calls_for(rows)[version])
    return _launches[version, rows]


torch_launches = kernels_per_call("torch", R1)
print(f"PyTorch Qwen3RMSNorm on [{R1}, {H}], kernels per call:", helpers.fmt(torch_launches, 0))

# %% [markdown]
# ## The fused kernel
#
# The fused kernel does everything in one launch: each program loads its row once, computes the mean
# square in fp32 in registers, normalises, multiplies by the weight and writes the row once. Per call
# that is $R$ rows of $H$ elements read and written once each, plus the weight:
# about $2RHe$ bytes for an element size of $e$ bytes.
#
# The launcher also passes `num_warps`, the warps of 32 threads each program gets (chapter 2), chosen by
# `slower_kernels.configs.row_num_warps` from the row's block size: 4 below 2,048 elements, 8 from 2,048, 16 from
# 8,192. A Qwen3 hidden state of 1,024 numbers gets 4 warps, 128 threads with 8 elements each.

# %%
rmsnorm_src = inspect.getmodule(slower_kernels.rmsnorm_fused)
print(inspect.getsource(rmsnorm_src.rmsnorm_fused_kernel.fn))
print(inspect.getsource(slower_kernels.rmsnorm_fused))

# %% [markdown]
# ### Is it correct?
#
# Fresh random rows and random weights. We compare with two references: PyTorch's `Qwen3RMSNorm` in the
# same dtype (the module our kernel will replace), and the same module run in float64, a higher-precision
# reference for the pass/fail line and for the recorded error. The tolerance is relative to the largest
# output: fp16 keeps about three significant digits, and the computation rounds twice (after normalising
# and after scaling), so we allow a small fraction of the largest value, per dtype, from
# `helpers.TOLERANCE["kernel"]` (the check prints it).

# %%
REL_TOL = helpers.TOLERANCE["kernel"]  # per dtype, relative to the largest output


def check(fn, name, rows=R, seed=1):
    """Max error of fn(x, w, eps) against Qwen3RMSNorm (same dtype) and a float64 reference; asserts."""
    x, norm = make_case(rows, seed)
    with torch.no_grad():
        same_dtype = norm(x)
        ref = Qwen3RMSNorm(H, eps=1e-6).to(DEVICE, torch.float64)
        ref.weight.copy_(norm.weight.double())
        ref_out = ref(x.double())
    ours = fn(x, norm.weight, norm.variance_epsilon)
    err_same = (ours.double() - same_dtype.double()).abs().max().item()
    err_ref = (ours.double() - ref_out).abs().max().item()
    tol = REL_TOL[DTYPE] * ref_out.abs().max().item()
    ok = err_ref <= tol
    print(f"{name}: [{rows}, {H}] {str(DTYPE)[6:]}  max |ours - Qwen3RMSNorm| = {err_same:.3g}   "
          f"max |ours - float64 reference| = {err_ref:.3g} (tolerance {tol:.3g})")
    print(f"{name} check:", "PASS" if ok else "FAIL")
    assert ok, f"{name} is off by {err_ref} (tolerance {tol})"
    return err_ref


helpers.record("rmsnorm.max_err_fused", check(slower_kernels.rmsnorm_fused, "fused"), "abs",
               f"max |fused - float64 reference|, [{R}, {H}], {str(DTYPE)[6:]}")
print("recorded as rmsnorm.max_err_fused")

# %% [markdown]
# ### Timing the fused kernel against PyTorch
#
# What to expect depends on the shape and on the clock. On the GPU clock the bytes weigh more as the rows
# grow: both versions read the input and write the output, and PyTorch's chain also writes and re-reads
# fp32 intermediates, so it moves more. How many rows it takes before the bytes outweigh each kernel's
# fixed cost depends on the GPU: on a large one, with the rows in its L2 cache, the fixed cost can still
# set most of the time at hundreds of rows. With a single row (what decoding one token looks like)
# the bytes are negligible and each kernel's fixed start-up cost on the GPU decides: one kernel for ours
# against the number PyTorch printed above. On the host clock the count matters too, but so does what
# each launch costs the host around it: our launcher is Python code that checks its inputs and allocates
# its output before launching, while PyTorch's chain pays its dispatcher once per op. Which of the two
# costs the host more per call is for the host clock to say.

# %%
HOST_COL = "host µs per call (one reading)"


def against(v, other):
    """A verdict in a sentence: '1.85x faster than PyTorch', or 'within noise of PyTorch' with the rule that
    held it back (``Verdict.reason``)."""
    return f"{v.text} than {other}" if v.real else f"within noise of {other} ({v.reason})"


def direction(v) -> str:
    """A verdict's direction in one word: 'slower', 'faster', or 'no change' when it is within noise."""
    return "no change" if not v.real else "slower" if v.ratio > 1 else "faster"


def num(value) -> str:
    """A time or a rate for prose, to three significant digits: 0.00612, 1.83, 13.0, 245, 4,308."""
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:#.3g}".rstrip(".")  # '#' keeps the zeros that count (13.0), rstrip the point of '245.'


def host_words(a_us, b_us, a, b) -> str:
    """Two host readings side by side, as single readings: no rounds, so a ratio and no verdict."""
    return (f"{num(a_us)} µs for {a} against {num(b_us)} µs for {b}, a ratio of {a_us / b_us:.2f} ({HOST_READING} "
            "each, with no rounds: no spread, so no verdict)")


def gpu_us(version, rows) -> str:
    """The median GPU time of one call in µs, to three significant digits (interpreter time in CPU mode)."""
    return num(1e3 * ms(version, rows))


def spread(r):
    """A Ratio as '0.176 (quartiles 0.175-0.177)': the median to the quartiles' digits."""
    return f"{r.median_text} (quartiles {r.quartiles})"


def kernel_row(version, rows):
    """One line of a timing table: both clocks, the ratio to PyTorch and the launch count of one version."""
    calls = measured(rows)[0]
    r = calls.floor if version == "torch" else calls.ratios[version]
    return {"shape": f"[{rows}, {H}]", "version": VERSIONS[version],
            f"{CLOCK} µs (median of {calls.rounds} rounds)": gpu_us(version, rows),
            f"{CLOCK}-time ratio to PyTorch": f"{spread(r)}" + (" A/A" if version == "torch" else ""),
            **({HOST_COL: num(1e3 * host_ms(version, rows))} if helpers.HAS_GPU else {}),
            "kernels per call": helpers.fmt(kernels_per_call(version, rows), 0)}


for rows in (R, R1):  # every version at both shapes, once; the two-pass kernel is read further down
    measured(rows)
    for version in VERSIONS:
        kernels_per_call(version, rows)
rounds_note = f"{KERNEL_CLOCK}, median of {measured(R)[0].rounds} shuffled rounds"
helpers.record("rmsnorm.torch_ms", ms("torch", R), "ms", f"Qwen3RMSNorm, [{R}, {H}], {rounds_note}")
helpers.record("rmsnorm.fused_ms", ms("fused", R), "ms", f"fused kernel, [{R}, {H}], {rounds_note}")
helpers.record("rmsnorm.decode_torch_ms", ms("torch", R1), "ms", f"Qwen3RMSNorm, [{R1}, {H}], {rounds_note}")
helpers.record("rmsnorm.decode_fused_ms", ms("fused", R1), "ms", f"fused kernel, [{R1}, {H}], {rounds_note}")
helpers.show(pd.DataFrame([kernel_row(v, rows) for rows in (R, R1) for v in ("torch", "fused")]))
print(f"{CLOCK} = {KERNEL_CLOCK}; the PyTorch row's ratio is PyTorch against itself: the A/A floor")

# %%
(fused_main_r, fused_main), (fused_decode_r, fused_decode) = to_torch("fused", R), to_torch("fused", R1)
helpers.md(
    f"On the {CLOCK} clock, with {R} rows the fused kernel took **{gpu_us('fused', R)} µs** against PyTorch's "
    f"{gpu_us('torch', R)} µs (medians of {measured(R)[0].rounds} shuffled rounds), a ratio of "
    f"{spread(fused_main_r)} with an A/A floor of {measured(R)[0].floor.median:.3f}: "
    f"**{against(fused_main, 'PyTorch')}**. With {R1} row, {gpu_us('fused', R1)} against {gpu_us('torch', R1)} "
    f"{CLOCK} µs, a ratio of {spread(fused_decode_r)}: **{against(fused_decode, 'PyTorch')}**. "
    + (f"On the host clock, one call at {R1} row cost "
       + host_words(1e3 * host_ms("fused", R1), 1e3 * host_ms("torch", R1), "the fused kernel", "PyTorch's chain")
       + ". " if helpers.HAS_GPU else
       "(In CPU mode that compares the Triton interpreter with PyTorch's compiled CPU code: the ratio says "
       "nothing about GPUs.) ")
    + "On its T4 the blog found its own fused version only a little slower than PyTorch's (it gives no "
    "number, and it timed with `triton.testing.do_bench`, whose clock mixes host and GPU time at these "
    "sizes), and that is what led it to un-fuse the kernel."
)

# %% [markdown]
# ## Un-fusing: two kernels instead of one
#
# To make the kernel worse without changing the result, we split it where the data naturally breaks:
#
# 1. **pass 1** reads each row, computes its inverse RMS $1/\sqrt{\text{mean}(x^2) + \varepsilon}$ and
#    writes that one number per row to a buffer in global memory;
# 2. **pass 2** reads each row *again*, reads its number back from the buffer, scales by the weight and
#    writes the output.
#
# The arithmetic is identical. What changes is the traffic and the launches:

# %%
print(inspect.getsource(rmsnorm_src.rmsnorm_inv_rms_kernel.fn))
print(inspect.getsource(rmsnorm_src.rmsnorm_scale_kernel.fn))


E = torch.tensor([], dtype=DTYPE).element_size()  # bytes per element


def moved_bytes(rows, version):
    """Bytes one call reads and writes (the input, the output, the weight, the fp32 buffer)."""
    if version == "fused":
        return 2 * rows * H * E + H * E  # x read once, y written once, the weight
    return 3 * rows * H * E + 2 * 4 * rows + H * E  # x read twice; inv_rms written once, read once


x, norm = make_case(R1)
with slower_kernels.count_launches() as fused_launches:
    slower_kernels.rmsnorm_fused(x, norm.weight)
with slower_kernels.count_launches() as two_pass_launches:
    slower_kernels.rmsnorm_two_pass(x, norm.weight)
assert sum(fused_launches.values()) == 1 and sum(two_pass_launches.values()) == 2

helpers.show(pd.DataFrame([
    {"version": "PyTorch Qwen3RMSNorm", "launches per call": helpers.fmt(torch_launches, 0),
     f"bytes for [{R}, {H}]": "more (each op of the chain reads and writes)"},
    {"version": "fused", "launches per call": sum(fused_launches.values()),
     f"bytes for [{R}, {H}]": f"{moved_bytes(R, 'fused'):,}"},
    {"version": "two-pass", "launches per call": sum(two_pass_launches.values()),
     f"bytes for [{R}, {H}]": f"{moved_bytes(R, 'two_pass'):,}"},
]))

# %% [markdown]
# So the two-pass version moves about 1.5 times the bytes of the fused one (the input travels twice) and
# launches twice as often. That gives two predictions for the GPU clock, one per regime. Where the launches
# dominate (one row), two-pass should take about twice as long as fused: two kernel start-ups instead of one.
# Where the bytes dominate (enough rows to outweigh the fixed cost), about 1.5 times as long. So as the rows
# grow, the ratio should fall from near 2 towards 1.5; the sweep below checks all three (each point within the
# series' 20% prediction bar, `helpers.PREDICTION_BAR`, or not). Against PyTorch the picture also depends on
# how many kernels PyTorch's own chain launches, and on the host clock on what each launch costs there.
#
# ### What the compiler made of the two versions
#
# Chapter 2 compiled its add ahead of time for a T4 (`sm_75`) and an H100/H200 (`sm_90`) and read the result
# ([What the compiler made](02_add_kernel.ipynb#What-the-compiler-made): registers, shared memory, programs
# per SM, vectorised loads). Here are the fused kernel and the two kernels of the un-fused pair, compiled the
# same way (fp16, a row of 1,024 numbers, Qwen3-0.6B's hidden size), on the CPU in a separate process, so
# this section reads the same in every mode. Two things are new compared with the add:
#
# - **a reduction.** `tl.sum(x * x, axis=0)` adds numbers held by all the threads of a program. Each thread
#   first adds its own elements in registers; then the threads of a **warp** (32 threads that execute in
#   lockstep, chapter 2) swap partial sums with *shuffles*, register-to-register exchanges inside the warp;
#   then the warps of the program pass their sums through **shared memory**, the on-chip memory of the SM
#   that all of a program's threads share, with a *barrier* (`bar.sync`) that waits until every warp has
#   written its sum before any reads them;
# - **the pair's extra traffic.** Pass 1 ends with a store of one fp32 number per row, pass 2 begins by
#   loading it back, and pass 2 loads the row of `x` that pass 1 already had.

# %%
from slower_kernels import aot  # what the compiler made

ROW_KERNELS = ("rmsnorm_fused_kernel", "rmsnorm_inv_rms_kernel", "rmsnorm_scale_kernel")
PROPERTIES = {"num_warps": "warps per program (num_warps)", "registers": "registers per thread",
              "shared": "shared memory per program (bytes)", "programs_per_sm": "programs per SM at once",
              "limited_by": "... limited by", "global loads": "global loads (PTX instructions)",
              "widest global load": "widest global load", "global stores": "global stores",
              "shared loads": "shared-memory loads", "shared stores": "shared-memory stores", "fma": "fma"}
SHORT = {"rmsnorm_fused_kernel": "fused", "rmsnorm_inv_rms_kernel": "pass 1", "rmsnorm_scale_kernel": "pass 2"}

compiled = helpers.compiler_table(list(ROW_KERNELS))
helpers.show(pd.DataFrame({f"{SHORT[k]}, sm_{cc}": row for k, cc, row in
                           zip(compiled["kernel"], compiled["cc"], compiled[list(PROPERTIES)].to_dict("records"))})
             .rename(index=PROPERTIES).rename_axis("compiled for"))
print(f"{compiled['label'].iloc[0]}, fp16; sm_75: {aot.SM_LIMITS[75]['gpu']}, sm_90: {aot.SM_LIMITS[90]['gpu']}; "
      "pass 1 = rmsnorm_inv_rms_kernel, pass 2 = rmsnorm_scale_kernel; instructions counted as written in the PTX")


# %%
def compiled_reading(table) -> str:
    """What the table says, per target: the vector width, the pair's extra loads and stores against the fused
    kernel, the reduction's shared memory, and the programs per SM with the limit that sets them."""
    parts = []
    for cc, rows in table.groupby("cc"):
        k = rows.set_index("kernel")
        fused, p1, p2 = (k.loc[name] for name in ROW_KERNELS)
        loads = int(p1["global loads"] + p2["global loads"]), int(fused["global loads"])
        stores = int(p1["global stores"] + p2["global stores"]), int(fused["global stores"])
        threads = 32 * int(fused["num_warps"])
        gpu = {75: "a T4", 90: "an H100 or H200"}[cc]
        text = (f"**sm_{cc}** ({gpu}): the widest global load is `{fused['widest global load']}` "
                f"in all three kernels" if len(set(rows["widest global load"])) == 1 else
                f"**sm_{cc}** ({gpu}): widest global loads "
                + ", ".join(f"`{w}` ({SHORT[n]})" for n, w in zip(rows["kernel"], rows["widest global load"])))
        text += (f"; {threads} threads share a row of {TEACHING_ROW:,}, {TEACHING_ROW // threads} numbers each. "
                 f"The pair holds {loads[0]} global load instructions and {stores[0]} global stores against the fused "
                 f"kernel's {loads[1]} and {stores[1]}: ")
        text += (f"pass 2 loads `x` again and the fp32 inverse RMS that pass 1 stored "
                 f"({int(p1['global stores'])} store in pass 1, {int(p2['global loads'])} loads in pass 2"
                 + (": `x`, the weight and that number). " if int(p2["global loads"]) == 3 else "). ")
                 if loads[0] > loads[1] else "no more than the fused kernel. ")
        smem = {SHORT[n]: int(b) for n, b in zip(rows["kernel"], rows["shared"])}
        text += ("Shared memory: " + ", ".join(f"{b} bytes ({name})" for name, b in smem.items())
                 + (f", the reduction's scratch space: {int(fused['num_warps'])} warps hand over one fp32 partial "
                    "sum each" if smem["fused"] == 4 * int(fused["num_warps"]) else ", the reduction's scratch space")
                 + ("; pass 2 has no reduction and uses none. " if smem["pass 2"] == 0 else ". "))
        text += ("Programs per SM: " + ", ".join(f"{int(r['programs_per_sm'])} ({SHORT[r['kernel']]}, limited by "
                                                 f"{r['limited_by']})" for _, r in rows.iterrows()) + ". ")
        parts.append(text)
    return "\n\n".join(parts)


TEACHING_ROW = aot.TEACHING_ROW
helpers.md(compiled_reading(compiled) + "\n\nThese are static counts: every instruction once, as written. Per row, "
           "the pair's extra instructions are what the byte count above says in bytes: `x` crosses from memory "
           "twice, and one fp32 number per row makes a round trip through global memory between two launches.")

# %% [markdown]
# The reduction of the fused kernel, in its `sm_90` PTX (`helpers.ptx_excerpt`, the lines that exchange
# partial sums), and then the loads and stores of pass 2:

# %%
print(helpers.ptx_excerpt("rmsnorm_fused_kernel", compiled["label"].iloc[0], 90,
                          r"shfl|bar\.sync|ld\.shared|st\.shared", max_lines=14))
print("---")
print(helpers.ptx_excerpt("rmsnorm_scale_kernel", compiled["label"].iloc[0], 90, r"ld\.global|st\.global"))

# %% [markdown]
# How to read them:
#
# - `shfl.sync.bfly.b32 %r46, %r45, 16, 31, -1` is a *butterfly shuffle*: every thread of the warp gets the
#   value of the thread whose lane number differs from its own by 16 (then 8, 4, 2, 1 in the next lines)
#   and adds it to its own. After five steps every thread of the warp holds the warp's whole sum, without
#   touching memory.
# - `st.shared.b32` writes one warp's sum to shared memory; `bar.sync 0` waits until every warp of the
#   program has got there; `ld.shared.b32` reads the sums back, a couple more shuffles add the warps' sums
#   together, and the total is shared once more so that every thread can scale its own numbers by it.
# - In pass 2, `ld.global.v4.b32` loads eight fp16 numbers of `x` (and, in another, of the weight) per
#   instruction, as in chapter 2; the lone `ld.global.b32` without `.v4` is the one fp32 inverse RMS of the
#   row, written by pass 1 a launch earlier. The fused kernel keeps that number in a register.
#
# ### Is it still correct?

# %%
helpers.record("rmsnorm.max_err_two_pass", check(slower_kernels.rmsnorm_two_pass, "two-pass"), "abs",
               f"max |two-pass - float64 reference|, [{R}, {H}], {str(DTYPE)[6:]}")
print("recorded as rmsnorm.max_err_two_pass")

# %% [markdown]
# ### Two-pass against PyTorch
#
# The timings were taken above together with the fused ones, in the same rounds (the same measurement,
# read again); here are all three versions at both shapes, and the ratios on the GPU clock.

# %%
calls_R, calls_R1 = measured(R)[0], measured(R1)[0]
(ratio, two_pass_main), (decode_ratio, two_pass_decode) = to_torch("two_pass", R), to_torch("two_pass", R1)
helpers.record("rmsnorm.two_pass_ms", ms("two_pass", R), "ms", f"two-pass kernel, [{R}, {H}], {rounds_note}")
calls_R.record("two_pass", "rmsnorm.two_pass_ratio", f"two-pass / Qwen3RMSNorm, [{R}, {H}] (below 1: two-pass faster)")
helpers.record("rmsnorm.decode_two_pass_ms", ms("two_pass", R1), "ms", f"two-pass kernel, [{R1}, {H}], {rounds_note}")
calls_R1.record("two_pass", "rmsnorm.decode_two_pass_ratio",
                f"two-pass / Qwen3RMSNorm, [{R1}, {H}] (below 1: two-pass faster)")
helpers.record("rmsnorm.host_decode_torch_ms", host_ms("torch", R1), "ms",
               f"Qwen3RMSNorm, [{R1}, {H}], {HOST_CLOCK}, {HOST_READING}")
helpers.record("rmsnorm.host_decode_two_pass_ms", host_ms("two_pass", R1), "ms",
               f"two-pass kernel, [{R1}, {H}], {HOST_CLOCK}, {HOST_READING}")
helpers.show(pd.DataFrame([kernel_row(v, rows) for rows in (R, R1) for v in VERSIONS]))
for rows, r, v in ((R, ratio, two_pass_main), (R1, decode_ratio, two_pass_decode)):
    print(f"[{rows}, {H}]: two-pass {gpu_us('two_pass', rows)} µs, PyTorch {gpu_us('torch', rows)} µs "
          f"({KERNEL_CLOCK}), ratio {spread(r)}, A/A floor {measured(rows)[0].floor.median:.3f}: {v.text}"
          + ("" if v.real else f" ({v.reason})"))


# %%
ROWS = sorted(set(SIZES.rmsnorm_sweep_rows) | {R, R1})  # the row counts of the sweep below


def near_median(readings) -> pd.Series:
    """Which ``readings`` lie within ``helpers.PREDICTION_BAR`` of their median, one bool each, the distance read the
    same way on either side (larger / smaller - 1, as ``prediction_word`` reads it): the host readings the flat-host
    prediction counts as flat (``host_flat_reading``), and the ones ``host_scatter_us`` keeps."""
    readings = pd.Series(readings, dtype=float)
    mid = readings.median()
    near = (readings.where(readings > mid, mid) / readings.where(readings < mid, mid) - 1) <= helpers.PREDICTION_BAR
    return near & readings.notna()


def host_scatter_us(version) -> float:
    """How far single host readings of one ``version`` call moved across the sweep's row counts (below; measured on
    first use), highest minus lowest in µs, where its GPU time stayed below its host time: this chapter's measure of
    the host's variation between single readings (0 with fewer than two). Readings further than
    ``helpers.PREDICTION_BAR`` from the version's median are left out (``near_median``): one slow moment of the
    host lifts every version read at that row count, and would set the scatter alone."""
    reads = pd.Series([1e3 * host_ms(version, rows) for rows in ROWS if ms(version, rows) < host_ms(version, rows)],
                      dtype=float)
    kept = reads[near_median(reads)]
    return float(kept.max() - kept.min()) if len(kept) > 1 else 0.0


def blog_direction_reading() -> str:
    """The blog's two-pass / PyTorch ratio (a T4, `do_bench`) beside ours at [R, H]: the same direction or the
    opposite one, on the GPU clock and (one reading each) on the host clock, and what may explain it."""
    blog_v = helpers.verdict(helpers.blog("rmsnorm.two_pass_ratio"))  # one number: the 5% rule alone
    text = (f"The blog measured its two-pass kernel **{blog_v.text}** than PyTorch 'overall' on a T4, without the "
            "shape and with `triton.testing.do_bench`, whose clock mixes host and GPU time; it also found the gap "
            "larger at small batch sizes. ")
    if helpers.MODE == "cpu":
        return text + "CPU mode has no GPU clock to set beside it. "
    ours = direction(two_pass_main)
    if ours == direction(blog_v):
        return text + (f"Here, on the {CLOCK} clock, it came out {two_pass_main.text} too: the same direction, on "
                       f"different clocks (here {KERNEL_CLOCK}, there `do_bench`). ")
    if ours == "no change":
        return text + (f"Here, on the {CLOCK} clock ({KERNEL_CLOCK}), the two are within noise of each other "
                       f"({two_pass_main.reason}). ")
    host_ratio = host_ms("two_pass", R) / host_ms("torch", R)  # one reading each: a direction only beyond 5%
    host_same = direction(helpers.verdict(host_ratio)) == ours
    readings = f"{num(1e3 * host_ms('two_pass', R))} against {num(1e3 * host_ms('torch', R))} host µs per call"
    # a single host reading points a direction only where the two differ by more than single readings of one call
    # scatter across the sweep; within that scatter it only leans
    gap_us = 1e3 * abs(host_ms("two_pass", R) - host_ms("torch", R))
    scatter_us = max(host_scatter_us(v) for v in ("two_pass", "torch")) if host_same else 0.0
    both = host_same and 0.0 < scatter_us < gap_us
    text += (f"Here it came out **{two_pass_main.text}** on the {CLOCK} clock"
             + (f", and one host reading of each points the same way ({readings}, {num(gap_us)} µs apart, more than "
                f"single host readings of one call scatter across the sweep below, up to {num(scatter_us)} µs "
                f"once readings more than {100 * helpers.PREDICTION_BAR:.0f}% from their median are left out)"
                if both else "")
             + ": **the opposite direction**"
             + (", on both clocks, so the clocks alone do not explain it. " if both else ". ")
             + ("" if both or not host_same else
                f"One host reading of each leans the same way ({readings}), but their {num(gap_us)} µs difference "
                f"lies within how far single host readings of one call scatter across the sweep below (up to "
                f"{num(scatter_us)} µs, readings more than {100 * helpers.PREDICTION_BAR:.0f}% from their median "
                "left out), so the host clock adds no direction of its own. " if scatter_us > 0 else
                f"One host reading of each leans the same way ({readings}); the sweep below has no spread of single "
                "host readings to set that against, so the host clock adds no direction of its own. "))
    text += (f"The likely reason is the reference. Ours is transformers' eager `Qwen3RMSNorm`, a chain of "
             f"{helpers.fmt(torch_launches, 0)} kernels passing fp32 intermediates through memory; the blog does not "
             "name the PyTorch RMSNorm it timed, and its finding that its own *fused* kernel was only a little "
             "slower than that reference suggests a different one, one that launches fewer kernels. ")
    return text


helpers.md(
    f"At **[{R}, {H}]** ({CLOCK} time) the two-pass kernel took {gpu_us('two_pass', R)} µs against PyTorch's "
    f"{gpu_us('torch', R)} µs, a ratio of {spread(ratio)}: **{against(two_pass_main, 'PyTorch')}**, and "
    f"{against(two_pass_to_fused(R)[1], 'our own fused kernel')}. "
    f"At **[{R1}, {H}]** it took {gpu_us('two_pass', R1)} {CLOCK} µs against {gpu_us('torch', R1)}, a ratio of "
    f"{spread(decode_ratio)}: **{against(two_pass_decode, 'PyTorch')}**, and "
    f"{against(two_pass_to_fused(R1)[1], 'fused')}. "
    "Whether the ratio to PyTorch depends on the number of rows is a question for more than two shapes: the "
    "sweep below reads it from every row count. "
    + ("(In CPU mode these ratios compare the interpreter with PyTorch's compiled CPU code: read the method, "
       "not the numbers.) " if helpers.MODE == "cpu" else "")
    + blog_direction_reading()
)

# %% [markdown]
# ## A sweep over the number of rows
#
# Now the same three versions at hidden size $H$ from one row to thousands, on both clocks: the GPU clock in
# shuffled rounds with an A/A floor per row count, the host clock one reading per version and row count. On
# the GPU clock we expect the two-pass penalty over fused to sit near 2x (twice the kernel start-ups) at few
# rows and to drift towards 1.5x (one and a half times the bytes) at many, if the GPU gets that far into the
# memory-bound regime. How far it gets depends on where the bytes come from: a replayed call finds its working
# set in the GPU's L2 cache as long as it fits there (tens of MB on an H200, 4 MB on a T4; chapter 2 measured
# yours), and from the cache the bytes come fast, so a kernel's fixed costs keep a larger share of its time.
# The reading below says whether the sweep's largest point leaves the cache on your GPU. The host clock
# should barely move with the rows until the kernels themselves take longer than launching them: as long as
# a version's GPU time stays below its host time, we expect each of its host readings within the series'
# prediction bar (`helpers.PREDICTION_BAR`, 20%) of that version's median reading across the sweep. The two
# shapes of the tables above are points of the sweep, not measured again.

# %%
VS_TORCH, VS_FUSED = f"two_pass_vs_torch ({CLOCK})", f"two_pass_vs_fused ({CLOCK})"


def sweep_row(rows):
    out = {"rows": rows}
    for v in VERSIONS:
        out[f"{v}_{'gpu' if helpers.HAS_GPU else 'interpreter'}_ms"] = ms(v, rows)
        if helpers.HAS_GPU:
            out[f"{v}_host_ms"] = host_ms(v, rows)
    for column, (r, v) in ((VS_TORCH, to_torch("two_pass", rows)), (VS_FUSED, two_pass_to_fused(rows))):
        out[column], out[f"{column} low"], out[f"{column} high"] = r.median, r.low, r.high
        out[f"{column} verdict"] = v.text
    out["A/A floor"] = measured(rows)[0].floor.median
    out["fused_bytes"], out["two_pass_bytes"] = moved_bytes(rows, "fused"), moved_bytes(rows, "two_pass")
    return out


sweep = pd.DataFrame([sweep_row(r) for r in helpers.progress(ROWS, desc="RMSNorm sweep")])
helpers.save_sweep(sweep, "rmsnorm_sweep")


def sweep_view(sweep):
    """The sweep as the table shows it: µs to three significant digits, each ratio with its quartiles and
    verdict in one cell (the saved CSV keeps every column, bytes included)."""
    view = pd.DataFrame({"rows": sweep["rows"]})
    clocks = ("gpu", "host") if helpers.HAS_GPU else ("interpreter",)
    for v in VERSIONS:
        for clock in clocks:
            view[f"{v} {clock} µs"] = [num(1e3 * t) for t in sweep[f"{v}_{clock}_ms"]]
    for column in (VS_TORCH, VS_FUSED):
        view[column] = [f"{spread(helpers.Ratio(m, lo, hi, []))}, {word}" for m, lo, hi, word in
                        zip(sweep[column], sweep[f"{column} low"], sweep[f"{column} high"], sweep[f"{column} verdict"])]
    view["A/A floor"] = [f"{f:.3f}" for f in sweep["A/A floor"]]
    return view


helpers.show(sweep_view(sweep))
print(f"{CLOCK} = {KERNEL_CLOCK}, medians of {measured(R1)[0].rounds} shuffled rounds; ratios: median (quartiles of "
      "the per-round ratios), verdict; A/A floor: PyTorch against itself"
      + (f"; host = {HOST_CLOCK}, one reading each" if helpers.HAS_GPU else ""))

# %%
fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(11, 5))
styles = {"torch": ("PyTorch Qwen3RMSNorm", "tab:blue"), "fused": ("fused (1 launch)", "tab:orange"),
          "two_pass": ("two-pass (2 launches)", "tab:green")}
for v, (label, color) in styles.items():  # colour: the version; line style: the clock (one legend for each)
    if helpers.HAS_GPU:
        ax_t.plot(sweep["rows"], 1e3 * sweep[f"{v}_gpu_ms"], "o-", color=color)
        ax_t.plot(sweep["rows"], 1e3 * sweep[f"{v}_host_ms"], "x--", color=color, alpha=0.6)
    else:
        ax_t.plot(sweep["rows"], 1e3 * sweep[f"{v}_interpreter_ms"], "o-", color=color)
handles = [Line2D([], [], color=color, lw=2, label=label) for label, color in styles.values()]
clocks = ([("o-", "GPU time"), ("x--", "host time per call (one reading)")] if helpers.HAS_GPU else
          [("o-", "interpreter wall time")])
handles += [Line2D([], [], color="grey", ls=style[1:], marker=style[0], label=name) for style, name in clocks]
ax_t.set(xscale="log", yscale="log", xlabel=f"rows (hidden size {H}; K = 1024)",
         ylabel="µs per call (GPU time; host time dashed)" if helpers.HAS_GPU else "interpreter µs per call",
         title="Does un-fusing cost more at few rows or at many?")
for column, marker, color, label in ((VS_TORCH, "o-", "tab:purple", "two-pass / PyTorch"),
                                     (VS_FUSED, "s-", "tab:red", "two-pass / fused")):  # not the left panel's colours
    errors = [sweep[column] - sweep[f"{column} low"], sweep[f"{column} high"] - sweep[column]]
    ax_r.errorbar(sweep["rows"], sweep[column], yerr=errors, fmt=marker, color=color, capsize=3,
                  label=f"{label} (median, quartiles)")
ax_r.axhline(2.0, color="grey", ls=":", label="2x: twice the launches")
ax_r.axhline(1.5, color="grey", ls="--", label="1.5x: 1.5 times the bytes")
ax_r.axhline(1.0, color="black", lw=0.8)
ax_r.set_ylim(bottom=0)
ax_r.set(xscale="log", xlabel=f"rows (hidden size {H}; K = 1024)",
         ylabel=f"{CLOCK}-time ratio (above 1: two-pass slower)",
         title="Two-pass against PyTorch and against fused")
# one tick per row count, written 1K = 1024 (short labels: 256, 512, 1K fit side by side); where neighbours
# sit closer than 2x apart the labels would touch at this width, so they are turned
row_ticks = list(sweep["rows"])
crowded = any(b / a < 2 for a, b in pairwise(row_ticks))
for ax, legend in ((ax_t, {"handles": handles, "ncol": 2}), (ax_r, {"ncol": 2})):
    helpers.plain_log_ticks(ax, "x", row_ticks, [helpers.count_label(r) for r in row_ticks])
    if crowded:
        ax.tick_params(axis="x", labelrotation=45)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.24 if crowded else -0.17),
              **legend)  # below the axes and their tick labels: no overlap
helpers.plain_log_ticks(ax_t, "y")
fig.suptitle(f"RMSNorm, {str(DTYPE)[6:]}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "rmsnorm_sweep")
plt.show()


# %%
def n_rows(r):
    return f"{int(r):,} row" + ("" if r == 1 else "s")


def rows_trend(trend) -> str:
    """``helpers.read_trend``'s reading with every point."""
    return f"{trend.text} ({trend.points})"


def prediction_word(measured_ratio, predicted) -> str:
    """'met' or 'missed by 21.0%': a measured ratio against the markdown's prediction, by the series' prediction
    bar (``helpers.PREDICTION_BAR``), the distance read the same way on either side (``helpers.signed_pct``
    widens its digits where it would print as the bar)."""
    off = max(measured_ratio / predicted, predicted / measured_ratio) - 1
    return "met" if off <= helpers.PREDICTION_BAR else f"missed by {helpers.signed_pct(100 * off, sign='')}"


def measured_x(measured_ratio, predicted) -> str:
    """A measured ratio to 2 decimals, more (up to 4) where it would print as the edge of the prediction's bar:
    1.802 against a predicted 1.5 must not read 1.80, which lies exactly 20% above it."""
    edges = (predicted * (1 + helpers.PREDICTION_BAR), predicted / (1 + helpers.PREDICTION_BAR))
    return f"{measured_ratio:.{helpers.places_apart(measured_ratio, edges)}f}"


def against_prediction(measured_ratio, predicted) -> str:
    """'1.802x against a predicted 1.5x: **missed by 20.1%** (20.1% above it; bar 20%)'."""
    side = "above" if measured_ratio > predicted else "below"
    off = max(measured_ratio / predicted, predicted / measured_ratio) - 1
    word = prediction_word(measured_ratio, predicted)
    return (f"{measured_x(measured_ratio, predicted)}x against a predicted {predicted:g}x: **{word}** "
            f"({helpers.signed_pct(100 * off, sign='')} {side} it; bar {100 * helpers.PREDICTION_BAR:.0f}%)")


def host_flat_reading(sweep) -> str:
    """The sweep's host-time prediction (flat with the rows while the GPU time stays below the host time), against
    the readings: per version, how many lie within ``helpers.PREDICTION_BAR`` of that version's median, and
    whether the rest follow the rows (``helpers.read_trend`` on the single readings) or scatter."""
    bar = helpers.PREDICTION_BAR
    parts, inside_all, total, trends = [], 0, 0, {}
    for v, name in VERSIONS.items():
        host = 1e3 * sweep[f"{v}_host_ms"]
        ok = sweep[f"{v}_gpu_ms"] < sweep[f"{v}_host_ms"]  # the kernels shorter than launching them
        h = host[ok]
        if len(h) < 2:
            continue
        mid = h.median()
        inside = int(near_median(h).sum())
        inside_all, total = inside_all + inside, total + len(h)
        trends[v] = helpers.read_trend({r: helpers.Ratio.of([x]) for r, x in zip(sweep.loc[ok, "rows"], h)},
                                       unit="µs", along="the rows")
        spread_text = (f"all at {num(mid)} µs" if num(h.min()) == num(h.max()) else
                       f"{num(h.min())} to {num(h.max())} µs around a median of {num(mid)} µs")
        parts.append(f"{name} {spread_text} ({inside} of {len(h)} within the bar)")
    if not parts:
        return ("No version's GPU time stayed below its host time at two row counts or more, so the flat-host "
                "prediction has nothing to be tested on. ")
    longer = int((sweep[[f"{v}_gpu_ms" for v in VERSIONS]].values >=
                  sweep[[f"{v}_host_ms" for v in VERSIONS]].values).sum())
    text = (f"**The host-time prediction**: flat with the rows, each reading within {100 * bar:.0f}% of its "
            f"version's median, while the GPU time stays below the host time"
            + (" (it did at every row count of every version)" if not longer else
               f" (at {longer} points it did not, and those are left out)")
            + f". Measured: {'; '.join(parts)}: "
            + (f"**met**, all {total} readings within the bar. " if inside_all == total else
               f"**missed**: {total - inside_all} of the {total} readings lie outside the bar. "))
    moved = {v: t for v, t in trends.items() if t.word != "no consistent trend"}
    if inside_all < total:
        if moved:
            text += ("Read along the rows, " + "; ".join(f"the host time of {VERSIONS[v]} {t.text}" for v, t in
                                                         moved.items()) + ": there the host time followed the rows. ")
        still = [VERSIONS[v] for v in trends if v not in moved]
        if still:
            still = still[0] if len(still) == 1 else ", ".join(still[:-1]) + " and " + still[-1]
            text += (f"The readings of {still} follow no trend with the rows (`helpers.read_trend`): they "
                     "scatter from one row count to the next, as single host readings of one call do here, so the "
                     "rows are not what moved them. ")
    return text


def direction_against_prediction(trend) -> str:
    """The predicted fall of the two-pass / fused ratio with the rows, against ``read_trend``'s reading."""
    if trend.word == "shrank":
        return "**met**: the ratio " + trend.text
    return "**missed**: the ratio " + trend.text


def blog_gap_reading(trend, words) -> str:
    """The blog's 'gap larger at small batch sizes' against the two-pass / PyTorch trend of this sweep. The blog's
    ratio was above 1 (two-pass slower); where ours lies below 1 the direction is not shared, only, at most, the
    trend with the rows (``words``: the sweep's verdicts counted as 'slower', 'faster', 'noise')."""
    if trend.word not in ("shrank", "grew"):
        return "so this sweep neither confirms nor contradicts the blog's larger gap at small batch sizes"
    where = "the fewest" if trend.word == "shrank" else "the most"
    if words["slower"] == len(ROWS):  # slower than PyTorch everywhere, as in the blog
        return (f"so the two-pass kernel fared worst against PyTorch at {where} rows, "
                + ("as the blog found its gap largest at small batch sizes" if trend.word == "shrank" else
                   "the other way round from the blog's larger gap at small batch sizes"))
    if words["faster"] == len(ROWS):  # faster than PyTorch everywhere: the blog's direction reversed
        return (f"so the ratio is highest at {where} rows. The blog's ratio lay above 1 (two-pass slower than its "
                "reference, most of all at small batch sizes); here two-pass is faster than PyTorch at every row "
                "count, so its smallest advantage is not the blog's largest gap: "
                + ("only the trend with the rows is shared, not the direction" if trend.word == "shrank" else
                   "neither the direction nor the trend with the rows is shared"))
    return (f"so the ratio is highest at {where} rows, with verdicts on more than one side along the sweep: the "
            "blog's ratio lay above 1 throughout, so only the trend with the rows can be set beside its larger gap "
            "at small batch sizes")


floors = {rows: measured(rows)[0].floor for rows in ROWS}
trend_torch = helpers.read_trend({rows: to_torch("two_pass", rows)[0] for rows in ROWS}, floors, along="the rows")
trend_fused = helpers.read_trend({rows: two_pass_to_fused(rows)[0] for rows in ROWS}, floors, along="the rows")
widest = sweep.loc[sweep[VS_TORCH].idxmax()]
narrowest = sweep.loc[sweep[VS_TORCH].idxmin()]
few, many = sweep.iloc[0], sweep.iloc[-1]
verdicts = {rows: to_torch("two_pass", rows)[1] for rows in ROWS}
words = Counter("noise" if not v.real else v.text.split(" ")[-1] for v in verdicts.values())
held = Counter(v.reason for v in verdicts.values() if not v.real)
groups = [f"{'within noise' if w == 'noise' else w} at {words[w]}" for w in ("slower", "faster", "noise") if words[w]]
rows_judged = (groups[0].replace(" at ", " at all ") + f" {'row count' if len(sweep) == 1 else 'row counts'}"
               if len(groups) == 1 else
               ", ".join(groups[:-1]) + f" and {groups[-1]} of the {len(sweep)} row counts")  # only the groups it has
text = (
    f"Against PyTorch ({CLOCK} time), the two-pass kernel's ratio is largest at **{n_rows(widest['rows'])} "
    f"({widest[VS_TORCH]:.2f})** and smallest at {n_rows(narrowest['rows'])} ({narrowest[VS_TORCH]:.2f}). "
    f"Judged by the series' rule (twice each row count's own A/A floor, and never under 5%), it is {rows_judged}"
    + (" (" + "; ".join(f"{k} of them {reason}" for reason, k in held.items()) + ")" if held else "")
    + f". Read from every point (`helpers.read_trend`), that ratio {rows_trend(trend_torch)}, "
    f"{blog_gap_reading(trend_torch, words)}. "
    f"Against our fused kernel the two-pass kernel's ratio {rows_trend(trend_fused)}. "
)
if helpers.HAS_GPU:
    fixed_share = 100 * few["fused_gpu_ms"] / many["fused_gpu_ms"]  # the one-row call's time, as a share
    L2_BYTES = torch.cuda.get_device_properties(0).L2_cache_size
    fits = many["fused_bytes"] <= L2_BYTES  # input, output and weight: the working set of either kernel
    text += (
        f"\n\n**The predictions**, on the GPU clock: at {n_rows(few['rows'])}, where launches should dominate, "
        f"{against_prediction(few[VS_FUSED], 2.0)}; at {n_rows(many['rows'])}, where the bytes should, "
        f"{against_prediction(many[VS_FUSED], 1.5)}; the fall from near 2 towards 1.5 with the rows: "
        f"{direction_against_prediction(trend_fused)}. At {n_rows(many['rows'])} the fused kernel's one-row GPU "
        f"time, a fixed cost of any call, is still {fixed_share:.0f}% of its time there: the bytes "
        + ("had not yet taken over at the largest shape. " if fixed_share >= 50 else
           "take the larger part of it at the largest shape, but not all. ")
        + (f"And the sweep never left the L2 cache: even at {n_rows(many['rows'])} the working set "
           f"({num(many['fused_bytes'] / 1e6)} MB) fits in this GPU's {num(L2_BYTES / 1e6)} MB of L2, so the 1.5x "
           "prediction, made for calls whose bytes stream from main memory, was tested outside the regime it "
           "describes.\n\n" if fits else
           f"At {n_rows(many['rows'])} the working set ({num(many['fused_bytes'] / 1e6)} MB) exceeds this GPU's "
           f"{num(L2_BYTES / 1e6)} MB of L2: there the bytes stream from main memory, the regime of the 1.5x "
           "prediction.\n\n")
    )
    cheaper = int((sweep["two_pass_host_ms"] < sweep["torch_host_ms"]).sum())
    host_span = 1e3 * sweep["two_pass_host_ms"]
    text += (
        f"**Host clock** ({HOST_READING} per version and row count): one two-pass call cost "
        f"{num(host_span.min())} to {num(host_span.max())} µs across the sweep, while its GPU time went from "
        f"{num(1e3 * few['two_pass_gpu_ms'])} µs at {n_rows(few['rows'])} to {num(1e3 * many['two_pass_gpu_ms'])} "
        f"µs at {n_rows(many['rows'])}; it cost the host less than PyTorch's chain at {cheaper} of the "
        f"{len(sweep)} row counts, each its own single reading. " + host_flat_reading(sweep) + "\n\n"
        f"**Bandwidth.** At {n_rows(many['rows'])} the fused kernel moved "
        f"{num(many['fused_bytes'] / (many['fused_gpu_ms'] * 1e-3) / 1e9)} GB/s and the two-pass one "
        f"{num(many['two_pass_bytes'] / (many['two_pass_gpu_ms'] * 1e-3) / 1e9)} GB/s (the bytes counted above / "
        f"GPU time). Their working set there (input, output and weight, {num(many['fused_bytes'] / 1e6)} MB) "
        + (f"fits in this GPU's {num(L2_BYTES / 1e6)} MB L2 cache, so the replayed calls read it from the cache: "
           "these are the cache's rates, not the main memory's."
           if fits else
           f"exceeds this GPU's {num(L2_BYTES / 1e6)} MB L2 cache, so each call streams it from main memory.")
    )

    def regime_of(point, version, host=True):
        """``helpers.regime`` of one version at one point of the sweep, from both clocks or (``host=False``) from
        the GPU's alone."""
        return helpers.regime(point[f"{version}_host_ms"] if host else None, point[f"{version}_gpu_ms"],
                              4 * point["rows"] * H,  # square, sum, normalise, scale: about 4 flop per element
                              moved_bytes(point["rows"], version))

    OVERHEAD, MEMORY = helpers.REGIMES[:2]
    at_few, at_many = ({v: regime_of(point, v) for v in ("fused", "two_pass")} for point in (few, many))
    alone_many = {v: regime_of(many, v, host=False) for v in ("fused", "two_pass")}

    def listed(regimes) -> str:
        return " and ".join(f"{VERSIONS[v]} {word} ({why})" for v, (word, why) in regimes.items())

    held_few = all(word == OVERHEAD for word, _ in at_few.values())
    held_many = all(word == MEMORY for word, _ in at_many.values())
    alone_memory = all(word == MEMORY for word, _ in alone_many.values())
    text += (
        f"\n\n**The regime, against chapter 1's expectation** (overhead-bound at the decode shape, one row; "
        f"memory-bound at many rows), by `helpers.regime` from each call's two clocks: at {n_rows(few['rows'])}, "
        f"{listed(at_few)}; at {n_rows(many['rows'])}, {listed(at_many)}. "
        + (f"With the host left out, the kernels alone at {n_rows(many['rows'])} are {listed(alone_many)}"
           + (", with their bytes in the L2 cache (above)" if fits else "") + ". "
           if not held_many and alone_memory else "")
        + f"So the expectation {'held' if held_few else 'did not hold'} at {n_rows(few['rows'])}, and at "
        f"{n_rows(many['rows'])} "
        + ("it held." if held_many else
           "it held for the kernels alone, on the GPU clock, but not for calls made back to back from Python, whose "
           "host time was still " + " and ".join(f"{num(many[f'{v}_host_ms'] / many[f'{v}_gpu_ms'])}x"
                                                 for v in ("fused", "two_pass")) + " their GPU time."
           if alone_memory and all(word == OVERHEAD for word, _ in at_many.values()) else
           ("it cannot be judged (a regime above is unknown)" if any(word not in helpers.REGIMES for word, _ in
                                                                      at_many.values()) else "it did not hold") + ".")
    )
else:
    text += ("In CPU mode the interpreter's time follows numpy's work, not a GPU's, so the predictions (made for "
             "the GPU clock) get no verdict here: read the method.")
helpers.md(text)

# %% [markdown]
# (In the predictions above, "N% below" or "N% above" is the larger of prediction and measurement over the
# smaller, minus 1, so that a miss counts the same on either side: for example (invented numbers), 1.6x
# against a predicted 2x would read as 25.0% below it, although 1.6 lies 20% under 2. The predictions of the
# whole model, below and in chapters 4 and 5, give their error as (predicted - measured) / measured instead.)

# %% [markdown]
# ## What one call costs inside a model
#
# Inside a model that decodes one token at a time, the kernels are so short that the GPU spends most of each
# token waiting for the host to launch the next one (chapter 1 measured how much of each token the GPU was
# idle). So for the model, the clock to watch at the decode shape is likely the host clock: what a call costs
# the Python program that launches it. That is a prediction, not a finding: the model comparison below tests
# it, and what runs around each call inside a model can change its price. Here are the three versions at one
# row again (the same measurement as above), with what that means per launch.

# %%
def chapter2_prices():
    """Chapter 2's recorded launch prices from this run's results (``helpers.results()``): {"torch": µs of a
    one-element PyTorch op, "ours": µs of an empty Triton launch, "time": when recorded}, or None where this
    run has not recorded both (chapter 3 run on its own)."""
    table = helpers.results().set_index("id")
    ids = {"torch": "add.launch_us_torch", "ours": "add.launch_us_triton"}
    if not all(i in table.index and table.loc[i, "value"] == table.loc[i, "value"] for i in ids.values()):
        return None
    out = {key: float(table.loc[i, "value"]) for key, i in ids.items()}
    out["time"] = table.loc[ids["ours"], "time"]
    add = "add.host_torch_ms"  # a real torch.add, host time per call: None where chapter 2 did not record it
    out["add_us"] = (1e3 * float(table.loc[add, "value"]) if add in table.index
                     and table.loc[add, "value"] == table.loc[add, "value"] else None)
    return out


def chapter2_ranking(ch2) -> str:
    """Chapter 2's two prices side by side, one host reading of each, and when chapter 2 ranked them."""
    gap = ch2["ours"] - ch2["torch"]
    text = (f"The empty Triton launch cost {num(abs(gap))} host µs "
            f"{'more' if gap > 0 else 'less'} than the one-element PyTorch op, one reading of each (no rounds, no "
            "verdict); chapter 2 ranked them only where that gap exceeded the spread of its own single host "
            "readings. ")
    if ch2["add_us"] is not None:
        more = ch2["add_us"] > ch2["torch"]
        text += (f"Its real `torch.add` at its headline size (`add.host_torch_ms`, one reading too, and a single "
                 "reading moves: chapter 2's sweep shows how far) cost "
                 f"{num(ch2['add_us'])} host µs per call, "
                 f"{'more' if more else 'less'} than that one-element op"
                 + ("" if more else ": a one-element op is no floor for the price of a PyTorch launch") + ". ")
    return text


CH2 = chapter2_prices()
helpers.show(pd.DataFrame([kernel_row(v, R1) for v in VERSIONS]))
host_us = {v: 1e3 * host_ms(v, R1) for v in VERSIONS}
extra_us = host_us["two_pass"] - host_us["torch"]
if helpers.HAS_GPU:
    print(f"two-pass minus PyTorch, {HOST_CLOCK}: {extra_us:+.1f} µs per call (ratio "
          f"{host_us['two_pass'] / host_us['torch']:.3f}; {HOST_READING} each: no rounds, so no verdict)")
    extra_gpu_us = 1e3 * (ms("two_pass", R1) - ms("torch", R1))
    print(f"two-pass minus PyTorch, {KERNEL_CLOCK}: {extra_gpu_us:+.1f} µs per call ({two_pass_decode.text})")
    helpers.md(
        f"At one row the fused kernel's GPU time was **{num(1e3 * ms('fused', R1))} µs** and one call "
        f"cost the host **{num(host_us['fused'])} µs** (one reading), "
        f"{host_us['fused'] / (1e3 * ms('fused', R1)):.0f}x as long. On the host clock, one call cost "
        + host_words(host_us["two_pass"], host_us["torch"], "the two-pass kernel", "PyTorch's chain") + "; "
        + f"across the sweep it cost the host less than PyTorch's chain at {cheaper} of {len(sweep)} row counts, "
        "each its own reading. "
        f"Per launch, that is {num(host_us['torch'] / torch_launches)} µs for each of PyTorch's "
        f"{torch_launches:.0f} kernels and {num(host_us['two_pass'] / 2)} µs for each of the two-pass kernel's 2: "
        "prices from one host reading of each call, in this process, with the call's own work around its launches "
        f"included. Across its {len(sweep)} row counts the same two-pass call read "
        f"{num(1e3 * sweep['two_pass_host_ms'].min())} to {num(1e3 * sweep['two_pass_host_ms'].max())} µs, "
        f"{num(500 * sweep['two_pass_host_ms'].min())} to {num(500 * sweep['two_pass_host_ms'].max())} µs per "
        "launch (the host-time prediction above reads whether such readings stayed flat, followed the rows or "
        "scattered). "
        + (f"Chapter 2 recorded {num(CH2['torch'])} host µs for a one-element PyTorch op and {num(CH2['ours'])} µs "
           "for "
           f"an empty Triton launch (single readings too, {helpers.recorded_when(CH2['time'], helpers.STARTED, 2)}): "
           "the price of a bare launch. " + chapter2_ranking(CH2) + "The prediction below takes chapter 2's prices, and sets "
           "the ones read here beside them as a check. " if CH2 else
           "Chapter 2's launch prices are not in this run's results (run chapter 2 first), so the prediction "
           "below has to take the prices read here. ")
        + "The blog's `do_bench` timings mix the two clocks on calls this short: compare them with either of ours "
        "with that in mind."
    )
else:
    r1, v1 = to_torch("two_pass", R1)
    print(f"two-pass minus PyTorch, {HOST_CLOCK}: {extra_us:+.1f} µs per call (ratio {r1.median:.3f} in "
          f"{measured(R1)[0].rounds} shuffled rounds: {v1.text})")

# %% [markdown]
# ## All the RMSNorms, in the model
#
# Finally the experiment that matters: `helpers.patched` swaps every RMSNorm of the model (113 in the
# full-size Qwen3-0.6B, q_norm and k_norm included) for a `TritonRMSNorm` in two-pass mode, sharing the
# original weights, and puts the originals back when the `with` block ends.
#
# One measurement, `helpers.compare_configs(..., profile=True)`, does two jobs:
#
# - it times the original and the swapped model in shuffled, interleaved rounds (`SIZES.rounds_small` of
#   them, at full size twice the series' usual `SIZES.rounds`; the reading below gives the count; on a fast
#   GPU this swap's effect on tokens/s lies near the noise, and a median of more rounds strays less from run
#   to run): one generation of each per round, each followed by a one-token generation, so that the **wall
#   ms per decoded token** (prefill excluded) comes from the same rounds as the tokens/s; each round's time
#   is divided by the original's of the same round. It also runs the original against itself: that A/A ratio
#   is this run's noise floor, and a swap whose ratio does not stand out of twice it, and of the series' 5%
#   minimum, is "within noise", however the medians happen to fall (the table's tokens/s column is each
#   configuration's own median, another statistic: inside the noise it can rank the original below its own
#   copy while their time ratio says the opposite; chapter 8 sets the two statistics side by side). The
#   original's own time need not match chapter 1's: each chapter's rounds run under their own host
#   conditions, and over a long run of the series the host can drift (the reading below sets the two side
#   by side), so only ratios within one run's rounds are compared;
# - after the rounds, `torch.profiler` counts the CUDA kernels launched and the GPU-busy ms per decoded
#   token of each model (`comparison.profile(name)`).
#
# **Predict first.** Each RMSNorm runs once per token (q_norm and k_norm on one row per head, again a tiny,
# launch-bound call). After the swap, each call launches exactly 2 kernels instead of PyTorch's chain, so
# the launches per token change by (number of norms) x (2 minus PyTorch's count per call). What that does
# to the time per token we predict with a *launch budget*, in the simplest form of the model chapter 8
# applies to the whole series: a decoded token costs the host a price per PyTorch launch times PyTorch's launches, plus a price
# per launch of ours times ours, and the GPU-busy time comes on top. We start from the original's measured
# wall ms per decoded token and add what the swap changes: the PyTorch launches it removes, at the price of
# a PyTorch launch; the launches of ours it adds, at the price of one of ours; and the change in GPU-busy
# time. The prices come from measurements, none from the swapped model's time:
#
# - **the prediction** takes chapter 2's launch prices, recorded in this run's results
#   (`helpers.results()`, ids `add.launch_us_torch` and `add.launch_us_triton`): a one-element PyTorch op
#   and an empty Triton launch, each one host reading, made in loops of thousands of calls. Chapter 2 set
#   those two side by side, one reading of each (no rounds, so no verdict), and ranked them only where their
#   difference lay beyond the spread of its own single host readings. It read a real `torch.add` against its
#   one-element op the same way (quoted above, where chapter 2 has run on a GPU): they are the best prices
#   we have, used as read, not floors;
# - **a check**, beside it and labelled as such: prices read in this process. For PyTorch, the original
#   model's wall ms per decoded token minus its GPU-busy ms, divided by its launches per token (an average
#   over the rounds, the framework's own Python around each op included); for ours, the two-pass call's
#   host time above, divided by its 2 launches (one host reading, the call's own work included).
#
# Where chapter 2 has not been run, the prediction takes the prices read here. The prediction uses the
# swapped model's launch counts and GPU-busy time from the profiler, never its measured wall time. (In CPU
# mode the profiler counts only our launches and there is no GPU time, so there is no PyTorch launch to
# price and no prediction.)

# %%
n_norms = len(norms)
SWAP = "two-pass RMSNorm"
comparison = helpers.compare_configs(model, {SWAP: dict(rmsnorm="two_pass")}, tokenizer=tokenizer, profile=True,
                                     rounds=SIZES.rounds_small)  # a swap near the noise: twice the rounds
before, after = comparison.profile(helpers.ORIGINAL), comparison.profile(SWAP)
assert abs(after.project_launches_per_token - 2 * n_norms) < 1e-9, "2 launches per RMSNorm per token"
def count(value) -> str:
    """A launch count with thousands separators (1,655), or n/a (CPU) where there is none."""
    return helpers.fmt(None) if value is None else f"{value:,.0f}"


print(f"{helpers.launch_note()}: original {count(before.launches_per_token)}, with the swap "
      f"{count(after.launches_per_token)}, of them {count(after.project_launches_per_token)} of ours")
if torch_launches is not None:
    print(f"predicted change in launches per token: {n_norms} x (2 - {torch_launches:.0f}) = "
          f"{n_norms * (2 - torch_launches):+.0f}")
def predict(budget, profile):
    """Wall ms per decoded token of ``profile``: the original's measured time plus the change the launch-budget
    model prices (launches removed and added, at ``budget``'s prices, and the change in GPU-busy time)."""
    return (before.wall_ms_per_token + budget.host_ms(profile) - budget.host_ms(before)
            + profile.gpu_busy_ms_per_token - before.gpu_busy_ms_per_token)


if before.launches_per_token is not None:
    check = helpers.LaunchBudget(  # this process's prices: a check beside chapter 2's
        torch_us=(before.wall_ms_per_token - before.gpu_busy_ms_per_token) * 1e3 / before.launches,
        ours_us=host_us["two_pass"] / kernels_per_call("two_pass", R1),
        fitted_on=("original", "host time per call of the two-pass RMSNorm"))
    budget = (helpers.LaunchBudget(torch_us=CH2["torch"], ours_us=CH2["ours"],
                                   fitted_on=("chapter 2: one-element PyTorch op", "chapter 2: empty Triton launch"))
              if CH2 else check)
    predicted_ms, check_ms = predict(budget, after), predict(check, after)
    predicted_ratio = predicted_ms / before.wall_ms_per_token
    removed = before.launches - (after.launches - after.project_launches_per_token)  # PyTorch launches gone
    origin = (f"chapter 2's ({helpers.recorded_when(CH2['time'], helpers.STARTED, 2)})" if CH2 else
              "those read here (chapter 2's are not in this run)")
    print(f"prices for the prediction, {origin}, host clock: {budget.torch_us:.1f} host µs per PyTorch launch, "
          f"{budget.ours_us:.1f} µs per launch of ours")
    print(f"{'check, prices' if CH2 else 'prices'} read in this process: PyTorch ({before.wall_ms_per_token:.2f} - "
          f"{before.gpu_busy_ms_per_token:.2f}) wall ms per token / {before.launches:,.0f} launches = "
          f"{check.torch_us:.1f} host µs (an average over the rounds); ours {host_us['two_pass']:.1f} host µs per "
          f"two-pass call / 2 = {check.ours_us:.1f} host µs (one reading)"
          + (f"; {check.torch_us / CH2['torch']:.2f}x and {check.ours_us / CH2['ours']:.2f}x chapter 2's"
             if CH2 else ""))
    busy_change = after.gpu_busy_ms_per_token - before.gpu_busy_ms_per_token
    print(f"predicted wall ms per decoded token with the swap: {before.wall_ms_per_token:.2f} (the original, "
          f"measured) - {removed:,.0f} x {budget.torch_us:.1f} host µs + {after.project_launches_per_token:,.0f} x "
          f"{budget.ours_us:.1f} host µs {'-' if busy_change < 0 else '+'} {abs(busy_change):.2f} GPU-busy ms = "
          f"{predicted_ms:.2f} wall ms, a time ratio of {predicted_ratio:.3f} to the original")
    if CH2:
        print(f"the check's prediction, with the prices read here: {check_ms:.2f} wall ms per decoded token "
              f"(ratio {check_ms / before.wall_ms_per_token:.3f})")
else:
    budget = check = predicted_ms = check_ms = predicted_ratio = None
    print("CPU mode: no PyTorch launch count and no GPU-busy time, so no launch-budget prediction")

# %%
greedy = GenerationConfig(max_new_tokens=SIZES.new_tokens, min_new_tokens=SIZES.new_tokens, do_sample=False,
                          pad_token_id=model.config.eos_token_id or 0)
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, model.config.vocab_size)


def greedy_tokens():
    """The new tokens of one untimed greedy generation (to check that the swap keeps the output)."""
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=greedy)
    return out[0, prompt.shape[1]:].cpu()


ids_before = greedy_tokens()
with helpers.patched(model, rmsnorm="two_pass") as counts:
    ids_after = greedy_tokens()
assert counts["rmsnorm"] == n_norms, "every RMSNorm, q_norm and k_norm included, must be replaced"

swap_verdict = comparison.record(SWAP, "rmsnorm.tps_slowdown", "all RMSNorms two-pass")
helpers.record("rmsnorm.modules_replaced", counts["rmsnorm"], "modules", "every *RMSNorm, q_norm/k_norm included")
helpers.record("rmsnorm.tps_original", comparison.tokens_per_s[helpers.ORIGINAL], "tokens/s",
               f"median of {len(comparison.orders)} shuffled rounds; prompt {SIZES.prompt_len}, "
               f"{SIZES.new_tokens} new tokens")
helpers.record("rmsnorm.tps_custom", comparison.tokens_per_s[SWAP], "tokens/s",
               f"all RMSNorms two-pass; median of {len(comparison.orders)} shuffled rounds")
helpers.record("rmsnorm.launches_per_token_custom", after.launches, "launches",
               helpers.launch_note() + ", RMSNorms two-pass")

def beside_bar(median, v) -> str:
    """A median ratio to 3 decimals, more (up to 6) where it would print as its verdict's threshold
    (``helpers.places_apart``): 1.0498 beside a 5% bar must not read 1.050."""
    return f"{median:.{helpers.places_apart(median, v.bars, places=3, most=6)}f}"


print(f"RMSNorm modules replaced: {counts['rmsnorm']} (of {n_norms})")
table = comparison.table()
RATIO_COL = "time ratio to original (median)"
table[RATIO_COL] = [helpers.table_number(m) if name == helpers.ORIGINAL else beside_bar(m, comparison.verdict(name))
                    for name, m in zip(table["configuration"], table[RATIO_COL])]
helpers.show(table)
helpers.show(pd.DataFrame([
    {"model": label, "kernels per token": count(p.launches_per_token),
     "Triton launches per token": count(p.project_launches_per_token),
     "GPU-busy ms per decoded token": helpers.fmt(p.gpu_busy_ms_per_token, 3),
     "wall ms per decoded token": helpers.fmt(p.wall_ms_per_token, 3),  # the prediction's digits, beside it
     "predicted wall ms per decoded token": helpers.fmt(predict(budget, p) if budget else None, 3)}
    for label, p in (("original", before), (SWAP, after))
]))
print(f"wall ms per decoded token: {after.note}; the original's prediction reproduces it by construction "
      "(the prediction adds the priced change to the original's measured time)")
same = int((ids_after == ids_before).sum())
print(f"greedy tokens identical to the original model's: {same} of {SIZES.new_tokens}")

# %%
def judged(error, predicted_v, measured_v) -> str:
    """A launch-budget prediction judged twice, in the series' words: on the total (``error``, predicted / measured
    wall ms per token - 1, against ``helpers.PREDICTION_BAR``) and on the effect (the predicted change's verdict
    against the measured one's, by direction: a bar on the total accepts a predicted change that did not happen),
    e.g. 'met on the total (-19.0%), but missed on the effect: it predicted 1.26x faster and the measured wall time
    per decoded token came out within noise'."""
    total_met = abs(error) <= helpers.PREDICTION_BAR
    effect_met = direction(predicted_v) == direction(measured_v)
    said = predicted_v.text if predicted_v.real else "no change beyond the noise"
    effect = "met on the effect's direction" if effect_met else "missed on the effect"
    return (f"{'met' if total_met else 'missed'} on the total ({100 * error:+.1f}%), "
            f"{'and' if total_met == effect_met else 'but'} {effect}: it predicted {said} and the measured wall time "
            f"per decoded token came out {measured_v.text}")


swap, floor = comparison.ratios[SWAP], comparison.floor
per_token = comparison.decode_ratio(SWAP)
decode_floor = comparison.decode_ratio(helpers.ORIGINAL_AGAIN)  # the A/A floor of wall ms per decoded token
per_token_verdict = helpers.verdict(per_token, decode_floor)
if predicted_ms is not None:  # the two predictions' changes, judged by the same rule as the measured one
    predicted_verdict = helpers.verdict(predicted_ratio, decode_floor)
    check_verdict = helpers.verdict(check_ms / before.wall_ms_per_token, decode_floor)
text = (
    f"Over {len(comparison.orders)} shuffled rounds the original generated at a median **"
    f"{comparison.tokens_per_s[helpers.ORIGINAL]:.2f} tokens/s** and the model with {counts['rmsnorm']} two-pass "
    f"RMSNorms at **{comparison.tokens_per_s[SWAP]:.2f}**. Round by round, the swapped model's time over the "
    f"original's had a median of {beside_bar(swap.median, swap_verdict)} (middle half of the rounds {swap.quartiles}); "
    f"the original against itself, {floor.median:.3f} ({floor.quartiles}). "
    f"Verdict: **{swap_verdict.text}**. "
)
if swap_verdict.real:
    text += (f"The difference stands out of this run's noise (more than {100 * swap_verdict.noise:.0f}% from 1, "
             "with the middle half of the rounds on one side)"
             + (f", though it lies near {swap_verdict.threshold_text}: another run may call it the other way. "
                if swap_verdict.near_threshold else ". "))
else:
    text += (f"This run cannot tell the two models' tokens/s apart ({swap_verdict.reason}), so there is no "
             "difference in tokens/s here to explain. ")
text += (f"Per decoded token (prefill excluded, the same rounds), the wall time went from "
         f"{before.wall_ms_per_token:.2f} to {after.wall_ms_per_token:.2f} wall ms, a per-round ratio of "
         f"{beside_bar(per_token.median, per_token_verdict)} ({per_token.quartiles}): **{per_token_verdict.text}**"
         + ("" if per_token_verdict.real else f" ({per_token_verdict.reason})")
         + (f", near {per_token_verdict.threshold_text}" if per_token_verdict.near_threshold else "") + ". ")
if before.launches_per_token is not None:
    delta = after.launches_per_token - before.launches_per_token
    per_norm = 2 - delta / n_norms  # PyTorch kernels per RMSNorm, from the two launch counts
    counted = (f"launches per token went from {before.launches_per_token:,.0f} to {after.launches_per_token:,.0f} "
               f"({delta:+,.0f}; predicted {n_norms * (2 - torch_launches):+,.0f}), each swapped RMSNorm replacing a "
               f"chain of {per_norm:.0f} PyTorch kernels by 2 of ours, and GPU-busy time went from "
               f"{before.gpu_busy_ms_per_token:.2f} to {after.gpu_busy_ms_per_token:.2f} ms per token")
    text += ((f"The profiler counts what the swap changed: {counted}.\n\n") if per_token_verdict.real else
             (f"What the swap did change is counted by the profiler: {counted}. None of it showed as a change in "
              "wall time per token that this run can tell from its noise.\n\n"))
    error = predicted_ms / after.wall_ms_per_token - 1
    bar = helpers.PREDICTION_BAR
    source = "chapter 2's launch prices" if CH2 else "the launch prices read in this chapter"
    text += (f"**The prediction, revisited.** With {source} ({budget.torch_us:.1f} host µs per PyTorch launch, "
             f"{budget.ours_us:.1f} µs per launch of ours), the launch-budget model predicted **{predicted_ms:.2f}** "
             f"wall ms per decoded token with the swap; the rounds measured **{after.wall_ms_per_token:.2f}**: an "
             f"error of {100 * error:+.0f}%. Judged on the total (within the {100 * bar:.0f}% bar, "
             "`helpers.PREDICTION_BAR`, that chapter 8 holds the model to) and on the effect (the change it predicted "
             "against the change measured, each by the series' rule), the prediction was "
             f"**{judged(error, predicted_verdict, per_token_verdict)}**. ")
    text += (f"The predicted change, {predicted_ms - before.wall_ms_per_token:+.2f} wall ms per decoded token, adds "
             f"up as {removed:,.0f} PyTorch launches fewer ({-removed * budget.torch_us / 1e3:+.2f} ms of host time), "
             f"{after.project_launches_per_token:,.0f} launches of ours "
             f"({after.project_launches_per_token * budget.ours_us / 1e3:+.2f} ms of host time) and "
             f"{after.gpu_busy_ms_per_token - before.gpu_busy_ms_per_token:+.2f} GPU-busy ms; the measured "
             f"change was {after.wall_ms_per_token - before.wall_ms_per_token:+.2f} wall ms per decoded token "
             f"({per_token_verdict.text}). ")
    if not per_token_verdict.real and predicted_verdict.real:
        inside = per_token.low <= predicted_ratio <= per_token.high
        text += (f"The model expected {predicted_ratio:.3f} of the original's time; the rounds found no change they "
                 "could tell from the noise, and the predicted ratio lies "
                 f"{'inside' if inside else 'outside'} the middle half of the measured ones ({per_token.quartiles}). ")
    if abs(error) <= bar and direction(predicted_verdict) != direction(per_token_verdict):
        text += ("A bar on the total accepts a predicted change of this size that did not come out as predicted: "
                 "the effect is the sharper test. ")
    if CH2:
        check_error = check_ms / after.wall_ms_per_token - 1
        text += (f"**The check**: priced instead with what this chapter read in its own process "
                 f"({check.torch_us:.1f} host µs per PyTorch launch, an average over the rounds, "
                 f"{check.torch_us / budget.torch_us:.2f}x chapter 2's; {check.ours_us:.1f} µs per launch of ours, "
                 f"one host reading of a two-pass call, {check.ours_us / budget.ours_us:.2f}x chapter 2's), the "
                 f"prediction would be {check_ms:.2f} wall ms per decoded token: "
                 f"{judged(check_error, check_verdict, per_token_verdict)}. "
                 + ("The check's prices include the Python around each launch (the framework's, our launcher's); an "
                    "empty launch's do not. " if abs(check_error) <= bar < abs(error) else "")
                 + "Both sets of prices rest on single host readings or on one run's averages; chapter 8 instead "
                 "prices every kind of module call on its own, in the rounds of a whole-model comparison. ")
    if delta < 0 and not (per_token_verdict.real and per_token_verdict.ratio < 1):
        moved = (f"stayed within noise, {per_token_verdict.reason}" if not per_token_verdict.real else
                 f"went up ({per_token_verdict.text})")
        text += (f"\n\n**Against chapter 1's reading.** Chapter 1 read a decoded token's time as set mostly by the "
                 "host launching kernels, so that launches removed should show up in the wall time. Here the swap cut "
                 f"{-delta:,.0f} launches per token, and the wall time per token {moved}: in its first test inside "
                 "the model, that reading did not come out as predicted. A candidate reason, for chapter 8 to test: "
                 "inside `generate()` part of the host's time around each module stays whether the module launches "
                 "one kernel or several (the module call, the framework's Python around it, our launcher's checks), "
                 "so a launch removed there saves less than the price of a launch measured alone, and a launch of "
                 "ours, with its Python launcher, costs more. ")
else:
    text += (f"In CPU mode the profiler counts only our launches ({after.project_launches_per_token:.0f} per "
             "token with the swap, none in the original) and no GPU time, so there was no prediction to test; "
             "these wall times are the interpreter's. ")
blog_swap = helpers.verdict(helpers.blog("rmsnorm.tps_original") / helpers.blog("rmsnorm.tps_custom"))
text += ("\n\n" + helpers.beside_baseline(before)
         + f"\n\n{same} of the {SIZES.new_tokens} greedy tokens match the original model's. "
         f"The blog went from {helpers.blog('rmsnorm.tps_original')} to {helpers.blog('rmsnorm.tps_custom')} "
         f"tokens/s on a T4 ({blog_swap.text}) with the same swap, from one run of each model; here the swap came "
         f"out **{swap_verdict.text}**. "
         + ("" if direction(blog_swap) == direction(swap_verdict) else
            "Why one swap moves two machines differently (their GPUs, and what a launch costs their hosts) is for "
            "[chapter 8](08_lessons.ipynb) to read: it sets every swap's ratio beside the blog's and prices every swap "
            "against the original's modules it replaces."))
helpers.md(text)

# %% [markdown]
# ## Your numbers beside the blog's
#
# Two clocks sit side by side here, not one. The blog's column is its T4 run, timed with
# `triton.testing.do_bench`, which on calls this short mixes the host's launching with the GPU's work. The
# `yours` and `h200` columns of the kernel rows are GPU time by CUDA-graph replay (interpreter wall time in
# CPU mode), the `host_` rows host time per call, and the tokens/s rows wall time in shuffled rounds. So
# `rmsnorm.two_pass_ratio` beside the blog's figure differs in clock as well as in GPU.

# %%
helpers.show(helpers.compare("rmsnorm."))
print(f"blog_t4: a T4, triton.testing.do_bench (host and GPU time mixed); yours: {KERNEL_CLOCK} for the kernel "
      f"times and ratios, {HOST_CLOCK} for the host_ rows; h200: the committed run, GPU time (CUDA-graph replay) "
      "and host time per call")

# %% [markdown]
# ## Takeaway
#
# - A fused kernel reads its input once and launches once, which leaves little room to lose time.
# - Un-fusing keeps the maths and changes the costs: twice the launches, about 1.5 times the bytes.
# - A microsecond kernel has two times, the GPU's and the host's for launching it. Name the clock before
#   comparing, and compare in rounds against the reference's own A/A floor; a single host reading is a
#   reading, not a verdict.
#
# And what this run measured:


# %%
def takeaway() -> str:
    """The measured half of the takeaway, from the comparisons above (their verdicts, not their medians alone)."""
    split_v = two_pass_to_fused(R)[1]
    split = (f"- Un-fused, our RMSNorm came out {against(split_v, 'our fused kernel')} at [{R}, {H}] ({CLOCK} "
             f"time); across the sweep the two-pass / fused ratio {rows_trend(trend_fused)}.")
    if helpers.HAS_GPU:
        split += (f" Against the predictions: about 2x at {n_rows(few['rows'])}, measured "
                  f"{measured_x(few[VS_FUSED], 2.0)}x ({prediction_word(few[VS_FUSED], 2.0)}); about 1.5x at "
                  f"{n_rows(many['rows'])}, measured {measured_x(many[VS_FUSED], 1.5)}x "
                  f"({prediction_word(many[VS_FUSED], 1.5)}"
                  + ("; a prediction for main memory, tested inside the L2 cache" if fits else "") + ").")
    faster = [v.real and v.ratio < 1 for v in (two_pass_main, two_pass_decode)]
    versus = (f"{against(two_pass_main, 'PyTorch')} at [{R}, {H}] and {against(two_pass_decode, 'PyTorch')} at "
              f"[{R1}, {H}]")
    if all(faster):
        lead = ("Slower than our fused kernel is not slow: even" if split_v.real and split_v.ratio > 1 else "Even")
        torch_line = (f"- {lead} the two-pass kernel's {CLOCK} time came out {versus}: PyTorch's `Qwen3RMSNorm` is "
                      f"a chain of {helpers.fmt(torch_launches, 0)} kernels passing fp32 intermediates through memory.")
    else:
        torch_line = f"- Against PyTorch's `Qwen3RMSNorm`, the two-pass kernel's {CLOCK} time was {versus}."
    if helpers.MODE == "cpu":
        torch_line += " (In CPU mode: the interpreter against compiled CPU code, the method and not the number.)"
    lines = [split, torch_line]
    if helpers.HAS_GPU:
        times = [host_us[v] / (1e3 * ms(v, R1)) for v in VERSIONS]
        lines.append(f"- At one row, one call cost the host {min(times):.0f}x to {max(times):.0f}x its GPU time "
                     "across the three versions (single host readings).")
    model_line = (f"- Swapped into the model, the {counts['rmsnorm']} two-pass RMSNorms gave a median wall time per "
                  f"generation of {beside_bar(swap.median, swap_verdict)}x the original's (shuffled rounds): "
                  f"**{swap_verdict.text}**")
    if predicted_ms is not None:
        error = predicted_ms / after.wall_ms_per_token - 1
        model_line += (f"; the launch-budget prediction of the wall time per token, with "
                       f"{'chapter 2' if CH2 else 'this chapter'}'s launch prices, was "
                       f"{judged(error, predicted_verdict, per_token_verdict)}")
        if CH2:
            check_error = check_ms / after.wall_ms_per_token - 1
            model_line += (f"; with the prices read here (the check) it was "
                           f"{judged(check_error, check_verdict, per_token_verdict)}")
    lines.append(model_line + ". Whether a swap changes tokens/s is a question for an interleaved comparison "
                 "against the run's own A/A floor, not for one pair of runs.")
    return "\n".join(lines)


helpers.md(takeaway())

# %% [markdown]
# ## Try it yourself
#
# Two changes to the two-pass RMSNorm, one at a time, each timed against the unchanged call with
# `helpers.compare_calls` (GPU time by CUDA-graph replay in shuffled rounds, with the reference's A/A floor;
# interpreter wall time in CPU mode) and judged by the series' rule. Guess first: set `answer` to `"faster"`,
# `"slower"` or `"same"` and run the cell; with `answer = None` it only shows the measurement. Both work at
# the sweep's largest row count, where the bytes weigh most.
#
# **1. The other precision.** The same rows in the other floating-point type: fp32 where the chapter ran
# fp16 (on a GPU), fp16 where it ran fp32 (in CPU mode). In fp32 every element is 4 bytes instead of 2, so
# `x` and `y` move twice the bytes, while the launches and the arithmetic (done in fp32 either way) stay.
# Expect fp32 slower on a GPU, but by how much depends on where the bytes come from. On a T4, whose 4 MB L2
# holds neither working set, both stream from main memory and the time follows the bytes: expect close to
# 2x. On an H200 both working sets fit in its L2 (the cell below prints their sizes beside your GPU's L2),
# where a call's fixed cost keeps a share of its time (the sweep's reading above gives that share at this row
# count), and that share does not double: expect well under 2x. The interpreter computes with numpy, where
# fp16 is no cheaper, so expect nothing useful from CPU mode.

# %%
BIG_ROWS = max(ROWS)  # a multiple of 8 in every mode (exercise 2 reshapes by it)
OTHER = torch.float32 if DTYPE == torch.float16 else torch.float16
x_big, norm_big = make_case(BIG_ROWS)
w_big = norm_big.weight.detach()
x_other, w_other = x_big.to(OTHER), w_big.to(OTHER)
change = f"rows in {str(OTHER)[6:]}"
if helpers.HAS_GPU:  # each version's working set (input, output and weight) beside this GPU's L2 cache
    sizes = {str(t)[6:]: (2 * x_big.numel() + w_big.numel()) * torch.tensor([], dtype=t).element_size()
             for t in (DTYPE, OTHER)}
    print(f"[{BIG_ROWS}, {H}]: working set " + ", ".join(f"{num(b / 1e6)} MB in {t}" for t, b in sizes.items())
          + f"; this GPU's L2 cache: {num(torch.cuda.get_device_properties(0).L2_cache_size / 1e6)} MB")

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({change: lambda: slower_kernels.rmsnorm_two_pass(x_other, w_other)},
                            reference=lambda: slower_kernels.rmsnorm_two_pass(x_big, w_big))
measured = helpers.check_answer(answer, cmp.ratios[change], cmp.floor, change=change, clock=cmp.clock)

# %% [markdown]
# **2. Longer rows, the same numbers.** Reshape the same input into rows eight times as long: an eighth as many
# rows of $8H$ numbers. The bytes stay the same (the fp32 buffer even shrinks to an eighth), and so do the two
# launches; what changes is the work of one program. Each gets a row of $8H$ numbers, more warps
# (`slower_kernels.configs.row_num_warps`: at the full size 16 instead of 4, so each thread handles 16 numbers
# instead of 8) and a longer reduction, and the grid has an eighth as many programs. At the full size that
# grid still fills an H200's 132 SMs (and a T4's 40), so the SMs are not what changes. What does is the
# fixed cost per program: each program's reduction through shared memory with its barrier, and its store of
# one fp32 number to the buffer; an eighth as many programs pay it an eighth as often. On an H200 these bytes
# sit in L2, where fixed costs keep a share of the call (the sweep's reading above gives it): expect **faster**.
# On a T4, where they stream from main memory and the bytes set the time, expect the gain to shrink towards
# "same": there it may land on either side of the 5% threshold. In the interpreter each program costs a fixed
# price of its own, so there too, expect fewer programs to be faster.

# %%
x_long = x_big.reshape(BIG_ROWS // 8, 8 * H)  # the same numbers, rows eight times as long
w_long = torch.randn(8 * H, generator=torch.Generator().manual_seed(2)).to(DEVICE, DTYPE)  # a weight per column
change = f"[{BIG_ROWS // 8}, {8 * H}] rows"

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({change: lambda: slower_kernels.rmsnorm_two_pass(x_long, w_long)},
                            reference=lambda: slower_kernels.rmsnorm_two_pass(x_big, w_big))
measured = helpers.check_answer(answer, cmp.ratios[change], cmp.floor, change=change, clock=cmp.clock)

# %% [markdown]
# Next, in chapter 4, we replace the largest pieces of work in the model, the linear projections, with a
# tiled matrix multiplication of our own.
