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
# # Chapter 5: Attention, one head at a time
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/05_attention.ipynb)
#
# In this chapter you will learn:
# - what attention computes for one new token, and how grouped-query attention lets Qwen3's 16 query heads
#   share 8 key/value heads;
# - how to tell whether a slow function is slow because of its arithmetic or because of its launches, with
#   two clocks (GPU time and host time per call) and a count of kernel launches;
# - why even PyTorch's fused attention uses only a few percent of an H200's memory bandwidth when it decodes
#   one token, and what a better kernel does about it (chapter 9).
#
# ## What you will see
#
# **Launches, not arithmetic.** This chapter computes the same attention three ways: PyTorch's fused
# `scaled_dot_product_attention` (SDPA, one kernel), a handful of plain PyTorch ops, and a Python loop over
# the 16 query heads that calls our Triton kernels three times per head. The loop does the same arithmetic on
# the same bytes as SDPA, in 82 launches per call instead of 1. On the committed H200 run, at the blog's shape,
# the loop took 0.2267 ms of GPU time per call against SDPA's 0.005959 ms, 38x slower over the rounds
# (quartiles 38.0-38.1), and 2.676 ms of host time per call against 0.01649 ms. Only about 8% of the loop's
# extra host time was extra GPU work; the rest was the host issuing kernels while the GPU waited.
#
# In the model the launches multiply: with all 28 attention modules on the loop, each decoded token makes
# 28 x 81 = 2,268 more launches (3,923 instead of 1,655). On the committed H200 run whole generations took
# 4.33x the original's time, 10.70 tokens/s against 46.78, while the GPU was busy for only 6.54 ms of the 91.21
# ms each token took.
#
# **And SDPA itself is far from the hardware's limit.** On the committed H200 run, at Qwen3's shape, SDPA read
# its 2 MiB of keys and values in 7.46 µs: 281 GB/s, about 6% of the H200's nominal 4,800 GB/s. One query row
# per head is too little work to spread over 132 SMs; splitting the keys across programs (Flash-Decoding) is
# what [chapter 9](09_faster_on_purpose.ipynb)'s decode kernel does. (The H200 could not reach the model hub
# and ran Qwen3-0.6B's exact architecture with seeded random weights: timings depend on shapes, not values.)
#
# ## The blog's claim (T4)
#
# The blog timed attention on its T4 at a decode shape, q `[1, 16, 1, 64]` and k, v `[1, 16, 512, 64]`: fused
# SDPA took 0.149 ms and a version built from plain PyTorch ops 0.327 ms. Its own Triton matmul, called in a
# Python loop over the batch and the 16 heads with two matmul launches per head, took 8.5 ms, which it put down
# to the loop's launches: 2.2x and 57x SDPA's time. The post does not say how it timed these calls, and gives no
# tokens/s for attention alone.
#
# ## The idea
#
# Attention is where a token looks at the other tokens. For one head, the new token brings a **query** vector
# $q$ of length $D$ (the head dimension); the tokens seen so far are stored as $T$ **keys** $K$ and $T$
# **values** $V$, each $T \times D$ (the KV cache). Then:
#
# 1. **scores**: $s = q K^\top$, one number per earlier token: how well it matches the query;
# 2. **scaling**: $s \leftarrow s / \sqrt{D}$, which keeps softmax out of saturation;
# 3. **causal mask**: a token only looks backwards, so scores of later positions become $-\infty$;
# 4. **softmax**: $p = \mathrm{softmax}(s)$, weights that add up to 1;
# 5. **weighted sum**: $o = p V$, a mix of the values, one vector of length $D$.
#
# At decode the new token is the last one, so the mask hides nothing; at prefill ($S = T$ queries) query $i$
# sees keys $0 \ldots i$.
#
# **Grouped-query attention (GQA).** Qwen3-0.6B has 16 query heads but 8 key/value heads, of dimension 128:
# query head $h$ reads KV head $h \,/\!/\, 2$, which halves the KV cache and the bytes read per step. The blog's
# shape has 16 KV heads of dimension 64 and no sharing: on a GPU it reads as many bytes as Qwen3's shape and
# does half the arithmetic.
#
# **Count the bytes.** At decode each KV head's keys and values are read once, $2 T D$ numbers, for $4 T D$
# floating-point operations per query head: two to four per number read, far less than a GPU can do while it
# reads a number. The table has both, and the time the bytes take at each GPU's nominal bandwidth: a few
# microseconds on a T4, under half a microsecond on an H200. (CPU mode shrinks both shapes.)
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
import torch.nn.functional as F
from IPython.display import display

import helpers
import slower_kernels

helpers.show_env()
SIZES = helpers.SIZES
SHAPES = {"blog": SIZES.attention_blog_shape, "qwen": SIZES.attention_qwen_shape}
E = torch.empty((), dtype=helpers.DTYPE).element_size()  # bytes per element
KV_BYTES = {n: 2 * s["B"] * s["Hkv"] * s["T"] * s["D"] * E for n, s in SHAPES.items()}  # K and V, each read once
helpers.show(pd.DataFrame([{
    "shape": n, "q [B, Hq, S, D]": str([s["B"], s["Hq"], s["S"], s["D"]]),
    "k, v [B, Hkv, T, D]": str([s["B"], s["Hkv"], s["T"], s["D"]]), "K+V MiB": KV_BYTES[n] / 2**20,
    "MFLOP": 4 * s["B"] * s["Hq"] * s["S"] * s["T"] * s["D"] / 1e6,  # q K^T and p V: 2 flops per multiply-add
    "read time at T4 nominal, µs": KV_BYTES[n] / (helpers.NOMINAL_GB_S["t4"] * 1e3),
    "read time at H200 nominal, µs": KV_BYTES[n] / (helpers.NOMINAL_GB_S["h200"] * 1e3)}
    for n, s in SHAPES.items()]).set_index("shape"))

# %% [markdown]
# ## Three versions of the same computation
#
# **1. PyTorch's SDPA.** `torch.nn.functional.scaled_dot_product_attention` is one fused kernel: scores,
# softmax and the weighted sum happen on-chip, in registers and shared memory
# ([chapter 1](01_setup.ipynb#The-GPU-you-are-on)), and the scores never go to memory. With `enable_gqa=True`
# it handles the shared KV heads itself. One trap: SDPA's `is_causal` aligns the mask to the *top-left*
# corner, which is wrong for a decode step (one query, many keys): the query would see only the first key. At
# decode no mask is needed at all, so the wrapper passes `is_causal` only when there are as many queries as
# keys.

# %%
def attention_sdpa(q, k, v, scale, causal):
    """PyTorch's fused attention. q [B, Hq, S, D], k/v [B, Hkv, T, D] -> [B, Hq, S, D]."""
    S, T = q.shape[2], k.shape[2]
    if causal and S not in (1, T):
        raise ValueError("this wrapper handles decode (S == 1) or a full prefill (S == T)")
    return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal and S > 1,
                                          enable_gqa=q.shape[1] != k.shape[1])


# %% [markdown]
# **2. PyTorch ops** (`slower_kernels.attention_torch_ops`): the five steps as transformers' eager attention
# writes them, after copying the shared KV heads out to one per query head: every step its own kernel, the
# scores passing through memory between them.
#
# **3. The slow path** (`slower_kernels.attention_slow`): a Python loop over batch items and query heads that
# calls our Triton `matmul` for the scores, applies the mask with PyTorch, calls our Triton `softmax` (which
# also scales) and `matmul` again for the weighted sum: three of our kernels per head, each with a sliver of
# work.

# %%
display({"text/plain": inspect.getsource(slower_kernels.attention_slow)}, raw=True)

# %% [markdown]
# Count its launches before running it. Per query head: three of ours (two matmuls and the softmax) and two
# PyTorch kernels for the mask (`~keep[b, h]` inverts it, `masked_fill` applies it: at decode it hides nothing,
# but the loop applies it anyway). Before the loop, `torch.ones` and `tril` build the mask: two more. For 16
# heads that is $16 \times 3 = 48$ launches of ours and $16 \times 2 + 2 = 34$ of PyTorch's: **82 kernels per
# call**, where SDPA launches one. The blog's loop made two launches per head; ours makes three,
# because the softmax is a kernel of its own:

# %%
display({"text/plain": inspect.getsource(inspect.getmodule(slower_kernels.softmax).softmax_kernel.fn)}, raw=True)

# %% [markdown]
# One program per row: it loads the row, subtracts its maximum (so `exp` cannot overflow), exponentiates,
# sums and divides, all in fp32, and writes the row back in the input's dtype. At decode a head has one row
# of $T$ scores, so each softmax launch runs a single program on one of the GPU's SMs.
#
# ## Do all three agree?
#
# Correctness first, on fresh random data. The reference is the same five steps in float64. We check the
# blog's decode shape, Qwen3's decode shape (where GQA matters), and a prefill-shaped case with as many queries
# as keys, where the causal mask does real work.

# %%
def attention_reference(q, k, v, scale, causal):
    """The five steps in float64; k/v expanded for GQA. Returns [B, Hq, S, D] in float64."""
    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, Hq, T, D)
    scores = q @ k.transpose(-1, -2) * scale  # (B, Hq, S, T)
    if causal:
        S, T = scores.shape[-2:]
        i = torch.arange(S, device=q.device)[:, None]
        j = torch.arange(T, device=q.device)[None, :]
        scores = scores.masked_fill(j > i + T - S, float("-inf"))  # query i sees keys j <= i + T - S
    return scores.softmax(dim=-1) @ v


def make_qkv(B, Hq, Hkv, S, T, D, seed):
    """Fresh random q [B, Hq, S, D] and k, v [B, Hkv, T, D]."""
    g = torch.Generator(device=helpers.DEVICE).manual_seed(seed)
    return tuple(torch.randn(*shape, generator=g, device=helpers.DEVICE, dtype=helpers.DTYPE)
                 for shape in ((B, Hq, S, D), (B, Hkv, T, D), (B, Hkv, T, D)))


VERSIONS = {"sdpa": attention_sdpa, "torch_ops": slower_kernels.attention_torch_ops,
            "slow": slower_kernels.attention_slow}
NAMES = {"sdpa": "SDPA", "torch_ops": "PyTorch ops", "slow": "per-head loop"}
TOLERANCE = helpers.tolerance("attention")  # max abs error against float64
cases = {"blog decode": SHAPES["blog"], "qwen decode": SHAPES["qwen"],
         "blog prefill (causal)": dict(SHAPES["blog"], S=SIZES.prompt_len, T=SIZES.prompt_len)}
errors = pd.DataFrame(index=list(cases), columns=[NAMES[v] for v in VERSIONS], dtype=float)
for seed, (case, shape) in enumerate(cases.items()):
    q, k, v = make_qkv(**shape, seed=seed)
    scale = 1 / math.sqrt(shape["D"])
    ref = attention_reference(q, k, v, scale, causal=True)
    for name, fn in VERSIONS.items():
        out = fn(q, k, v, scale, True)
        assert out.shape == ref.shape, f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        errors.loc[case, NAMES[name]] = (out.double() - ref).abs().max().item()
helpers.show(errors.assign(tolerance=TOLERANCE, check=(errors.max(axis=1) < TOLERANCE).map({True: "PASS", False: "FAIL"})))
assert (errors.to_numpy() < TOLERANCE).all(), "an attention version disagrees with the float64 reference"
helpers.record("attention.max_err", errors.loc["blog decode", NAMES["slow"]], "abs",
               "slow per-head path vs a float64 reference, blog's decode shape")

# %% [markdown]
# All three agree with the float64 reference well inside the tolerance, at decode and at prefill, with and
# without shared KV heads: they differ only in the order of their additions.
#
# ## How fast is each one? Predict first
#
# Two clocks answer two questions ([how we measure](01_setup.ipynb#How-we-measure)). **GPU time**
# (`helpers.compare_calls`, CUDA-graph replay) is how long the GPU works on one call; the versions run in
# shuffled rounds against SDPA, and SDPA against itself gives the A/A floor. **Host time per call**
# (`helpers.host_ms_per_call`, one reading) is how long a caller waits per call, launching included. Launches
# are counted from a CUDA graph of one call (`helpers.launches_per_call`). All three are called as the model
# calls them at decode: `causal=True`, no mask. CPU mode has one clock, the interpreter's, and counts only our
# launches.
#
# What to expect:
#
# - **SDPA**: one kernel reading K and V once, so a few microseconds of GPU time: near the larger of the read
#   time above and a kernel's floor of start-up and drain, about a microsecond (chapter 2).
# - **PyTorch ops**: about ten kernels, with the scores and the expanded K and V written and read again: 2x to
#   10x SDPA's GPU time, and more host time, since each kernel is a launch.
# - **The per-head loop**: 82 kernels with almost nothing to do. On the GPU, tens of times SDPA's time and still
#   well under a millisecond; on the host, 82 launches at tens of microseconds each (our launchers run Python
#   before every launch): milliseconds, ten times its GPU time or more. Then its gap to SDPA follows its
#   launches, not its bytes.

# %%
HOST = "host ms per call" if helpers.HAS_GPU else "interpreter ms per call"  # CPU mode has one clock
CLOCK = "GPU time" if helpers.HAS_GPU else "interpreter time"  # the clock of the rounds
rounds, rows = {}, []
for shape_name, shape in SHAPES.items():
    q, k, v = make_qkv(**shape, seed=100)
    scale = 1 / math.sqrt(shape["D"])
    calls = {name: (lambda fn=fn, q=q, k=k, v=v, scale=scale: fn(q, k, v, scale, True))  # as the model calls it
             for name, fn in VERSIONS.items()}
    rounds[shape_name] = cc = helpers.compare_calls({n: calls[n] for n in ("torch_ops", "slow")}, calls["sdpa"])
    for name, call in calls.items():
        with slower_kernels.count_launches() as ours:  # which of the call's launches are our Triton kernels
            call()
        median = cc.ms[helpers.REFERENCE if name == "sdpa" else name]
        rows.append({"shape": shape_name, "version": name,
                     "GPU ms per call": median if helpers.HAS_GPU else float("nan"),
                     HOST: helpers.host_ms_per_call(call) if helpers.HAS_GPU else median,  # CPU: the rounds' clock
                     "launches per call": helpers.launches_per_call(call), "our launches": sum(ours.values())})
timing = pd.DataFrame(rows).set_index(["shape", "version"])
timing["GPU / host time"] = timing["GPU ms per call"] / timing[HOST]
helpers.show(timing)
for shape_name, cc in rounds.items():
    for name in ("torch_ops", "slow"):
        print(helpers.verdict_line(f"{shape_name} shape, {NAMES[name]} / SDPA, {CLOCK}", cc.ratios[name], cc.floor))

LAUNCH_NOTE = "every CUDA kernel per {} ({})" if helpers.HAS_GPU else "CPU mode: our Triton kernels per {} only"
LABELS = {"sdpa": "F.scaled_dot_product_attention", "torch_ops": "PyTorch ops", "slow": "per-head loop, our kernels"}
for prefix, shape_name in (("", "blog"), ("qwen_", "qwen")):
    s, cc = SHAPES[shape_name], rounds[shape_name]
    where = f"q [{s['B']},{s['Hq']},{s['S']},{s['D']}], k/v [{s['B']},{s['Hkv']},{s['T']},{s['D']}], causal"
    for version, label in LABELS.items():
        helpers.record(f"attention.{prefix}{version}_ms", cc.ms[helpers.REFERENCE if version == "sdpa" else version],
                       "ms", f"{label}, {where}; {cc.clock}, median of {cc.rounds} shuffled rounds against SDPA")
    helpers.record(f"attention.{prefix}slow_launches", timing.loc[(shape_name, "slow"), "launches per call"],
                   "launches", LAUNCH_NOTE.format("call", "a CUDA graph of one call"))
for version in ("sdpa", "slow"):
    helpers.record(f"attention.host_{version}_ms", timing.loc[("blog", version), HOST], "ms",
                   f"{LABELS[version]}, blog's shape; {helpers.CLOCK_LABELS['host' if helpers.HAS_GPU else 'interpreter']}")

# %% [markdown]
# ### What the timings show
#
# Read the `launches per call` column first: 1 for SDPA, about ten for the PyTorch ops, 82 for the loop (48 of
# them ours), as counted by hand above.
#
# **GPU clock.** On the committed H200 run, at the blog's shape, the PyTorch ops took 3.55x SDPA's GPU time
# and the per-head loop 38x; at Qwen3's shape the loop took 32x (quartiles 31.7-31.8), with twice the
# arithmetic and the same 82 launches. Both held their expectations: a loop of tiny kernels costs even the GPU
# tens of times more than one fused kernel, since every kernel has its own start-up and drain besides its sliver
# of work, and 82 of them at about 3 µs each make up the loop's GPU time. SDPA missed its own expectation, at
# several times a kernel's floor; the look inside below comes back to that.
#
# **Host clock.** On the committed H200 run, at the blog's shape, one call cost the host 0.01649 ms for SDPA,
# 0.1582 ms for the PyTorch ops and 2.676 ms for the loop. The loop's `GPU / host time` is under 0.1: for more than
# nine tenths of each call the GPU waited for the host to issue the next kernel.
#
# **Beside the blog.** The blog's T4 ratios, 2.2x and 57x, match neither of our clocks factor for factor (the
# blog does not name its clock, and a T4 runs each kernel several times longer than an H200), but they agree on
# what matters: the loop is tens of times slower than the fused kernel that does the same work.
#
# Your ids beside the committed H200 run and the blog's T4 (`attention.*_ms`: GPU time, interpreter time in CPU
# mode; `attention.host_*_ms`: host time per call):

# %%
helpers.show(helpers.compare(["attention.sdpa_ms", "attention.torch_ops_ms", "attention.slow_ms",
                              "attention.host_sdpa_ms", "attention.host_slow_ms", "attention.slow_launches",
                              "attention.qwen_sdpa_ms", "attention.qwen_torch_ops_ms", "attention.qwen_slow_ms",
                              "attention.qwen_slow_launches"]).drop(columns="label"))

# %% [markdown]
# ## Launches or arithmetic?
#
# Two explanations compete for the loop's extra time. **Arithmetic and bytes**: our kernels could be worse at
# the work (smaller tiles, no fusion, the scores written to memory and read back); then the GPU would be busy
# for most of the extra host time. **Launches**: each launch costs the host a roughly fixed slice of time
# (Python, PyTorch's dispatcher, Triton's launcher, the driver) while the kernel finishes in microseconds; then
# most of the extra host time would have no GPU work under it. The test splits the loop's extra host time over
# SDPA into the extra GPU time and the rest, and divides the rest by the extra launches.

# %%
split = pd.DataFrame([{
    "shape": n, f"extra {HOST}": timing.loc[(n, "slow"), HOST] - timing.loc[(n, "sdpa"), HOST],
    "extra GPU ms per call": timing.loc[(n, "slow"), "GPU ms per call"] - timing.loc[(n, "sdpa"), "GPU ms per call"],
    "extra launches": timing.loc[(n, "slow"), "launches per call"] - timing.loc[(n, "sdpa"), "launches per call"]}
    for n in SHAPES]).set_index("shape")
split["GPU share of the extra time, %"] = 100 * split["extra GPU ms per call"] / split[f"extra {HOST}"]
gpu_part = split["extra GPU ms per call"].fillna(0)  # CPU mode: no GPU clock, the whole gap is the interpreter's
split["µs per extra launch, GPU work taken out"] = 1e3 * (split[f"extra {HOST}"] - gpu_part) / split["extra launches"]
helpers.show(split)
if helpers.HAS_GPU:
    print("launches, not arithmetic:", "as on the committed H200 run" if split.loc["blog", "GPU share of the extra time, %"]
          < 50 else "no; unlike the committed H200 run (see Launches or arithmetic?)")

fig, axes = plt.subplots(1, len(SHAPES), figsize=(11, 4.5), sharey=True)
for ax, (shape_name, s) in zip(axes, SHAPES.items()):
    sub = timing.loc[shape_name]
    ax.scatter(sub["launches per call"], sub[HOST], s=60, color="tab:blue", zorder=3, label=HOST)
    if helpers.HAS_GPU:
        ax.scatter(sub["launches per call"], sub["GPU ms per call"], s=60, facecolors="none", edgecolors="black",
                   zorder=3, label="GPU ms per call (CUDA-graph replay)")
        ax.vlines(sub["launches per call"], sub["GPU ms per call"], sub[HOST], color="gray", lw=0.8, ls=":")
    for version, row in sub.iterrows():
        ax.annotate(NAMES[version], (row["launches per call"], row[HOST]), textcoords="offset points",
                    xytext=(6, 6), fontsize=9)
    if helpers.HAS_GPU:
        ax.set_xscale("log")
        ax.set_xlim(0.6, 4 * sub["launches per call"].max())
    else:  # CPU mode counts only our launches: SDPA's and the ops' are 0, which a symlog axis keeps
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(-0.5, 4 * sub["launches per call"].max())
    ax.set_yscale("log")
    helpers.plain_log_ticks(ax, axis="both" if helpers.HAS_GPU else "y")
    ax.set_xlabel("kernel launches per call" + ("" if helpers.HAS_GPU else " (ours only, CPU mode)"))
    ax.set_title(f"{shape_name} shape: q [{s['B']}, {s['Hq']}, {s['S']}, {s['D']}], "
                 f"k/v [{s['B']}, {s['Hkv']}, {s['T']}, {s['D']}]", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
bottom, top = axes[0].get_ylim()  # shared y: headroom above the highest label
axes[0].set_ylim(bottom, top * (top / bottom) ** 0.3)
axes[0].set_ylabel("ms per call")
axes[0].legend(fontsize=8, loc="upper left")
fig.suptitle("Does attention's time follow its launch count?")
fig.tight_layout()
helpers.save_figure(fig, "attention_launches")
plt.show()

# %% [markdown]
# On the committed H200 run, at the blog's shape, the loop's host time per call was 2.660 ms above SDPA's, for
# 81 more launches, and its GPU time only 0.2208 ms above SDPA's: 8.3% of the gap. The rest comes to 30.1 µs
# of host time per extra launch on the committed H200 run. **Launches, not arithmetic, make the loop slow.**
# Qwen3's shape tells the same story. In the figure, both clocks climb with the launch count, and the dotted gap
# between GPU time (open circles) and host time (filled) widens with it.
#
# That price, an average over ours and PyTorch's, is nearly twice chapter 2's empty Triton launch (about 16 µs):
# each real launch also runs its launcher's Python (checking inputs, allocating the output, computing the
# grid), and each head slices `q`, `k` and `v` and goes once round the loop. The empty launch is the floor; the
# work around it comes on top.

# %% [markdown]
# ## A look inside: why SDPA reaches only a few percent of the bandwidth
#
# SDPA's bytes take under half a microsecond at an H200's nominal bandwidth, and a kernel's floor is about a
# microsecond, yet it took several. Divide the bytes it must read by its GPU time:

# %%
NOMINAL = helpers.NOMINAL_GB_S.get(helpers.SLUG, float("nan")) if helpers.HAS_GPU else float("nan")  # GB/s
sdpa_us = {n: 1e3 * timing.loc[(n, "sdpa"), "GPU ms per call"] for n in SHAPES}
look = pd.DataFrame([{"shape": n, "K+V MiB": KV_BYTES[n] / 2**20, "SDPA GPU µs": sdpa_us[n],
                      "GB/s": KV_BYTES[n] / sdpa_us[n] / 1e3, "% of nominal": 100 * KV_BYTES[n] / sdpa_us[n] / 1e3 / NOMINAL,
                      "query rows (B x Hq x S)": s["B"] * s["Hq"] * s["S"],
                      "SMs on this GPU": helpers.gpu_specs().get("SMs", float("nan"))}
                     for n, s in SHAPES.items()]).set_index("shape")
helpers.show(look)

# %% [markdown]
# On the committed H200 run SDPA read its 2 MiB in 7.46 µs of GPU time at Qwen3's shape, 281 GB/s, and at the
# blog's shape in 5.96 µs, 352 GB/s: 5.9% and 7.3% of the nominal 4,800 GB/s. The memory is not
# what limits it; how little work one query gives it to hand out is.
#
# A FlashAttention-style kernel gives each program a block of query rows of one head, and the program walks
# all of that head's keys and values block after block, keeping a running maximum and sum for the softmax. A
# long prefill has many query rows per head and plenty of programs. At decode there is **one query row
# per head**: 16 rows, so about 16 programs (8, where the kernel packs the two query heads sharing a KV head into
# one block) for the H200's 132 SMs, and more than 100 SMs idle. Each busy program streams its head's 128 to 256
# KiB through dependent steps (load a block, wait several hundred nanoseconds for memory, compute, load the
# next), so a few SMs with few bytes in flight get nowhere near the bandwidth all 132 could pull. (The replayed
# call may even find its 2 MiB in the L2 cache, which only strengthens the point.) Which of PyTorch's attention
# backends ran here the chapter does not show; its single launch per call says it did not split each head's
# keys with a second pass to combine the pieces.
#
# That split is the fix, **Flash-Decoding**: cut each head's keys into chunks and give every (head, chunk) pair
# its own program, 16 heads x 8 chunks = 128 programs, enough to keep most SMs busy. Each computes a partial
# softmax and weighted sum over its chunk, with its own maximum and sum, and a small second launch combines them.
# [Chapter 9](09_faster_on_purpose.ipynb) writes that split-KV decode kernel (`slower_kernels/fast_attention.py`)
# and measures what leaving the keys unsplit costs. For now SDPA's 7.5 µs is one launch against the loop's 2,900
# µs of host time per call: at batch size 1 the launches set the pace, as the model now shows.

# %% [markdown]
# ## All 28 attention modules on the slow path
#
# Now the real model. `helpers.patched(model, attention="slow")` registers the loop with transformers'
# `AttentionInterface` and switches every attention module to it; the projections and the rest of the layer
# stay. During an unpadded prefill transformers passes no mask (SDPA applies causality itself), so the loop must
# apply the causal mask on its own: a forward pass over the prompt with and without the patch checks that, since
# a forgotten mask would let every prompt token see the future and change the logits a lot.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, model.config.vocab_size)
with torch.no_grad():
    logits_original = model(prompt).logits.float()
    with helpers.patched(model, attention="slow") as counts:
        logits_custom = model(prompt).logits.float()
n_attention = counts["attention"]
rel = (logits_custom - logits_original).abs().max().item() / logits_original.abs().max().item()
top1 = (logits_custom.argmax(-1) == logits_original.argmax(-1)).float().mean().item()
ok = n_attention == census["attention"] and rel < helpers.tolerance("model")
helpers.show(pd.DataFrame([{"attention modules switched": n_attention, "in the model": census["attention"],
                            "max logit difference / largest logit": rel, "tolerance": helpers.tolerance("model"),
                            "same top-1 token, % of positions": 100 * top1, "check": "PASS" if ok else "FAIL"}]))
assert ok, f"slow attention changed the prompt logits by {rel:.1e} of their scale"
helpers.record("attention.modules_replaced", n_attention, "modules", "attention modules on the slow path")

# %% [markdown]
# ### Predict, then measure
#
# Each decoded token runs every attention module once, at Qwen3's decode shape. So the launches per token should
# grow by the loop's launches minus SDPA's, once per module; with the original's 1,655 from the committed H200
# run (the profile below measures yours):
#
# $$\text{launches per token} = 1{,}655 + 28 \times (82 - 1) = 3{,}923, \text{ of them ours } 28 \times 16 \times 3 = 1{,}344$$
#
# At batch size 1 the host paces a decode step, issuing kernels one after another, so the wall time per token
# should follow a **launch budget** (chapter 8 applies it to the whole series):
#
# $$\text{wall ms per decoded token} \approx n_\text{PyTorch} \cdot p_\text{PyTorch} + n_\text{ours} \cdot p_\text{ours} + \text{GPU-busy ms}$$
#
# Every term is measured; nothing is fitted to the model's time.
#
# - $p_\text{PyTorch}$ is the host's price of one PyTorch launch inside `generate()`. It comes from the original
#   in the same comparison: its wall ms per token, less its GPU-busy ms, over its launches.
# - $p_\text{ours}$ is the host's price of one launch of ours. It comes from the loop timed alone at Qwen3's
#   shape: its host time per call, less its 34 PyTorch launches at $p_\text{PyTorch}$, over its 48 of ours.
# - The counts $n$ and the GPU-busy ms come from the patched model's profile.
#
# Roughly, 28 loop calls at about 2.9 ms of host time each add about 80 ms per token to the original's 21 or
# so. So expect generation several times slower. The profile after the measurement prints both prices and
# sets the budget's prediction beside the measured time.
#
# `helpers.compare_configs` measures it: the original, the original again (the A/A floor) and the patched model
# generate in shuffled rounds, each generation followed by a one-token one so that the same rounds give the
# wall ms per decoded token (prefill excluded); `torch.profiler` then counts launches and GPU-busy ms per token.
# At full size this takes about a minute.

# %%
SLOW = "per-head attention"
comparison = helpers.compare_configs(model, {SLOW: dict(attention="slow")}, tokenizer=tokenizer)
profiles = helpers.profile_configs(comparison, model)  # after the timed rounds
helpers.show(comparison.table())
how = f"prompt {comparison.prompt_len}, {comparison.new_tokens} new tokens"
slowdown = comparison.record(SLOW, "attention.slowdown", f"{n_attention} attention modules on the per-head loop; {how}")
print(helpers.verdict_line(f"{SLOW} / original, time per generation", comparison.ratios[SLOW], comparison.floor))
tps_note = f"median of {len(comparison.orders)} shuffled rounds; new tokens / generation time, prefill included; {how}"
helpers.record("attention.tps_original", comparison.tokens_per_s[helpers.ORIGINAL], "tokens/s", tps_note)
helpers.record("attention.tps_custom", comparison.tokens_per_s[SLOW], "tokens/s",
               f"{n_attention} attention modules on the slow path; {tps_note}")

# %%
before, after = profiles[helpers.ORIGINAL], profiles[SLOW]
helpers.record("attention.launches_per_token_custom", after.launches, "launches",
               LAUNCH_NOTE.format("decoded token", "torch.profiler"))
qwen_slow = timing.loc[("qwen", "slow")]
extra_per_call = qwen_slow["launches per call"] - timing.loc[("qwen", "sdpa"), "launches per call"]
predicted_launches, predicted_ms = before.launches + n_attention * extra_per_call, float("nan")
if helpers.HAS_GPU:  # the two prices of the launch budget, both measured, none fitted
    torch_us = 1e3 * (before.wall_ms_per_token - before.gpu_busy_ms_per_token) / before.launches
    ours = qwen_slow["our launches"]
    ours_us = (1e3 * qwen_slow[HOST] - (qwen_slow["launches per call"] - ours) * torch_us) / ours
    helpers.show(pd.DataFrame({"host µs": {"per PyTorch launch (the original's profile)": torch_us,
                                          "per launch of ours (the loop's host time, Qwen3 shape)": ours_us}}))
    if ours_us > 0:  # a loop whose PyTorch launches alone outweigh its host time leaves no price for ours
        budget = helpers.LaunchBudget(torch_us, ours_us, fitted_on=("original", "per-head loop, host time per call"))
        predicted_ms = budget.predict_ms(after)
profile = pd.DataFrame([{
    "model": name, "wall ms per decoded token": p.wall_ms_per_token, "launches per token": p.launches,
    "our launches per token": p.project_launches_per_token,
    "GPU-busy ms per token": p.gpu_busy_ms_per_token if helpers.HAS_GPU else float("nan"),
    "predicted launches per token": predicted_launches if p is after else float("nan"),
    "predicted wall ms per decoded token": predicted_ms if p is after else float("nan")}
    for name, p in ((helpers.ORIGINAL, before), (SLOW, after))]).set_index("model")
profile["error %"] = 100 * (profile["predicted wall ms per decoded token"] / profile["wall ms per decoded token"] - 1)
helpers.show(profile)
if not math.isnan(predicted_ms):
    print("launch budget within 20% of the measurement:", "yes, as on the committed H200 run"
          if abs(profile.loc[SLOW, "error %"]) <= 100 * helpers.PREDICTION_BAR else "no; unlike the committed H200 run")

# %% [markdown]
# ### What the model shows
#
# On the committed H200 run the patched model's generations took 4.33x the original's time, round by round
# (quartiles 4.23-4.43, A/A floor 0.995): 10.70 tokens/s against the original's 46.78, prefill included.
#
# The profile says why. On the committed H200 run the wall time per decoded token went from 20.97 to 91.21 ms
# while the GPU's busy time went only from 3.392 to 6.542 ms: the GPU worked for about a fourteenth of the
# patched model's token and waited for the host the rest of the time. The launches per token went from 1,655 to
# 3,923, the count predicted by hand, 1,344 of them ours.
#
# On the committed H200 run the launch budget priced a PyTorch launch at 10.6 µs and a launch of ours at 52.4
# µs, and predicted 104.3 ms per decoded token, +14.4% off the 91.21 ms measured: within the series' 20%, but
# not by much. The price of ours rests on one host reading of the loop, and such readings move: the measured
# wall time leaves about 43 µs per launch of ours, not 52. On an earlier H200 run of this chapter that reading was
# 4.56 ms per call instead of about 2.9, and the budget over-predicted by 22%: the form held, the price moved.
#
# [Chapter 6](06_full_stack.ipynb) switches on every custom kernel at once and sets the total beside the blog's.
#
# ## Try it yourself
#
# Each exercise changes one thing in the loop's input at Qwen3's decode shape and times the loop against itself
# unchanged, in shuffled rounds with an A/A floor (`helpers.compare_calls`: GPU time, so the host's launching is
# out of the clock; interpreter time in CPU mode). Write your guess in `answer` (`"faster"`, `"slower"` or
# `"same"`, meaning within noise) before you run the cell; `helpers.check_answer` says whether the measurement
# agrees. Each cell takes a few seconds.

# %%
QWEN = SHAPES["qwen"]


def slow_call(**change):
    """The per-head loop at Qwen3's decode shape, with ``change`` overriding sizes of the shape, on fresh data."""
    shape = {**QWEN, **change}
    q, k, v = make_qkv(**shape, seed=7)
    scale = 1 / math.sqrt(shape["D"])
    return lambda: slower_kernels.attention_slow(q, k, v, scale, True)


# %% [markdown]
# **1. Half the heads.** Loop over half as many query heads (and half the KV heads, so that two query heads
# still share one). Every kernel keeps its work; only their number halves. What happens to the GPU time?
#
# *What to expect, and why:* faster, about twice as fast. With every kernel near its floor, the GPU time
# follows the kernel count. That holds on a T4 as on an H200: on either, one head's kernels are far from
# filling the GPU.

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
half = {"Hq": QWEN["Hq"] // 2, "Hkv": QWEN["Hkv"] // 2}
cmp = helpers.compare_calls({"half the heads": slow_call(**half)}, reference=slow_call())
measured = helpers.check_answer(answer, cmp.ratios["half the heads"], cmp.floor,
                                change=f"query heads {QWEN['Hq']} -> {half['Hq']}", clock=cmp.clock)

# %% [markdown]
# **2. A four times longer context.** Keep the heads and give each one four times as many cached keys and
# values. The launches stay; each kernel reads four times the bytes and does four times the arithmetic. Is a
# kernel this small paced by its bytes yet?
#
# *What to expect, and why:* slower, by more than 1x and less than 4x. Not because of the bytes: one head's keys
# are a few hundred KiB even then, a fraction of a microsecond at an H200's bandwidth (on a T4 they start to
# count). What grows is work done in sequence: the second matmul ($p V$) walks the keys 32 at a time in one
# program per 64 output columns, and the softmax's single program holds a row four times as long. The scores
# matmul spreads its work over four times the programs on idle SMs, and every kernel keeps its fixed floor.
# It is SDPA's lesson again: few programs, each walking its keys in sequence.

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({"4x the context": slow_call(T=4 * QWEN["T"])}, reference=slow_call())
measured = helpers.check_answer(answer, cmp.ratios["4x the context"], cmp.floor,
                                change=f"cached keys {QWEN['T']} -> {4 * QWEN['T']}", clock=cmp.clock)

# %% [markdown]
# **3. Without measuring: loop over KV heads.** Rewrite the loop (on paper) to go over the 8 KV heads, giving
# both query heads of a group to one matmul as two rows of scores. Count its launches per call at Qwen3's shape,
# then per decoded token in the model, then predict the wall ms per decoded token with the two launch prices of
# the budget table. How much of the slowdown would it win back? (Hint: 82 launches per call become 42.)
#
# ## Takeaway
#
# - Implementations that agree to within rounding can differ forty-fold in time; splitting the extra host time
#   into GPU work and the rest tells launches from arithmetic, and here the GPU work was about 8% of it.
# - A Python loop over heads multiplies the launches by the heads, and the model by its 28 layers: 2,268 more
#   launches per token made generation about 4x slower while the GPU sat mostly idle.
# - Even one fused kernel leaves most of a big GPU idle at decode, with one query row per head; splitting the
#   keys across programs (Flash-Decoding, chapter 9) is how to fill it.
#
# Next, [chapter 6](06_full_stack.ipynb) switches everything on at once: RMSNorm, every projection and
# attention.
