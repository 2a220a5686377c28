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
# - how the gap between the two depends on the number of rows, and why it is widest where it is;
# - what happens to tokens per second when all of the model's RMSNorms use the slow version.

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
from collections import Counter

import matplotlib.pyplot as plt
import pandas as pd
import torch
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

import helpers
import kernels

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
# ## PyTorch's version: how many kernels?
#
# `Qwen3RMSNorm.forward` is written as a chain of ordinary tensor operations: a cast to fp32, a square,
# a mean, an addition and a reciprocal square root, a multiplication, a cast back, and the multiplication
# by the weight. In eager PyTorch each of these is its own kernel, and the fp32 intermediates between them
# travel through memory. `helpers.profile_call` counts the kernels one call launches (on a GPU).

# %%
H = SIZES.rmsnorm_hidden


def make_case(rows, seed=0):
    """Fresh random input [rows, H] and a Qwen3RMSNorm with random weights (never ones)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, H, generator=g).to(DEVICE, DTYPE)
    norm = Qwen3RMSNorm(H, eps=1e-6).to(DEVICE, DTYPE)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(H, generator=g))
    return x, norm


x, norm = make_case(SIZES.rmsnorm_decode_rows)
with torch.no_grad():
    torch_call = helpers.profile_call(lambda: norm(x))
torch_launches = torch_call.launches
print("PyTorch Qwen3RMSNorm, kernels per call:",
      "n/a (CPU)" if torch_launches is None else f"{torch_launches:.0f}")

# %% [markdown]
# ## The fused kernel
#
# The fused kernel does everything in one launch: each program loads its row once, computes the mean
# square in fp32 in registers, normalises, multiplies by the weight and writes the row once. Per call
# that is $R$ rows of $H$ elements read and written once each, plus the weight:
# about $2RHe$ bytes for an element size of $e$ bytes.

# %%
rmsnorm_src = inspect.getmodule(kernels.rmsnorm_fused)
print(inspect.getsource(rmsnorm_src.rmsnorm_fused_kernel.fn))
print(inspect.getsource(kernels.rmsnorm_fused))

# %% [markdown]
# ### Is it correct?
#
# Fresh random rows and random weights. We compare with two references: PyTorch's `Qwen3RMSNorm` in the
# same dtype (the module our kernel will replace), and the same module run in fp32, a higher-precision
# reference for the pass/fail line. The tolerance is relative to the largest output: fp16 keeps about
# three significant digits, and the computation rounds twice (after normalising and after scaling), so we
# allow a small fraction of the largest value, per dtype, from `helpers.TOLERANCE["kernel"]` (the check
# prints it).

# %%
REL_TOL = helpers.TOLERANCE["kernel"]  # per dtype, relative to the largest output


def check(fn, name, rows=SIZES.rmsnorm_rows, seed=1):
    """Max error of fn(x, w, eps) against Qwen3RMSNorm (same dtype, and fp32); asserts the fp32 check."""
    x, norm = make_case(rows, seed)
    with torch.no_grad():
        same_dtype = norm(x)
        ref = Qwen3RMSNorm(H, eps=1e-6).to(DEVICE, torch.float32)
        ref.weight.copy_(norm.weight.float())
        ref_out = ref(x.float())
    ours = fn(x, norm.weight, norm.variance_epsilon)
    err_same = (ours.float() - same_dtype.float()).abs().max().item()
    err_ref = (ours.float() - ref_out).abs().max().item()
    tol = REL_TOL[DTYPE] * ref_out.abs().max().item()
    ok = err_ref <= tol
    print(f"{name}: [{rows}, {H}] {str(DTYPE)[6:]}  max |ours - Qwen3RMSNorm| = {err_same:.3g}   "
          f"max |ours - fp32 reference| = {err_ref:.3g} (tolerance {tol:.3g})")
    print(f"{name} check:", "PASS" if ok else "FAIL")
    assert ok, f"{name} is off by {err_ref} (tolerance {tol})"
    return err_same


helpers.record("rmsnorm.max_err_fused", check(kernels.rmsnorm_fused, "fused"), "abs",
               f"max |fused - Qwen3RMSNorm|, [{SIZES.rmsnorm_rows}, {H}], same dtype")
print("recorded as rmsnorm.max_err_fused")

# %% [markdown]
# ### Timing the fused kernel against PyTorch
#
# What to expect depends on the shape. With many rows the bytes dominate: both versions have to read the
# input and write the output, and PyTorch's chain also writes and re-reads fp32 intermediates, so it moves
# more. With a single row (what decoding one token looks like) the bytes are negligible and the count of
# launches decides: one for our kernel against the number PyTorch printed above. Our launcher, however,
# is Python code that checks its inputs before launching, and a Triton launch costs more host time than
# one of PyTorch's own. Which effect wins is a question for the measurement.

# %%
def time_three(rows):
    """Median ms of PyTorch's Qwen3RMSNorm, the fused kernel and the two-pass kernel on [rows, H]."""
    x, norm = make_case(rows)
    w, eps = norm.weight, norm.variance_epsilon
    with torch.no_grad():
        return {"rows": rows,
                "torch_ms": helpers.bench_ms(lambda: norm(x)),
                "fused_ms": helpers.bench_ms(lambda: kernels.rmsnorm_fused(x, w, eps)),
                "two_pass_ms": helpers.bench_ms(lambda: kernels.rmsnorm_two_pass(x, w, eps))}


main = time_three(SIZES.rmsnorm_rows)
decode = time_three(SIZES.rmsnorm_decode_rows)
helpers.record("rmsnorm.torch_ms", main["torch_ms"], "ms", f"Qwen3RMSNorm, [{SIZES.rmsnorm_rows}, {H}]")
helpers.record("rmsnorm.fused_ms", main["fused_ms"], "ms", f"fused kernel, [{SIZES.rmsnorm_rows}, {H}]")
helpers.record("rmsnorm.decode_torch_ms", decode["torch_ms"], "ms", f"[{SIZES.rmsnorm_decode_rows}, {H}]")
helpers.record("rmsnorm.decode_fused_ms", decode["fused_ms"], "ms", f"[{SIZES.rmsnorm_decode_rows}, {H}]")
helpers.show(pd.DataFrame([main, decode]).round(4))

# %%
versus = helpers.versus  # "1.23x slower" / "1.23x faster", from two times


helpers.md(
    f"With {SIZES.rmsnorm_rows} rows the fused kernel took **{main['fused_ms']:.4f} ms** against "
    f"PyTorch's {main['torch_ms']:.4f} ms: **{versus(main['fused_ms'], main['torch_ms'])}**. With "
    f"{SIZES.rmsnorm_decode_rows} row it was **{versus(decode['fused_ms'], decode['torch_ms'])}** "
    f"({decode['fused_ms']:.4f} against {decode['torch_ms']:.4f} ms). "
    + ("Fusing did not slow anything down here: a single well-written kernel is hard to make slow. "
       if main["fused_ms"] <= main["torch_ms"] * 1.1 else
       "The fused kernel is slower than PyTorch, but only mildly. "
       if main["fused_ms"] <= main["torch_ms"] * 1.5 else
       "The fused kernel is clearly slower than PyTorch here. ")
    + ("(In CPU mode that compares the Triton interpreter with PyTorch's compiled CPU code: the ratio says "
       "nothing about GPUs.) " if helpers.MODE == "cpu" else "")
    + "On its T4 the blog found its own fused version only a little slower than PyTorch's (it gives no "
    "number), and that is what led it to un-fuse the kernel."
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


with kernels.count_launches() as fused_launches:
    kernels.rmsnorm_fused(x, norm.weight)
with kernels.count_launches() as two_pass_launches:
    kernels.rmsnorm_two_pass(x, norm.weight)
assert sum(fused_launches.values()) == 1 and sum(two_pass_launches.values()) == 2

R = SIZES.rmsnorm_rows
helpers.show(pd.DataFrame([
    {"version": "PyTorch Qwen3RMSNorm", "launches per call": "n/a (CPU)" if torch_launches is None
     else f"{torch_launches:.0f}", f"bytes for [{R}, {H}]": "more (each op of the chain reads and writes)"},
    {"version": "fused", "launches per call": sum(fused_launches.values()),
     f"bytes for [{R}, {H}]": f"{moved_bytes(R, 'fused'):,}"},
    {"version": "two-pass", "launches per call": sum(two_pass_launches.values()),
     f"bytes for [{R}, {H}]": f"{moved_bytes(R, 'two_pass'):,}"},
]))

# %% [markdown]
# So the two-pass version moves about 1.5 times the bytes of the fused one (the input travels twice) and
# launches twice as often. That gives two predictions, one per regime. Where the bytes dominate (many
# rows), two-pass should take up to about 1.5 times as long as fused. Where the launches dominate (one
# row), up to about twice as long. Against PyTorch the picture also depends on how many kernels PyTorch's
# own chain launches.
#
# ### Is it still correct?

# %%
helpers.record("rmsnorm.max_err_two_pass", check(kernels.rmsnorm_two_pass, "two-pass"), "abs",
               f"max |two-pass - Qwen3RMSNorm|, [{SIZES.rmsnorm_rows}, {H}], same dtype")
print("recorded as rmsnorm.max_err_two_pass")

# %% [markdown]
# ### Two-pass against PyTorch
#
# The timings were taken above together with the fused ones; here are the ratios.

# %%
ratio = main["two_pass_ms"] / main["torch_ms"]
decode_ratio = decode["two_pass_ms"] / decode["torch_ms"]
helpers.record("rmsnorm.two_pass_ms", main["two_pass_ms"], "ms", f"[{SIZES.rmsnorm_rows}, {H}]")
helpers.record("rmsnorm.two_pass_ratio", ratio, "x slower",
               f"two-pass / Qwen3RMSNorm time, [{SIZES.rmsnorm_rows}, {H}] (below 1: two-pass faster)")
helpers.record("rmsnorm.decode_two_pass_ms", decode["two_pass_ms"], "ms", f"[{SIZES.rmsnorm_decode_rows}, {H}]")
helpers.record("rmsnorm.decode_two_pass_ratio", decode_ratio, "x slower",
               f"two-pass / Qwen3RMSNorm time, [{SIZES.rmsnorm_decode_rows}, {H}]")
print(f"[{SIZES.rmsnorm_rows}, {H}]: two-pass {main['two_pass_ms']:.4f} ms, "
      f"PyTorch {main['torch_ms']:.4f} ms, ratio {ratio:.2f}")
print(f"[{SIZES.rmsnorm_decode_rows}, {H}]: two-pass {decode['two_pass_ms']:.4f} ms, "
      f"PyTorch {decode['torch_ms']:.4f} ms, ratio {decode_ratio:.2f}")

# %%
helpers.md(
    f"With {SIZES.rmsnorm_rows} rows, the two-pass kernel is **{versus(main['two_pass_ms'], main['torch_ms'])}** "
    f"than PyTorch and {versus(main['two_pass_ms'], main['fused_ms'])} than our own fused kernel. With "
    f"{SIZES.rmsnorm_decode_rows} row: **{versus(decode['two_pass_ms'], decode['torch_ms'])}** than PyTorch, "
    f"{versus(decode['two_pass_ms'], decode['fused_ms'])} than fused. "
    f"The blog measured the two-pass kernel at {helpers.blog('rmsnorm.two_pass_ratio')}x slower than PyTorch "
    "'overall' on a T4, without the shape, "
    "and found the gap larger at small batch sizes. "
    + ("(In CPU mode the ratios compare the interpreter with PyTorch's compiled CPU code: read the method, "
       "not the numbers.) " if helpers.MODE == "cpu" else
       "Your run agrees that un-fusing costs time against PyTorch at this shape. "
       if ratio > 1 else
       "Your run tells a different story: at this shape the two-pass kernel is not slower than PyTorch's "
       "chain of operations, which launches more kernels and moves intermediates of its own. ")
    + ("" if helpers.MODE == "cpu" else
       f"In your run the ratio against PyTorch is {decode_ratio:.2f} at {SIZES.rmsnorm_decode_rows} row and "
       f"{ratio:.2f} at {SIZES.rmsnorm_rows} rows: "
       + ("larger at the small shape, as the blog found." if decode_ratio > ratio else
          "not larger at the small shape, unlike the blog's finding."))
)

# %% [markdown]
# ## A sweep over the number of rows
#
# Now the same three versions at hidden size $H$ from one row to thousands. We expect the two-pass
# penalty over fused to sit near 2x (twice the launches) at few rows and to drift towards 1.5x (one and
# a half times the bytes) at many, if the GPU gets that far into the memory-bound regime. We plot the
# times, and the ratios against PyTorch and against fused.

# %%
sweep = pd.DataFrame([time_three(r) for r in helpers.progress(SIZES.rmsnorm_sweep_rows, desc="RMSNorm sweep")])
sweep["two_pass_vs_torch"] = sweep["two_pass_ms"] / sweep["torch_ms"]
sweep["two_pass_vs_fused"] = sweep["two_pass_ms"] / sweep["fused_ms"]
sweep["fused_bytes"] = [moved_bytes(r, "fused") for r in sweep["rows"]]
sweep["two_pass_bytes"] = [moved_bytes(r, "two_pass") for r in sweep["rows"]]
helpers.save_sweep(sweep, "rmsnorm_sweep")
helpers.show(sweep.round(4))

# %%
fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(11, 4))
for col, label in (("torch_ms", "PyTorch Qwen3RMSNorm"), ("fused_ms", "fused (1 launch)"),
                   ("two_pass_ms", "two-pass (2 launches)")):
    ax_t.plot(sweep["rows"], sweep[col], "o-", label=label)
ax_t.set(xscale="log", yscale="log", xlabel=f"rows (hidden size {H})", ylabel="time per call (ms)",
         title="Does un-fusing cost more at few rows or at many?")
ax_r.plot(sweep["rows"], sweep["two_pass_vs_torch"], "o-", label="two-pass / PyTorch")
ax_r.plot(sweep["rows"], sweep["two_pass_vs_fused"], "s-", label="two-pass / fused")
ax_r.axhline(2.0, color="grey", ls=":", label="2x: twice the launches")
ax_r.axhline(1.5, color="grey", ls="--", label="1.5x: 1.5 times the bytes")
ax_r.axhline(1.0, color="black", lw=0.8)
ax_r.set(xscale="log", xlabel=f"rows (hidden size {H})", ylabel="time ratio (above 1: two-pass slower)",
         title="How much slower is the two-pass kernel?")
for ax in (ax_t, ax_r):
    helpers.plain_log_ticks(ax, "x", sweep["rows"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
helpers.plain_log_ticks(ax_t, "y")
fig.suptitle(f"RMSNorm, {str(DTYPE)[6:]}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "rmsnorm_sweep")
plt.show()

# %%
widest = sweep.loc[sweep["two_pass_vs_torch"].idxmax()]
narrowest = sweep.loc[sweep["two_pass_vs_torch"].idxmin()]
few, many = sweep.iloc[0], sweep.iloc[-1]


def n_rows(r):
    return f"{int(r):,} row" + ("" if r == 1 else "s")


vs_torch = sweep["two_pass_vs_torch"]
text = (
    f"Against PyTorch, the two-pass kernel's time ratio is largest at **{n_rows(widest['rows'])} "
    f"({widest['two_pass_vs_torch']:.2f}x)** and smallest at {n_rows(narrowest['rows'])} "
    f"({narrowest['two_pass_vs_torch']:.2f}x)"
    + (": it beat PyTorch's chain of kernels at every size, so un-fusing made our kernel slower than our own "
       "fused one, not slower than PyTorch. " if (vs_torch < 1).all() else
       ": it was slower than PyTorch at every size. " if (vs_torch > 1).all() else ". ")
    + f"Against our fused kernel it is {few['two_pass_vs_fused']:.2f}x at {n_rows(few['rows'])} and "
    f"{many['two_pass_vs_fused']:.2f}x at {n_rows(many['rows'])} (predicted: up to 2x where launches "
    "dominate, up to 1.5x where bytes do). "
    + ("The penalty shrinks as the rows grow, as the launches-then-bytes picture predicts. "
       if few["two_pass_vs_fused"] > many["two_pass_vs_fused"] else
       "The penalty does not shrink as the rows grow, so the launches-then-bytes picture is not the whole "
       "story on this machine. ")
    + ("It is larger than 2x, more than the launch count alone explains: each launch also pays for the "
       "Python launcher around it, and part of that host time shows in the measurement. "
       if few["two_pass_vs_fused"] > 2.2 else "")
    + f"At {n_rows(many['rows'])} the fused kernel moved "
    f"{many['fused_bytes'] / (many['fused_ms'] * 1e-3) / 1e9:.3g} GB/s and the two-pass one "
    f"{many['two_pass_bytes'] / (many['two_pass_ms'] * 1e-3) / 1e9:.3g} GB/s (bytes in the table / time)."
)
helpers.md(text)

# %% [markdown]
# ## What one call costs inside a model
#
# `bench_ms` answers "how long does this operation take when we run it over and over?". On a GPU it uses
# `triton.testing.do_bench`, which flushes the cache between calls; while the GPU is busy flushing, the
# host is already preparing the next call, so part of the launch cost hides behind GPU work (more of it
# on a fast host, less on a slow one). Inside a model that decodes one token at a time the kernels are so
# short that little GPU work is there to hide the host's: chapter 1 measured how much of each token the GPU
# spent idle, waiting for the next launch.
#
# So before swapping, we look at one call at the decode shape the way `helpers.profile_call` sees it:
# kernels launched, GPU-busy time, and the wall time of a single synchronised call, host work included.

# %%
x, norm = make_case(SIZES.rmsnorm_decode_rows)  # the same case as PyTorch's kernel count above
w, eps = norm.weight, norm.variance_epsilon
with torch.no_grad():
    calls = {"PyTorch Qwen3RMSNorm": torch_call,
             "fused": helpers.profile_call(lambda: kernels.rmsnorm_fused(x, w, eps)),
             "two-pass": helpers.profile_call(lambda: kernels.rmsnorm_two_pass(x, w, eps))}


helpers.show(pd.DataFrame([
    {"version": name, "kernels per call": helpers.fmt(c.launches, 0),
     "GPU-busy µs": helpers.fmt(None if c.gpu_busy_ms is None else 1e3 * c.gpu_busy_ms, 1),
     "wall µs per call": round(1e3 * c.wall_ms, 1)}
    for name, c in calls.items()
]))
extra_us = 1e3 * (calls["two-pass"].wall_ms - calls["PyTorch Qwen3RMSNorm"].wall_ms)
print(f"two-pass minus PyTorch, wall time per call: {extra_us:+.1f} µs")

# %%
if calls["fused"].gpu_busy_ms is not None:  # a GPU was profiled
    busy_us, bench_us = 1e3 * calls["fused"].gpu_busy_ms, 1e3 * decode["fused_ms"]
    helpers.md(
        f"At this shape the fused kernel kept the GPU busy for **{busy_us:.1f} µs**, and `do_bench` timed it at "
        f"**{bench_us:.1f} µs** earlier. "
        + ("So the benchmark's number was mostly the host's work around the launch: `do_bench` starts its "
           "clock when the GPU has finished the work queued before the call (a flush of the L2 cache), and "
           "when the host needs longer to issue the call than that work takes, the wait is counted too. Read "
           "the timing tables above with that in mind: where their times barely change with the number of "
           "rows, they measure the cost of a call on this machine, not of a kernel."
           if bench_us > 3 * busy_us else
           "The benchmark's number is above the kernel's own time, by less than a factor of 3: `do_bench` "
           "flushes the L2 cache before each call (the profile above ran with warm caches), and it also counts "
           "any host work the GPU had to wait for."
           if bench_us > 1.5 * busy_us else
           "The two agree: the benchmark saw the kernel, not the host's work around it."))

# %% [markdown]
# ## All the RMSNorms, in the model
#
# Finally the experiment that matters: `helpers.patched` swaps every RMSNorm of the model (113 in the
# full-size Qwen3-0.6B, q_norm and k_norm included) for a `TritonRMSNorm` in two-pass mode, sharing the original weights, and puts the
# originals back when the `with` block ends. We measure tokens/s and launches per token before and after,
# and the original once more at the end: if the two originals differ, the machine's speed drifted while
# we measured, and differences smaller than that drift are noise.
#
# Predict first. Each RMSNorm runs once per token (q_norm and k_norm on one row per head, again a tiny,
# launch-bound call). After the swap, each call launches exactly 2 kernels instead of PyTorch's chain, so
# the launches per token change by (number of norms) x (2 minus PyTorch's count per call): *fewer*
# launches if PyTorch's chain is longer than two. The time per token should change by about (number of
# norms) x (the difference in wall time per call above). The next cell prints both predictions.

# %%
n_norms = len(norms)
predicted_ms = n_norms * extra_us / 1e3
print(f"predicted change in wall time per token: {n_norms} x {extra_us:+.1f} µs = {predicted_ms:+.2f} ms")
if torch_launches is not None:
    print(f"predicted change in launches per token:  {n_norms} x (2 - {torch_launches:.0f}) = "
          f"{n_norms * (2 - torch_launches):+.0f}")

# %%
forwards = 3 * helpers.forwards_per_tps(SIZES.new_tokens) + 2 * helpers.forwards_per_profile(SIZES.new_tokens)
with helpers.generation_progress(model, forwards, "original, two-pass, original again"):
    before = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
    prof_before = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
    with helpers.patched(model, rmsnorm="two_pass") as counts:
        after = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
        prof_after = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
    again = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
assert counts["rmsnorm"] == n_norms, "every RMSNorm, q_norm and k_norm included, must be replaced"
assert abs(prof_after.project_launches_per_token - 2 * n_norms) < 1e-9, "2 launches per RMSNorm per token"

helpers.record("rmsnorm.modules_replaced", counts["rmsnorm"], "modules", "every *RMSNorm, q_norm/k_norm included")
helpers.record("rmsnorm.tps_original", before.tokens_per_s, "tokens/s",
               f"prompt {SIZES.prompt_len}, {SIZES.new_tokens} new tokens")
helpers.record("rmsnorm.tps_custom", after.tokens_per_s, "tokens/s", "all RMSNorms two-pass")
helpers.record("rmsnorm.launches_per_token_custom", prof_after.launches_per_token, "launches",
               "all CUDA kernels per decoded token, RMSNorms two-pass; empty in CPU mode")

same = int((after.ids == before.ids).sum())
print(f"RMSNorm modules replaced: {counts['rmsnorm']} (of {n_norms})")
helpers.show(pd.DataFrame([
    {"model": label, "tokens/s": round(t.tokens_per_s, 2), "spread %": round(t.spread_pct, 1),
     "launches per token": helpers.fmt(p.launches_per_token, 0) if p else "",
     "Triton launches per token": p.project_launches_per_token if p else "",
     "wall ms per token": round(p.wall_ms_per_token, 3) if p else "",
     "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token, 3) if p else ""}
    for label, t, p in (("original", before, prof_before), ("two-pass RMSNorm", after, prof_after),
                        ("original, again", again, None))
]))
print(f"greedy tokens identical to the original model's: {same} of {SIZES.new_tokens}")

# %%
slowdown = before.tokens_per_s / after.tokens_per_s
drift = abs(again.tokens_per_s - before.tokens_per_s) / before.tokens_per_s
measured_ms = prof_after.wall_ms_per_token - prof_before.wall_ms_per_token
text = (f"Swapping {counts['rmsnorm']} RMSNorms for the two-pass kernel took the model from "
        f"**{before.tokens_per_s:.2f}** to **{after.tokens_per_s:.2f} tokens/s**: "
        + (f"**{slowdown:.2f}x slower**. " if slowdown > 1 else f"**{1 / slowdown:.2f}x faster**. ")
        + f"The original, measured again afterwards, ran at {again.tokens_per_s:.2f} tokens/s, a drift of "
        f"{100 * drift:.0f}%: "
        + ("well below the effect, so the effect is real. " if drift < abs(slowdown - 1) / 2 else
           "as large as the effect itself, so read this result as uncertain, and run the chapter again. ")
        + f"The wall time per token changed by {measured_ms:+.2f} ms against the {predicted_ms:+.2f} ms "
        "predicted from single calls. ")
if prof_before.launches_per_token is not None:
    delta = prof_after.launches_per_token - prof_before.launches_per_token
    text += (f"Launches per token went from {prof_before.launches_per_token:.0f} to "
             f"{prof_after.launches_per_token:.0f} ({delta:+.0f}; predicted "
             f"{n_norms * (2 - torch_launches):+.0f}). ")
    if delta < 0 and slowdown > 1 and extra_us > 0:
        text += ("The model launches fewer kernels and still runs slower, as the single calls foretold: two "
                 "Triton launches, with the Python launcher around them, cost more host time than PyTorch's "
                 "longer chain of its own kernels. ")
    elif delta < 0 and slowdown > 1:
        text += ("The model launches fewer kernels and still runs slower, although a single two-pass call "
                 "was the cheaper one in isolation: a call measured alone does not pay what it pays between "
                 "hundreds of other launches, so the single-call prediction did not carry over here. ")
    elif delta < 0:
        text += "Fewer launches, and a faster model: here the launch count is what mattered. "
text += (f"{same} of the {SIZES.new_tokens} greedy tokens match the original model's. "
         f"The blog went from {helpers.blog('rmsnorm.tps_original')} to {helpers.blog('rmsnorm.tps_custom')} "
         f"tokens/s on a T4 ({helpers.blog('rmsnorm.tps_original') / helpers.blog('rmsnorm.tps_custom'):.2f}x "
         "slower) with the same swap.")
helpers.md(text)

# %% [markdown]
# ## Your numbers beside the blog's

# %%
helpers.show(helpers.compare("rmsnorm."))

# %% [markdown]
# ## Takeaway
#
# - A fused kernel reads its input once and launches once, which leaves little room to lose time.
# - Un-fusing keeps the maths and changes the costs: twice the launches, about 1.5 times the bytes.
#   Which of the two you feel depends on the shape: launches at few rows, bytes at many.
# - In a model decoding one token at a time, every RMSNorm call has one row (or one row per head), so
#   launches, and how expensive each launch is on the host, are the costs to watch; the model-level
#   measurement above shows how they added up on your machine.
#
# Next, in chapter 4, we replace the largest pieces of work in the model, the linear projections, with a
# tiled matrix multiplication of our own.
