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
# - how a *fused* RMSNorm kernel does its work in one launch, reading each row once, and how to *un-fuse* it
#   into two kernels that pass one number per row through memory;
# - that "fused" only means something against a reference: PyTorch's eager `Qwen3RMSNorm` is a chain of
#   eight kernels, `torch.nn.functional.rms_norm` is one;
# - how to predict what a swap does to a model's tokens/s from what one call costs the host, before
#   measuring it.
#
# ## What you will see
#
# Un-fusing costs what it should on the GPU, and in the model its effect does not clear the noise. On the
# committed H200 run the two-pass kernel took 1.78x the GPU time of our fused kernel at 512 rows, and 1.65x at
# one row. With all 113 RMSNorms of the model swapped for it, the median time per generation was 1.093x the
# original's on the committed H200 run, but the rounds scattered widely (quartiles 0.998-1.186, A/A floor
# 1.016): within noise. The blog's T4 lost about a quarter of its tokens/s.
#
# "Slower" needs a reference, and the swap's reference is transformers' eager `Qwen3RMSNorm`: a chain of 8
# kernels that pass fp32 intermediates through memory, where our fused kernel launches 1 and the two-pass
# kernel 2. On the committed H200 run the two-pass kernel's GPU time was 5.86x faster than the chain's at 512
# rows, and one call at one row cost the host 90.1 µs against the chain's 104.5 µs. So before the model runs,
# this chapter predicts a change of 113 calls x about -14 µs, about 1.6 ms less per token out of about 26: a
# speed-up of about 6%. It did not come, and the median went the other way: a call's price alone is not its
# price inside `generate()`. The fair one-kernel reference is PyTorch's own `torch.nn.functional.rms_norm`,
# timed here beside the others; against it, un-fusing loses (on the committed H200 run 1.20x at 512 rows, near
# the blog's 1.26x). (The H200
# could not reach the model hub and ran Qwen3-0.6B's exact architecture with seeded random weights: timings
# depend on the shapes, not on the weights' values.)
#
# ## The blog's claim (T4)
#
# The blog wrote a fused RMSNorm first and found it only slightly slower than PyTorch's, with no number given.
# To make it worse on purpose it split the kernel in two: pass 1 reads each row and writes its inverse RMS to
# memory, pass 2 reads the row again with that number, scales it and writes the output. It measured the
# two-pass version 1.26x slower than PyTorch "overall", with a larger gap at small batch sizes (the post's
# table is missing), and swapping it into all 113 RMSNorms of Qwen3-0.6B took its T4 from 23.38 to 17.80
# tokens/s. The post names neither the PyTorch RMSNorm it compared with nor how it timed.
#
# ## The idea
#
# RMSNorm rescales each row of a tensor (one token's hidden state, say) so that its root mean square is 1,
# then multiplies it element by element by a learned weight $w$. For a row $x$ of $H$ numbers:
#
# $$y_j = w_j \cdot \frac{x_j}{\sqrt{\tfrac{1}{H}\sum_{i=1}^{H} x_i^2 + \varepsilon}}$$
#
# The sum runs over the whole row, so a program must see the whole row before it can write anything; rows are
# independent, so "one program per row" is the natural split. Qwen3's version computes the mean square in
# fp32 even for fp16 inputs, casts the normalised row back to fp16, and only then multiplies by the weight.
# Our kernels follow the same order.
#
# "Fused" and "un-fused" are relative words, so here are the four versions this chapter times, with what one
# call moves per element of an fp16 row (the weight, read once per call, left out):
#
# | version | kernels per call | bytes per element | what travels through memory |
# | --- | --- | --- | --- |
# | PyTorch eager `Qwen3RMSNorm` | 8 | about 36 | cast to fp32 (read 2, write 4), square (4 + 4), mean (4), multiply by the inverse RMS (4 + 4), cast back (4 + 2), multiply by the weight (2 + 2); the add and the square root work on one number per row |
# | `torch.nn.functional.rms_norm` | 1 on a GPU (the launch count below checks) | 4 | the row in, the result out |
# | our fused kernel | 1 | 4 | the row in, the result out |
# | our two-pass kernel | 2 | 6 | the row in twice, the result out, plus one fp32 number per row written and read back |
#
# So un-fusing moves 1.5 times the bytes of a fused kernel and launches twice as often, while the eager chain
# moves about 9 times the bytes and launches 8 times as often. The predictions for the GPU clock:
#
# - **two-pass against fused**: about 2x where the fixed cost of a launch dominates (few rows), falling
#   towards 1.5x where the bytes dominate, once a call's rows no longer fit in the GPU's L2 cache and stream
#   from main memory (an H200's L2 holds about 63 MB, which one call's input and output fill at about 15,000
#   rows of 1,024 fp16 numbers);
# - **eager against fused**: about 8x at few rows (eight launches' fixed costs); past the L2 at least 9x (the
#   bytes), more if the chain's general-purpose kernels stream their bytes more slowly than ours;
# - **`F.rms_norm` against fused**: one launch and the same bytes each, so within a small factor, set by how
#   well each kernel suits a row of 1,024 numbers.
#
# The host clock is another matter. Each launch also costs the host time to issue it, and the two sides pay
# differently: PyTorch's chain goes through its C++ dispatcher eight times, our kernels through a Python
# launcher that checks its inputs and allocates its output before launching.

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

import matplotlib.pyplot as plt
import pandas as pd
import torch
import torch.nn.functional as F
from IPython.display import display
from transformers import GenerationConfig
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

import helpers
import slower_kernels

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES
H, R, R1 = SIZES.rmsnorm_hidden, SIZES.rmsnorm_rows, SIZES.rmsnorm_decode_rows  # hidden size; many rows; decode
ROWS = sorted(set(SIZES.rmsnorm_sweep_rows) | {R, R1})  # on a GPU, the sweep goes past an H200's 63 MB L2
CLOCK = "GPU" if helpers.HAS_GPU else "interpreter"  # the clock of every kernel ratio below
E = torch.tensor([], dtype=DTYPE).element_size()  # bytes per element

# %% [markdown]
# ## Where Qwen3 uses it
#
# We load the model now (the end of the chapter needs it) and list its RMSNorm modules by role. Two per layer
# normalise the whole hidden state; `q_norm` and `k_norm` normalise each attention head's query and key
# separately, so their rows are one head long.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
norms = {name: m for name, m in model.named_modules() if type(m).__name__.endswith("RMSNorm")}
roles = pd.DataFrame([{"role": name.rsplit(".", 1)[-1], "row length": m.weight.shape[0]} for name, m in norms.items()])
helpers.show(roles.groupby("role", sort=False).agg(modules=("role", "size"), row_length=("row length", "first")))
print("RMSNorm modules, each called once per decoded token:", len(norms))

# %% [markdown]
# ## The fused kernel
#
# One program per row: it loads its row once, computes the mean square in fp32 in registers, normalises,
# multiplies by the weight and writes the row once. The launcher (not shown; `slower_kernels/rmsnorm.py`)
# checks the inputs, allocates the output and launches one program per row, with `num_warps` chosen from the
# row's block size (`slower_kernels.configs.row_num_warps`: 4 warps of 32 threads for a row of 1,024 numbers, 8
# numbers per thread).

# %%
rmsnorm_src = inspect.getmodule(slower_kernels.rmsnorm_fused)
display({"text/plain": inspect.getsource(rmsnorm_src.rmsnorm_fused_kernel.fn)}, raw=True)  # the source, as text

# %% [markdown]
# ## Un-fusing: two kernels instead of one
#
# To make it worse without changing the result, split it where the data breaks: pass 1 reads each row and
# writes its inverse RMS, $1/\sqrt{\text{mean}(x^2) + \varepsilon}$, to an fp32 buffer in global memory; pass
# 2 reads the row *again*, reads its number back, scales by the weight and writes the output. The arithmetic is
# the same; the row crosses from memory twice, and there are two launches.

# %%
display({"text/plain": inspect.getsource(rmsnorm_src.rmsnorm_inv_rms_kernel.fn) + "\n\n"
                        + inspect.getsource(rmsnorm_src.rmsnorm_scale_kernel.fn)}, raw=True)


def moved_bytes(rows, version):
    """Bytes one call reads and writes: the input, the output and the weight, and the two-pass fp32 buffer."""
    if version == "two-pass":
        return 3 * rows * H * E + 2 * 4 * rows + H * E  # x read twice; inv_rms written once, read once
    return 2 * rows * H * E + H * E  # fused (and F.rms_norm): x read once, y written once, the weight


# %% [markdown]
# ## Are they correct?
#
# Fresh random rows and random weights, never ones. Each version is compared with `Qwen3RMSNorm` run in
# float64, with a tolerance relative to the largest output (`helpers.TOLERANCE["kernel"]`, per dtype): fp16
# keeps about three significant digits and the computation rounds twice. PyTorch's eager module in the same
# dtype is in the table too, as the error to expect.

# %%
VERSIONS = {  # name -> one RMSNorm call on (x, module); every ratio below is taken against the eager chain
    "eager": lambda x, norm: norm(x),
    "F.rms_norm": lambda x, norm: F.rms_norm(x, (H,), norm.weight, norm.variance_epsilon),
    "fused": lambda x, norm: slower_kernels.rmsnorm_fused(x, norm.weight, norm.variance_epsilon),
    "two-pass": lambda x, norm: slower_kernels.rmsnorm_two_pass(x, norm.weight, norm.variance_epsilon),
}
EAGER = "eager"


def make_case(rows, seed=0):
    """Fresh random rows x [rows, H] and a Qwen3RMSNorm with random weights."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, H, generator=g).to(DEVICE, DTYPE)
    norm = Qwen3RMSNorm(H, eps=1e-6).to(DEVICE, DTYPE)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(H, generator=g))
    return x, norm


def max_error(version, rows=R, seed=1):
    """(max |version - float64 reference|, tolerance) on a fresh [rows, H] case."""
    x, norm = make_case(rows, seed)
    ref = Qwen3RMSNorm(H, eps=1e-6).to(DEVICE, torch.float64)
    with torch.no_grad():
        ref.weight.copy_(norm.weight.double())
        expected = ref(x.double())
        error = (VERSIONS[version](x, norm).double() - expected).abs().max().item()
    return error, helpers.TOLERANCE["kernel"][DTYPE] * expected.abs().max().item()


checks = pd.DataFrame([{"version": v, "max |error|": e, "tolerance": t, "check": "PASS" if e <= t else "FAIL"}
                       for v in VERSIONS for e, t in [max_error(v)]]).set_index("version")
helpers.show(checks)
assert (checks["check"] == "PASS").all(), "a version is outside the tolerance"
for v, name in (("fused", "fused"), ("two-pass", "two_pass")):
    helpers.record(f"rmsnorm.max_err_{name}", checks.loc[v, "max |error|"], "abs",
                   f"max |{v} - float64 reference|, [{R}, {H}], {str(DTYPE)[6:]}")

# %% [markdown]
# ## Timing the four versions
#
# Each row count gets one `helpers.compare_calls` on the GPU clock (CUDA-graph replay, the host out of the
# loop): the eager chain is the reference, timed twice per round for its A/A floor, and the other three are
# timed beside it in shuffled rounds ([how we measure](01_setup.ipynb#How-we-measure)). A ratio between two of
# them is taken round by round. On a GPU each version also gets one host reading per row count
# (`helpers.host_ms_per_call`, a single reading), drawn dashed in the figure. Launches are counted from a CUDA
# graph of one call (`helpers.launches_per_call`). In CPU mode only our own launches can be counted, and every
# time is the Triton interpreter's against PyTorch's compiled CPU code: read the method, not the numbers.

# %%
def calls_for(rows):
    """The four versions as zero-argument calls on one fresh [rows, H] case."""
    x, norm = make_case(rows)
    return {v: (lambda f=f: f(x, norm)) for v, f in VERSIONS.items()}


def measure(rows):
    """The four versions at [rows, H]: the GPU-clock comparison against the eager chain, each version's median
    time from it, and one host reading per version (in CPU mode the interpreter's rounds are the only clock)."""
    calls = calls_for(rows)
    with torch.no_grad():
        cmp = helpers.compare_calls({v: c for v, c in calls.items() if v != EAGER}, reference=calls[EAGER],
                                    reference_name=EAGER)
        gpu_ms = {v: cmp.ms[v] for v in calls}
        host_ms = {v: helpers.host_ms_per_call(c) for v, c in calls.items()} if helpers.HAS_GPU else gpu_ms
    return {"cmp": cmp, "gpu_ms": gpu_ms, "host_ms": host_ms}


def against_eager(cmp):
    """One row per version: median µs per call, ratio to the eager chain with its quartiles, and the verdict
    (the eager chain's own row: its A/A floor)."""
    return pd.DataFrame([{"version": v, f"{cmp.clock}, µs per call": 1e3 * cmp.ms[v],
                          "ratio to eager (quartiles)": f"{r.median_text} ({r.quartiles})",
                          "verdict": "A/A floor" if v == EAGER else cmp.verdict(v).text}
                         for v in VERSIONS for r in [cmp.floor if v == EAGER else cmp.ratios[v]]])


with torch.no_grad():
    kernels = {v: helpers.launches_per_call(c) if helpers.HAS_GPU or v in ("fused", "two-pass") else None
               for v, c in calls_for(R1).items()}
runs = {rows: measure(rows) for rows in helpers.progress(ROWS, desc="RMSNorm sweep")}

# %% [markdown]
# First the two shapes the series records: one row, as when decoding one token, and 512 rows, as in a prefill.
# Each ratio is to the eager chain (its own row is its A/A floor), with the verdict of `helpers.verdict`; the two
# lines below the table set the two-pass kernel against the two one-kernel versions.

# %%
cmp_R, cmp_R1 = runs[R]["cmp"], runs[R1]["cmp"]
how = f"{cmp_R.clock}, median of {cmp_R.rounds} shuffled rounds"
for rows, prefix in ((R, ""), (R1, "decode_")):
    for v, name, label in (("eager", "torch", "Qwen3RMSNorm"), ("fused", "fused", "fused kernel"),
                           ("two-pass", "two_pass", "two-pass kernel")):
        helpers.record(f"rmsnorm.{prefix}{name}_ms", runs[rows]["gpu_ms"][v], "ms", f"{label}, [{rows}, {H}], {how}")
cmp_R.record("two-pass", "rmsnorm.two_pass_ratio", f"two-pass / Qwen3RMSNorm, [{R}, {H}]")
cmp_R1.record("two-pass", "rmsnorm.decode_two_pass_ratio", f"two-pass / Qwen3RMSNorm, [{R1}, {H}]")
helpers.show(pd.concat([against_eager(runs[rows]["cmp"]).assign(**{
    "shape": f"[{rows}, {H}]", "kernels per call": [helpers.fmt(kernels[v], 0) for v in VERSIONS]})
    for rows in (R1, R)]).set_index(["shape", "version"]))
for rows in (R1, R):
    for other in ("fused", "F.rms_norm"):
        cmp = runs[rows]["cmp"]
        print(f"[{rows}, {H}]", helpers.verdict_line(f"two-pass / {other}", cmp.between("two-pass", other), cmp.floor))

# %% [markdown]
# On the committed H200 run, at one row the eager chain took 11.46 µs of GPU time, the fused kernel 1.407 µs and
# the two-pass kernel 2.321 µs; at 512 rows, 18.45, 1.774 and 3.146 µs. Against the eager chain our fused kernel
# was 10x faster at 512 rows and even the two-pass kernel 5.86x faster: un-fusing doubled our launches, but two
# are still a quarter of the chain's eight, and the chain's fp32 intermediates move six times the two-pass
# kernel's bytes.
#
# So whether the two-pass kernel is "slower than PyTorch", as the blog found, depends on which PyTorch RMSNorm
# it is set against. Against the eager chain it wins. Against a one-kernel RMSNorm it should lose: by up to its
# ratio to our fused kernel if PyTorch's kernel is as quick as ours, by less if it is slower. The blog's 1.26x
# fits such a reference better than the chain. `F.rms_norm` is PyTorch's one-kernel RMSNorm, and on the
# committed H200 run the two-pass kernel lost to it: 1.09x slower at one row, 1.20x at 512 rows. PyTorch's one
# kernel took about 1.5 times our fused kernel's time, so the two-pass kernel loses to it by less than to ours.
#
# ## A sweep over the number of rows
#
# The same measurement at every row count, from one row to 65,536 on a GPU, to test the predictions of "The
# idea" (the figure's dotted vertical line marks where one call's input and output fill the L2 cache). A call's
# host time should not move with the rows until its GPU time outgrows it.

# %%
RATIOS = (("eager", "fused"), ("two-pass", "fused"), ("two-pass", "F.rms_norm"))
sweep = pd.DataFrame([{"rows": rows, **{f"{v.replace('-', '_')}_{clock}_ms": m[f"{clock}_ms"][v]
                                        for v in VERSIONS for clock in ("gpu", "host")},
                       **{f"{a} / {b}": m["cmp"].between(a, b).median for a, b in RATIOS},
                       "A/A floor": m["cmp"].floor.median} for rows, m in runs.items()])
helpers.save_sweep(sweep, "rmsnorm_sweep")  # the times in ms; chapter 4 reads two_pass_host_ms
helpers.show(pd.DataFrame({
    "rows": sweep["rows"], "working set MB": moved_bytes(sweep["rows"], "fused") / 1e6,  # input, output, weight
    **{f"{v} {CLOCK} µs": 1e3 * sweep[f"{v.replace('-', '_')}_gpu_ms"] for v in VERSIONS},
    **{k: sweep[k] for k in [f"{a} / {b}" for a, b in RATIOS] + ["A/A floor"]},
    "fused GB/s": moved_bytes(sweep["rows"], "fused") / sweep["fused_gpu_ms"] / 1e6,  # bytes / (ms * 1e-3) / 1e9
    "two-pass host µs": 1e3 * sweep["two_pass_host_ms"]}).set_index("rows"))
biggest = runs[ROWS[-1]]["cmp"]
print(f"[{ROWS[-1]}, {H}]", helpers.verdict_line("two-pass / fused", biggest.between("two-pass", "fused"), biggest.floor))
L2 = torch.cuda.get_device_properties(0).L2_cache_size if helpers.HAS_GPU else None
print("L2 cache MB:", helpers.fmt(L2 and L2 / 1e6, 2))

# %%
fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(12, 5))
colors = dict(zip(VERSIONS, ("tab:blue", "tab:purple", "tab:orange", "tab:green")))
for v, color in colors.items():
    key = v.replace("-", "_")
    ax_t.plot(sweep["rows"], 1e3 * sweep[f"{key}_gpu_ms"], "o-", color=color, label=f"{v}, {CLOCK} time")
    if helpers.HAS_GPU:
        ax_t.plot(sweep["rows"], 1e3 * sweep[f"{key}_host_ms"], "x--", color=color, alpha=0.5,
                  label=f"{v}, host time (one reading)")
for (a, b), color in zip(RATIOS, ("tab:blue", "tab:green", "tab:red")):
    r = [m["cmp"].between(a, b) for m in runs.values()]
    ax_r.errorbar(sweep["rows"], [x.median for x in r], fmt="o-", capsize=3, color=color,
                  yerr=[[x.median - x.low for x in r], [x.high - x.median for x in r]], label=f"{a} / {b}")
for y, style, label in ((9, "-.", "9x: the eager chain's bytes"), (2, ":", "2x: twice the launches"),
                        (1.5, "--", "1.5x: 1.5 times the bytes")):
    ax_r.axhline(y, color="grey", ls=style, label=label)
for ax in (ax_t, ax_r):
    if L2:  # where the input and output of one call fill the L2 cache
        ax.axvline(L2 / (2 * H * E), color="black", ls=":", lw=1, label="input + output = L2 cache")
    ax.set(xscale="log", yscale="log", xlabel=f"rows of {H} numbers ({str(DTYPE)[6:]})")
    helpers.plain_log_ticks(ax, "x", ROWS, [helpers.count_label(r) for r in ROWS])
    helpers.plain_log_ticks(ax, "y")
    ax.tick_params(axis="x", labelrotation=45)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.28))
ax_t.set(ylabel="µs per call", title=f"Time per call: {CLOCK} (solid)" + (", host (dashed)" if helpers.HAS_GPU else ""))
ax_r.set(ylabel=f"{CLOCK}-time ratio (median, quartiles)", title="Where does un-fusing cost 2x, where 1.5x?")
fig.suptitle(f"RMSNorm, {helpers.env_info()['gpu']} ({helpers.MODE} mode)")
fig.tight_layout()
helpers.save_figure(fig, "rmsnorm_sweep")
plt.show()

# %% [markdown]
# ### What the sweep shows
#
# Up to 4,096 rows, on the committed H200 run the two-pass / fused ratio stayed between 1.65 and 1.79 at every
# row count: neither near 2 at one row nor near 1.5 at 4,096. Both predictions missed, each for a reason the
# numbers show.
#
# - **At one row** the second kernel added about 0.9 µs to the fused kernel's 1.41 µs, less than a whole
#   kernel's time: pass 1 writes one number per row instead of a row, and pass 2 has no reduction, so each
#   does less than the fused kernel. Twice the launches is not twice the time.
# - **At 4,096 rows** the working set of one call, 16.8 MB on the committed H200 run, sat inside its 62.9 MB L2
#   cache. Read from the cache, the second pass's bytes are cheap and the fixed costs still weigh, so the
#   ratio never reached the regime of the 1.5x prediction, which is about bytes streaming from main memory.
#
# **Past the L2**, from 16,384 rows, one call's input and output no longer fit in an H200's L2, so the byte count
# should finally set the ratio: two-pass / fused towards 1.5 (not quite: pass 1 only reads, and a stream that
# only reads may not run at a copy's rate), eager / fused at 9 or more, the fused kernel's GB/s near the main
# memory's. On the committed H200 run two-pass / fused came down to between 1.57 and 1.64, eager / fused stayed
# near 13, and the fused kernel moved about 3,700 to 4,090 GB/s, most of the nominal 4,800. On a T4, whose L2
# holds 4 MB, the sweep leaves the cache at a few hundred rows.
#
# On the host clock the rows hardly matter until the GPU time outgrows the launch. On the committed H200 run the
# two-pass kernel's single host readings stayed between about 53 and 63 µs up to 32,768 rows (bar one of 113 µs
# at 16,384); at 65,536 rows its GPU time, 107 µs, had passed that, and the host waited for it. The eager
# chain's GPU time passed its host time at 16,384 rows (225 µs), and from there on its dashed line follows its
# solid one.
#
# ## A look inside: what the compiler made
#
# As in [chapter 2](02_add_kernel.ipynb#What-the-compiler-made), the three kernels compiled ahead of time for a
# T4 (`sm_75`) and an H200 (`sm_90`), fp16, a row of 1,024 numbers, in a separate process on the CPU, so this
# reads the same in every mode; then two excerpts of the `sm_90` PTX.

# %%
SHORT = {"rmsnorm_fused_kernel": "fused", "rmsnorm_inv_rms_kernel": "pass 1", "rmsnorm_scale_kernel": "pass 2"}
compiled = helpers.compiler_table(list(SHORT))
helpers.show(compiled.assign(kernel=compiled["kernel"].map(SHORT), cc="sm_" + compiled["cc"].astype(str))
             .set_index(["kernel", "cc"])[["num_warps", "registers", "shared", "programs_per_sm", "global loads",
                                           "widest global load", "global stores", "shared loads", "shared stores"]].T)
label = compiled["label"].iloc[0]
display({"text/plain": helpers.ptx_excerpt("rmsnorm_fused_kernel", label, 90, r"shfl|bar\.sync|ld\.shared|st\.shared",
                                           max_lines=8) + "\n---\n"
                        + helpers.ptx_excerpt("rmsnorm_scale_kernel", label, 90, r"ld\.global|st\.global")}, raw=True)

# %% [markdown]
# Two things are new since the add. The first is a **reduction**: `tl.sum(x * x, axis=0)` adds numbers held by
# all 128 threads of a program. Each thread adds its own 8 numbers in registers; then the 32 threads of a warp
# swap partial sums with `shfl.sync.bfly` (a *butterfly shuffle*: each thread adds the value of the lane 16,
# then 8, 4, 2, 1 away, register to register); then the warps hand their sums over through **shared memory**,
# the SM's on-chip memory: `st.shared`, a barrier `bar.sync` that waits for every warp, `ld.shared`. That is
# the 16 bytes of shared memory in the table, one fp32 sum for each of 4 warps; pass 2 has no reduction and
# uses none.
#
# The second is **the pair's extra traffic**, in the global loads and stores: pass 1 ends with one store of
# one fp32 number per row, and pass 2 loads the row (`ld.global.v4.b32`, eight fp16 numbers per instruction),
# the weight, and that one number (the lone `ld.global.b32` without `.v4`). The fused kernel keeps the number in
# a register. These static counts are the byte count of "The idea", instruction by instruction.
#
# ## What one call costs the host
#
# Inside a model decoding one token at a time these kernels are so short that the GPU spends most of each
# token waiting for the host to launch the next one (chapter 1 measured how idle it is). So at the decode shape
# the clock that matters to tokens/s is likely the host's: how long one call keeps the Python program busy,
# launching included. Here the four versions at one row are compared on that clock, in shuffled rounds with
# the eager chain's A/A floor, as the GPU times were (`helpers.compare_calls(..., clock="host")`).

# %%
with torch.no_grad():
    calls = calls_for(R1)
    host_cmp = helpers.compare_calls({v: c for v, c in calls.items() if v != EAGER}, reference=calls[EAGER],
                                     clock="host", reference_name=EAGER)
helpers.show(against_eager(host_cmp).set_index("version"))
for v, name, label in (("eager", "torch", "Qwen3RMSNorm"), ("two-pass", "two_pass", "two-pass kernel")):
    helpers.record(f"rmsnorm.host_decode_{name}_ms", host_cmp.ms[v], "ms",
                   f"{label}, [{R1}, {H}], {host_cmp.clock}, median of {host_cmp.rounds} shuffled rounds")

# %% [markdown]
# On the committed H200 run one call at one row cost the host 104.5 µs for the eager chain, 56.4 µs for the
# fused kernel and 90.1 µs for the two-pass kernel, each 9 to 40 times its GPU time. Per launch that is about
# 13 µs for each of the chain's eight and about 45 µs for each of the two-pass kernel's two: our launches are
# dearer (a Python launcher checks the inputs and allocates the output before each), the chain's more
# numerous. `F.rms_norm`, one launch through PyTorch's C++ dispatcher, cost 17.0 µs, least of all: a sign of
# how much of our price is Python.
#
# On the committed H200 run these are dearer than the sweep's single readings at one row (two-pass 52.67 µs,
# the eager chain's dashed line about 67 µs), though both time the same loop: 200 back-to-back calls between
# two synchronisations, median of five. Here, later in the run, every version read about 1.6 to 1.7 times
# dearer, and this run cannot say why. The prediction below uses these rounds, which time the four versions
# interleaved; the sweep's readings give almost the same difference, about -14 µs.
#
# ## All the RMSNorms, in the model
#
# Now the experiment that matters: `helpers.patched` swaps all of the model's RMSNorms (113 in Qwen3-0.6B,
# `q_norm` and `k_norm` included) for a `TritonRMSNorm` in two-pass mode, sharing the original weights.
#
# **Predict first.** Each RMSNorm runs once per decoded token, on one row (or one row per head). If the host
# sets the pace, the swap changes each token's time by (two-pass minus eager host time per call) x (calls per
# token). The GPU's own time falls too, by roughly 9 µs per call, but the GPU spends most of each token idle,
# so that should not show.

# %%
n_norms = len(norms)
delta_us = 1e3 * (host_cmp.ms["two-pass"] - host_cmp.ms[EAGER])  # host µs per call, at one row
helpers.show(pd.DataFrame({"value": {"two-pass minus eager, host µs per call": delta_us,
                                     "RMSNorm calls per decoded token": n_norms,
                                     "predicted change, wall ms per decoded token": n_norms * delta_us / 1e3}}))

# %% [markdown]
# On the committed H200 run's host clock a two-pass call, 90.13 µs, cost 14.35 µs less than an eager one; times
# 113 calls, 1.622 ms less per decoded token. The original took 26.28 wall ms per decoded token in its
# profile, so the prediction is a speed-up of about 6%, a time ratio of about 0.94: beyond the smallest effect the series
# calls real (`helpers.verdict` needs 5%, or twice the A/A floor's distance from 1 where that is wider).
# The prediction prices a two-pass call at its host time alone, called back to back; inside `generate()` the
# same call runs amid the model's other work, where its price can differ ([chapter 8](08_lessons.ipynb)
# measures that for every swap).
#
# The measurement is one `helpers.compare_configs`: the original, the original again (the A/A floor) and the
# swapped model generate in shuffled rounds, `SIZES.rounds_small` of them (twice the usual, for an effect near
# the noise), and `torch.profiler` counts kernels and GPU-busy time per token afterwards. The "predicted"
# column adds the change above to the original's measured wall time per token.

# %%
SWAP = "two-pass RMSNorm"
comparison = helpers.compare_configs(model, {SWAP: dict(rmsnorm="two_pass")}, tokenizer=tokenizer,
                                     rounds=SIZES.rounds_small)  # a swap near the noise: twice the rounds
profiles = helpers.profile_configs(comparison, model)  # after the timed rounds
before, after = profiles[helpers.ORIGINAL], profiles[SWAP]
assert abs(after.project_launches_per_token - 2 * n_norms) < 1e-9, "2 launches per RMSNorm per token"
swap_verdict = comparison.record(SWAP, "rmsnorm.tps_slowdown", "all RMSNorms two-pass")
helpers.show(comparison.table())
print(helpers.verdict_line(f"{SWAP} / original, time per generation", comparison.ratios[SWAP], comparison.floor))
print("as on the committed H200 run" if not swap_verdict.real else "unlike the committed H200 run: see What the model shows")
helpers.show(pd.DataFrame([
    {"model": name, "kernels per token": helpers.fmt(p.launches_per_token, 0),
     "Triton launches per token": p.project_launches_per_token,
     "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token, 3), "wall ms per token": p.wall_ms_per_token,
     "predicted wall ms per token": before.wall_ms_per_token + (n_norms * delta_us / 1e3 if p is after else 0)}
    for name, p in ((helpers.ORIGINAL, before), (SWAP, after))]).set_index("model"))

# %% [markdown]
# The swap must not change what the model computes: one greedy generation with each model, compared token by
# token.

# %%
greedy = GenerationConfig(max_new_tokens=SIZES.new_tokens, min_new_tokens=SIZES.new_tokens, do_sample=False,
                          pad_token_id=model.config.eos_token_id or 0)
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, model.config.vocab_size)
tokens = []
for rmsnorm in (None, "two_pass"):  # the original, then the swap
    with torch.inference_mode(), helpers.patched(model, rmsnorm=rmsnorm) as counts:
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), generation_config=greedy)
        tokens.append(out[0, prompt.shape[1]:].cpu())
assert counts["rmsnorm"] == n_norms, "every RMSNorm, q_norm and k_norm included, must be replaced"
print("greedy tokens identical to the original's:", int((tokens[0] == tokens[1]).sum()), "of", SIZES.new_tokens)

rounds_note = f"median of {len(comparison.orders)} shuffled rounds"
helpers.record("rmsnorm.modules_replaced", counts["rmsnorm"], "modules", "every *RMSNorm, q_norm/k_norm included")
helpers.record("rmsnorm.tps_original", comparison.tokens_per_s[helpers.ORIGINAL], "tokens/s",
               f"{rounds_note}; prompt {SIZES.prompt_len}, {SIZES.new_tokens} new tokens")
helpers.record("rmsnorm.tps_custom", comparison.tokens_per_s[SWAP], "tokens/s", f"all RMSNorms two-pass; {rounds_note}")
helpers.record("rmsnorm.launches_per_token_custom", after.launches, "launches",
               "every CUDA kernel per decoded token (torch.profiler)" if helpers.HAS_GPU else "our Triton kernels only")

# %% [markdown]
# ### What the model shows
#
# On the committed H200 run the original generated at a median of 36.48 tokens/s and the swapped model at
# 35.37; round by round, the swapped model's time was 1.093x the original's (quartiles 0.998-1.186), against an
# A/A floor of 1.016 whose own quartiles spanned 0.917-1.100: within noise. **The prediction missed**: the
# predicted ratio, about 0.94, lies below every quartile of the measured rounds. The profile table shows by how
# much: 28.37 wall ms per token measured against 24.66 predicted, about 33 µs per call that a two-pass call cost
# the host inside `generate()` beyond its price called back to back.
#
# The profiler shows what did change. On the committed H200 run the kernels per decoded token fell from 1,655
# to 977 (113 x (2 - 8) = -678), 226 of them ours, and the GPU-busy time per token from 3.406 to 2.422 ms. The
# wall time per token rose instead, from 26.28 to 28.37 ms, 8 to 12 times the GPU's busy time: the host sets
# the pace, and by this profile a two-pass call cost the host more than an eager call inside the model, not
# less. Every greedy token matched.
#
# On the H200 the effect stayed within noise, where the blog's T4 lost a quarter of its tokens/s (23.38 to
# 17.80). The likely reason is the reference again: the blog's "PyTorch" was
# probably not the eight-kernel chain, since even its fused kernel came out slightly slower than it, which ours
# never does against the chain; and a T4 with its host prices launches differently from an H200.
# [Chapter 8](08_lessons.ipynb) sets every swap beside the blog's and prices each one module by module.
#
# ## Your numbers beside the blog's
#
# The kernel rows are GPU time (interpreter time in CPU mode), the `host_` rows host time per call. The blog's
# column is its T4, timed by a method the post does not name, against an unnamed reference.

# %%
helpers.show(helpers.compare("rmsnorm."))

# %% [markdown]
# ## Try it yourself
#
# Two changes to the two-pass RMSNorm, one at a time, each timed against the unchanged call with
# `helpers.compare_calls`, at the largest row count of the series' own sweep (4,096 rows at full size; inside an
# H200's L2, outside a T4's). Guess first: set `answer` to `"faster"`, `"slower"` or `"same"` and run the cell;
# with `answer = None` it only shows the measurement.
#
# **1. The other precision.** The same rows in fp32 where the chapter ran fp16 (on a GPU), fp16 where it ran
# fp32 (in CPU mode). In fp32 the input and output move twice the bytes; the launches and the fp32 arithmetic
# stay. Where the bytes stream from main memory (a T4 here) expect close to 2x slower; where they sit in the L2
# (an H200 here), fixed costs keep a share of the time, and that share does not double: expect under 2x.
# The interpreter computes with numpy, where fp16 is no cheaper: expect nothing useful from CPU mode.

# %%
BIG_ROWS = max(SIZES.rmsnorm_sweep_rows)  # a multiple of 8 in every mode (exercise 2 reshapes by it)
OTHER = torch.float32 if DTYPE == torch.float16 else torch.float16
x_big, norm_big = make_case(BIG_ROWS)
w_big = norm_big.weight.detach()
x_other, w_other = x_big.to(OTHER), w_big.to(OTHER)
change = f"rows in {str(OTHER)[6:]}"

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({change: lambda: slower_kernels.rmsnorm_two_pass(x_other, w_other)},
                            reference=lambda: slower_kernels.rmsnorm_two_pass(x_big, w_big))
measured = helpers.check_answer(answer, cmp.ratios[change], cmp.floor, change=change, clock=cmp.clock)

# %% [markdown]
# **2. Longer rows, the same numbers.** Reshape the same input into an eighth as many rows of $8H$ numbers. The
# bytes and the two launches stay; each program gets a row of $8H$ numbers and more warps (16 instead of 4 at
# full size), and an eighth as many programs, still enough to fill an H200's 132 SMs, pay each program's fixed
# cost (its reduction's barrier, its fp32 store to the buffer). Where fixed costs keep a share of the call (an
# H200's L2) expect **faster**, though near the series' 5% threshold; where the bytes set the time (a T4's
# main memory), closer to "same". In the
# interpreter every program has a fixed price too: expect faster.

# %%
x_long = x_big.reshape(BIG_ROWS // 8, 8 * H)  # the same numbers, rows eight times as long
w_long = torch.randn(8 * H, generator=torch.Generator().manual_seed(2)).to(DEVICE, DTYPE)  # a weight per column
change = f"[{BIG_ROWS // 8}, {8 * H}] rows"

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({change: lambda: slower_kernels.rmsnorm_two_pass(x_long, w_long)},
                            reference=lambda: slower_kernels.rmsnorm_two_pass(x_big, w_big))
measured = helpers.check_answer(answer, cmp.ratios[change], cmp.floor, change=change, clock=cmp.clock)

# %% [markdown]
# **3. Without measuring.** The eager chain moves about 36 bytes per element and the fused kernel 4. Work out
# from the sweep table the rows at which the eager chain's GPU time reaches its host time on your GPU, and what
# the chain's effective GB/s is there. Is it below or above the fused kernel's?
#
# ## Takeaway
#
# - Un-fusing keeps the maths and changes the costs: twice the launches and 1.5 times the bytes, which on the
#   GPU clock made our two-pass kernel 1.57x to 1.79x slower than our fused one on the committed H200 run.
# - "Slower" needs a reference: against PyTorch's eight-kernel eager `Qwen3RMSNorm` the un-fused kernel is still
#   several times faster on the GPU and no dearer on the host; `F.rms_norm` is the fair one-kernel comparison.
# - Predict a swap from what it changes on the clock that sets the pace: at batch size 1 that is the host; and
#   price a call inside the model, not alone: 113 calls x -14 µs predicted 6% faster, and the model ran
#   within noise of the original (median 9% slower).
#
# Next, in chapter 4, we replace the largest pieces of work in the model, the linear projections, with a tiled
# matrix multiplication of our own.
