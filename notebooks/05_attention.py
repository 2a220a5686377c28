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
# - what attention computes for one new token: scores, scaling, the causal mask, softmax and a
#   weighted sum of values;
# - how grouped-query attention lets Qwen3's 16 query heads share 8 key/value heads;
# - three ways to compute the same attention: PyTorch's fused SDPA, a handful of plain PyTorch ops, and
#   a Python loop over heads that calls our Triton matmul and softmax kernels;
# - how to check that all three agree, and how to time them;
# - how to test whether a slow function is slow because of its arithmetic or because of its launches;
# - what happens to tokens/s when all attention modules of Qwen3-0.6B take the slow path.

# %% [markdown]
# ## The idea
#
# Attention is the one place in a transformer where a token looks at the other tokens. For a single
# head, the new token brings a **query** vector $q$ of length $D$ (the head dimension). The tokens seen so
# far are stored as $T$ **keys** $K$ and $T$ **values** $V$, each $T \times D$. Then:
#
# 1. **scores**: $s = q K^\top$, one number per earlier token, saying how well it matches the query;
# 2. **scaling**: $s \leftarrow s / \sqrt{D}$, which keeps the scores in a range where softmax is not
#    saturated;
# 3. **causal mask**: a token may only look backwards, so scores of later positions become $-\infty$;
# 4. **softmax**: $p = \mathrm{softmax}(s)$, turning scores into weights that add up to 1;
# 5. **weighted sum**: $o = p V$, a mix of the values, one vector of length $D$.
#
# During decoding the new token is the last one, so the causal mask hides nothing: it sees every key.
# During the prefill (the whole prompt at once, $S = T$ queries) query $i$ sees keys $0 \ldots i$.
#
# **Grouped-query attention (GQA).** Qwen3-0.6B has 16 query heads but only 8 key/value heads, each of
# head dimension 128. Query heads $0, 1$ both read KV head 0, heads $2, 3$ read KV head 1, and so on:
# query head $h$ uses KV head $h \,/\!/\, 2$. That halves the KV cache (and the bytes read per step)
# while keeping 16 different attention patterns, one per query head. The blog's benchmark shape has 16 KV heads of dimension 64 (no sharing).
#
# **Count the bytes.** At decode time each KV head's keys and values are read once: $2 \cdot T \cdot D$
# numbers. The arithmetic is $4 \cdot T \cdot D$ floating-point operations per query head: one or two
# operations per number read, far less than a GPU can do in the time it takes to read a number. The cell
# below computes both for the two shapes this chapter uses.

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
import math
import sys

import matplotlib.pyplot as plt
import pandas as pd
import torch
import torch.nn.functional as F

import helpers
import kernels

helpers.show_env()

SIZES = helpers.SIZES
SHAPES = {"blog": SIZES.attention_blog_shape, "qwen": SIZES.attention_qwen_shape}
element_bytes = torch.empty((), dtype=helpers.DTYPE).element_size()

rows = []
for name, s in SHAPES.items():
    kv_bytes = 2 * s["B"] * s["Hkv"] * s["T"] * s["D"] * element_bytes  # K and V, read once
    flops = 4 * s["B"] * s["Hq"] * s["S"] * s["T"] * s["D"]  # q K^T and p V, 2 flops per multiply-add
    rows.append({"shape": name, "q": f"[{s['B']}, {s['Hq']}, {s['S']}, {s['D']}]",
                 "k, v": f"[{s['B']}, {s['Hkv']}, {s['T']}, {s['D']}]",
                 "K+V bytes": f"{kv_bytes / 2**20:.3f} MiB", "flops": f"{flops / 1e6:.2f} M",
                 # the time to read K and V once at each GPU's nominal memory bandwidth
                 "read time, T4 (µs)": kv_bytes / (helpers.NOMINAL_GB_S["t4"] * 1e3),
                 "read time, H200 (µs)": kv_bytes / (helpers.NOMINAL_GB_S["h200"] * 1e3)})
helpers.show(pd.DataFrame(rows))

# %% [markdown]
# The last two columns are the time the bytes take at full memory speed: microseconds. Keep that
# scale in mind when the timings come in.

# %% [markdown]
# ## Three versions of the same computation
#
# **1. PyTorch's SDPA.** `torch.nn.functional.scaled_dot_product_attention` is one fused kernel (on a
# GPU, a FlashAttention-style one when the shapes allow): scores, softmax and the weighted sum happen
# on-chip, without writing the scores to memory. With `enable_gqa=True` it handles the shared KV heads
# itself. One trap: SDPA's `is_causal` aligns the mask to the *top-left* corner, which is wrong for a
# decode step (one query, many keys): it would let the query see only the first key. At decode no mask
# is needed at all, so the wrapper below passes `is_causal` only when there are as many queries as keys.

# %%
def attention_sdpa(q, k, v, scale, causal):
    """PyTorch's fused attention. q [B, Hq, S, D], k/v [B, Hkv, T, D] -> [B, Hq, S, D]."""
    S, T = q.shape[2], k.shape[2]
    if causal and S not in (1, T):
        raise ValueError("this wrapper handles decode (S == 1) or a full prefill (S == T)")
    return F.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=causal and S > 1,
                                          enable_gqa=q.shape[1] != k.shape[1])


# %% [markdown]
# **2. PyTorch ops.** The five steps written out with PyTorch: a batched matmul for the scores, a
# multiplication for the scale, a mask, a softmax and a second batched matmul. Every step is its own
# kernel (or several), and the scores travel through memory between them. The shared KV heads are
# expanded to one copy per query head first.
#
# **3. The slow path.** A Python loop over batch items and query heads. For each head it calls our
# Triton `matmul` for the scores, applies the mask with PyTorch, calls our Triton `softmax` (which also
# applies the scale) and calls `matmul` again for the weighted sum: three of our kernels per head, each
# doing a sliver of work. Both come from `kernels/`:

# %%
print(inspect.getsource(kernels.attention_torch_ops))
print(inspect.getsource(kernels.attention_slow))

# %% [markdown]
# The softmax kernel handles one row per program: it loads the row, subtracts its maximum (so `exp`
# cannot overflow), exponentiates, sums and divides, all in fp32, and writes the row back in the
# input's dtype.

# %%
softmax_module = sys.modules[kernels.softmax.__module__]
print(inspect.getsource(softmax_module.softmax_kernel.fn))

# %% [markdown]
# ## Do all three agree?
#
# Correctness first, on fresh random data. The reference is the same five steps done in float64 with
# PyTorch. We check the blog's decode shape, Qwen3's decode shape (where GQA matters), and a
# prefill-shaped case with as many queries as keys, where the causal mask does real work.

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
    g = torch.Generator(device=helpers.DEVICE).manual_seed(seed)
    q = torch.randn(B, Hq, S, D, generator=g, device=helpers.DEVICE, dtype=helpers.DTYPE)
    k = torch.randn(B, Hkv, T, D, generator=g, device=helpers.DEVICE, dtype=helpers.DTYPE)
    v = torch.randn(B, Hkv, T, D, generator=g, device=helpers.DEVICE, dtype=helpers.DTYPE)
    return q, k, v


VERSIONS = {"sdpa": attention_sdpa, "torch_ops": kernels.attention_torch_ops, "slow": kernels.attention_slow}
TOLERANCE = helpers.tolerance("attention")  # max abs error vs float64

blog = SHAPES["blog"]
cases = {"blog decode": dict(blog), "qwen decode": dict(SHAPES["qwen"]),
         "blog prefill (causal)": dict(blog, S=SIZES.prompt_len, T=SIZES.prompt_len)}
errors, max_err = [], {}
for seed, (case, shape) in enumerate(cases.items()):
    q, k, v = make_qkv(**shape, seed=seed)
    scale = 1 / math.sqrt(shape["D"])
    ref = attention_reference(q, k, v, scale, causal=True)
    for name, fn in VERSIONS.items():
        out = fn(q, k, v, scale, True)
        assert out.shape == ref.shape, f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        err = (out.double() - ref).abs().max().item()
        errors.append({"case": case, "version": name, "max abs error": err})
        max_err[case, name] = err
helpers.show(pd.DataFrame(errors).pivot(index="case", columns="version", values="max abs error"))
worst = max(max_err.values())
ok = worst < TOLERANCE
print(f"largest error {worst:.2e} against a tolerance of {TOLERANCE:.0e} for {str(helpers.DTYPE)[6:]}:",
      "PASS" if ok else "FAIL")
assert ok, f"attention versions disagree with the float64 reference: {max_err}"
helpers.record("attention.max_err", max_err["blog decode", "slow"], "abs",
               "slow per-head path vs a float64 reference, blog's decode shape")

# %%
helpers.md(
    f"All three versions match the float64 reference to within {worst:.1e}, at decode and at prefill, with "
    f"and without shared KV heads. The slow path's error on the blog's shape is "
    f"{max_err['blog decode', 'slow']:.1e}, SDPA's {max_err['blog decode', 'sdpa']:.1e}: "
    + ("the same order, as expected from three computations that differ only in the order of their additions."
       if max_err['blog decode', 'slow'] <= 10 * max(max_err['blog decode', 'sdpa'], 1e-12) else
       "our path is less exact than SDPA here, yet well inside the tolerance.")
)

# %% [markdown]
# ## How fast is each one? Predict first
#
# - **SDPA** should be quickest: about one kernel, which reads K and V once and never writes the scores.
# - **PyTorch ops** should cost a few times more: five or more kernels, each a launch, with the scores
#   written and read again between them, plus the copies that expand the KV heads.
# - **The slow path** makes three of our launches per query head, plus the small PyTorch ops of the
#   mask and the slicing, each a launch too. With 16 heads that is dozens of launches, each costing
#   microseconds of host time, for kernels that have almost nothing to do. We expect it to be the slowest
#   by a wide margin, and we expect the gap to scale with launches rather than with bytes.
#
# `helpers.bench_ms` times each call (median of many, on a GPU with `triton.testing.do_bench`), and
# `helpers.profile_call` counts the kernels each call launches and adds up how long they ran on the GPU.

# %%
rows = []
for shape_name, shape in SHAPES.items():
    q, k, v = make_qkv(**shape, seed=100)
    scale = 1 / math.sqrt(shape["D"])
    for name, fn in VERSIONS.items():
        call = lambda fn=fn: fn(q, k, v, scale, True)  # noqa: E731
        prof = helpers.profile_call(call)
        rows.append({"shape": shape_name, "version": name, "ms": helpers.bench_ms(call),
                     "launches": prof.launches, "our launches": prof.project_launches,
                     "gpu_busy_ms": prof.gpu_busy_ms})
timing = pd.DataFrame(rows)
helpers.show(timing)


def cell(shape, version, column="ms"):
    return timing.loc[(timing["shape"] == shape) & (timing["version"] == version), column].item()


def launches(shape, version):
    """Every kernel launched (profiler) on a GPU; only our own kernels in CPU mode."""
    total = cell(shape, version, "launches")
    return cell(shape, version, "our launches") if total is None or pd.isna(total) else total


for prefix, shape in (("", "blog"), ("qwen_", "qwen")):
    s = SHAPES[shape]
    where = f"q [{s['B']},{s['Hq']},{s['S']},{s['D']}], k/v [{s['B']},{s['Hkv']},{s['T']},{s['D']}]"
    helpers.record(f"attention.{prefix}sdpa_ms", cell(shape, "sdpa"), "ms", f"F.scaled_dot_product_attention, {where}")
    helpers.record(f"attention.{prefix}torch_ops_ms", cell(shape, "torch_ops"), "ms", f"PyTorch ops, {where}")
    helpers.record(f"attention.{prefix}slow_ms", cell(shape, "slow"), "ms", f"per-head loop, our kernels, {where}")
    helpers.record(f"attention.{prefix}slow_launches", launches(shape, "slow"), "launches",
                   helpers.launch_note(per="call"))

# %%
helpers.show(helpers.compare(["attention.sdpa_ms", "attention.torch_ops_ms", "attention.slow_ms",
                              "attention.slow_launches", "attention.qwen_sdpa_ms",
                              "attention.qwen_torch_ops_ms", "attention.qwen_slow_ms",
                              "attention.qwen_slow_launches"]))

# %%
def versus(a, b):
    """'3.2x slower than' or '1.4x faster than', computed from two times."""
    return helpers.versus(a, b) + " than"


blog_ms = {r.id: float(r.blog_value) for r in helpers.blog_numbers().itertuples()
           if r.id.startswith("attention.") and r.blog_value}
helpers.md(
    f"On the blog's shape the PyTorch-ops version ran **{versus(cell('blog', 'torch_ops'), cell('blog', 'sdpa'))}** "
    f"SDPA ({cell('blog', 'torch_ops'):.3f} against {cell('blog', 'sdpa'):.3f} ms), and the slow path "
    f"**{versus(cell('blog', 'slow'), cell('blog', 'sdpa'))}** SDPA ({cell('blog', 'slow'):.3f} ms, "
    f"{launches('blog', 'slow'):.0f} launches). On Qwen3's own shape the slow path was "
    f"{versus(cell('qwen', 'slow'), cell('qwen', 'sdpa'))} SDPA. "
    f"The blog's T4 numbers give ratios of {blog_ms['attention.torch_ops_ms'] / blog_ms['attention.sdpa_ms']:.1f}x "
    f"and {blog_ms['attention.slow_ms'] / blog_ms['attention.sdpa_ms']:.0f}x for the same two comparisons; "
    "its loop made two matmul launches per head, ours three (the softmax is a kernel of its own)."
)

# %% [markdown]
# ## Launches or arithmetic?
#
# Two explanations compete for the slow path's extra time.
#
# - **Arithmetic (and bytes).** Our kernels could simply be worse at the work: smaller tiles, no fusion,
#   the scores written to memory and read back. Then the GPU would be *busy* for most of the extra time,
#   and the GPU-busy time would grow as much as the wall time.
# - **Launches.** Each launch costs a roughly fixed slice of host time (Python, PyTorch's dispatcher,
#   Triton's launcher, the driver), while the kernel itself finishes in microseconds. Then the GPU would
#   sit idle most of the time, the wall time would grow with the number of launches, and the time *per
#   launch* would land at a few microseconds for every version.
#
# The test: compare the gap in wall time between the slow path and SDPA with the gap in GPU-busy time.
# Whatever part of the wall-time gap the GPU was not busy for is host time spent launching.

# %%
timing["µs per launch"] = [1e3 * r.ms / launches(r.shape, r.version) if launches(r.shape, r.version) else float("nan")
                           for r in timing.itertuples()]
if helpers.HAS_GPU:
    timing["GPU busy share"] = timing["gpu_busy_ms"] / timing["ms"]
helpers.show(timing)

fig, ax = plt.subplots(figsize=(7, 4.5))
markers = {"blog": "o", "qwen": "s"}
for shape_name in SHAPES:
    sub = timing[timing["shape"] == shape_name]
    x = [launches(shape_name, v) for v in sub["version"]]
    ax.scatter(x, sub["ms"], marker=markers[shape_name], s=60, label=f"wall time, {shape_name} shape")
    if helpers.HAS_GPU:
        ax.scatter(x, sub["gpu_busy_ms"], marker=markers[shape_name], s=60, facecolors="none",
                   edgecolors="black", label=f"GPU-busy time, {shape_name} shape")
    for xi, yi, v in zip(x, sub["ms"], sub["version"]):
        ax.annotate(v, (xi, yi), textcoords="offset points", xytext=(6, 4), fontsize=8)
# in CPU mode SDPA and the PyTorch ops launch none of our kernels: a symlog axis keeps their zeros
ax.set_xscale("log" if helpers.HAS_GPU else "symlog", **({} if helpers.HAS_GPU else {"linthresh": 1}))
ax.set_yscale("log")
helpers.plain_log_ticks(ax)
ax.set_xlabel("kernel launches per call" + ("" if helpers.HAS_GPU else " (our kernels only, CPU mode)"))
ax.set_ylabel("time per call (ms)")
ax.set_title("Does attention's time follow its launch count?")
ax.legend(fontsize=8)
ax.grid(True, which="both", alpha=0.3)
helpers.save_figure(fig, "attention_launches")
plt.show()

# %%
qs, bs = SHAPES["qwen"], SHAPES["blog"]
flops_ratio = (qs["Hq"] * qs["T"] * qs["D"]) / (bs["Hq"] * bs["T"] * bs["D"])
bytes_ratio = (qs["Hkv"] * qs["T"] * qs["D"]) / (bs["Hkv"] * bs["T"] * bs["D"])
gap_ms = cell("blog", "slow") - cell("blog", "sdpa")
extra_launches = launches("blog", "slow") - launches("blog", "sdpa")
if helpers.HAS_GPU:
    busy_gap = cell("blog", "slow", "gpu_busy_ms") - cell("blog", "sdpa", "gpu_busy_ms")
    share = busy_gap / gap_ms if gap_ms > 0 else float("nan")
    host_us = 1e3 * (gap_ms - busy_gap) / extra_launches if extra_launches > 0 else float("nan")
    if not gap_ms > 0:
        reading = (f"On the blog's shape the slow path was not slower than SDPA here ({gap_ms:+.3f} ms), so "
                   "there is no gap to split into launching and computing. ")
    else:
        verdict = ("launch count, not arithmetic, accounts for most of the gap" if share < 0.5 else
                   "the GPU's own work accounts for most of the gap, so arithmetic and bytes matter here")
        reading = (f"On the blog's shape the slow path took **{gap_ms:.3f} ms** longer than SDPA and made "
                   f"**{extra_launches:.0f}** more launches. The GPU was busy for **{busy_gap:.3f} ms** more "
                   f"({100 * share:.0f}% of the gap): {verdict}. "
                   + (f"Spread over the extra launches, the rest comes to about **{host_us:.1f} µs of host time "
                      "per launch**. " if host_us == host_us and host_us > 0 else ""))
    helpers.md(
        reading + f"Across all six measurements the time per "
        f"launch ranged from {timing['µs per launch'].min():.1f} to {timing['µs per launch'].max():.1f} µs, "
        f"while the kernels themselves kept the GPU busy {100 * timing['GPU busy share'].min():.0f}% to "
        f"{100 * timing['GPU busy share'].max():.0f}% of each call. Qwen3's shape does "
        f"{flops_ratio:.1f}x the arithmetic of the blog's on {bytes_ratio:.1f}x the bytes, and its slow path "
        f"took {cell('qwen', 'slow') / cell('blog', 'slow'):.2f}x the time with "
        f"{launches('qwen', 'slow'):.0f} launches against {launches('blog', 'slow'):.0f}."
    )
else:
    helpers.md(
        f"In the interpreter the slow path took {gap_ms:.1f} ms longer than SDPA for {extra_launches:.0f} more "
        f"of our launches, about {1e3 * gap_ms / max(extra_launches, 1):.0f} µs each: the interpreter runs every "
        "launch in numpy, so here a launch is expensive for a different reason. The GPU-busy half of the test "
        "needs a GPU; on one, this cell compares the gap in wall time with the gap in GPU-busy time."
    )

# %% [markdown]
# ## All attention modules of Qwen3 on the slow path
#
# Now the real model. `helpers.patched(model, attention="slow")` registers our function with
# transformers' `AttentionInterface` and switches every attention module to it; the q/k/v/o projections
# and the rest of the layer stay as they were. Only the computation between the projections changes.
#
# One detail matters for correctness: during an unpadded prefill, transformers passes no mask at all
# (SDPA would apply causality itself), so our function must apply the causal mask on its own. A forward
# pass over the prompt with and without the patch checks exactly that: a forgotten mask would let every
# prompt token see the future and change the logits a lot.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, model.config.vocab_size)
with torch.no_grad():
    logits_original = model(prompt).logits.float()
    with helpers.patched(model, attention="slow") as counts:
        logits_custom = model(prompt).logits.float()
err = (logits_custom - logits_original).abs().max().item()
rel = err / logits_original.abs().max().item()
top1 = (logits_custom.argmax(-1) == logits_original.argmax(-1)).float().mean().item()
print(f"attention modules switched: {counts['attention']} of {census['attention']}")
print(f"prompt logits: max abs difference {err:.3e} ({rel:.1e} of the largest logit), "
      f"same top-1 token at {100 * top1:.0f}% of positions")
REL_TOLERANCE = helpers.tolerance("model")
ok = counts["attention"] == census["attention"] and rel < REL_TOLERANCE
print("model-level check:", "PASS" if ok else "FAIL")
assert ok, f"slow attention changed the prompt logits by {rel:.1e} of their scale (tolerance {REL_TOLERANCE})"
helpers.record("attention.modules_replaced", counts["attention"], "modules", "attention modules on the slow path")

# %% [markdown]
# ### Predict, then measure
#
# The microbenchmark already tells us what to expect. Each decoded token runs every attention module
# once, at Qwen3's decode shape above (only the number of cached keys differs: the prompt plus the
# tokens so far, instead of the benchmark's fixed count), so each module should cost about what the slow
# path cost there instead of what SDPA cost. The cell below turns that into a predicted tokens/s, using
# only numbers measured so far plus the original model's speed. (The prefill also goes through the slow
# path, so the prediction is rough.)

# %%
n_attention = counts["attention"]
per_token_extra_ms = n_attention * (cell("qwen", "slow") - cell("qwen", "sdpa"))
with helpers.generation_progress(model, helpers.forwards_per_tps(SIZES.new_tokens), "original, tokens/s"):
    original = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer)
predicted_tps = 1000 / max(1000 / original.tokens_per_s + per_token_extra_ms, 1e-9)
print(f"original: {original.tokens_per_s:.2f} tokens/s")
print(f"prediction: +{per_token_extra_ms:.2f} ms per token from {n_attention} slow attention calls "
      f"-> about {predicted_tps:.2f} tokens/s")

# %%
forwards = helpers.forwards_per_tps(SIZES.new_tokens) + 2 * helpers.forwards_per_profile(SIZES.new_tokens)
with helpers.generation_progress(model, forwards, "slow attention, then original profile"):
    with helpers.patched(model, attention="slow"):
        custom = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer)
        profile_custom = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer)
    profile_original = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer)




print(f"slow attention: {custom.tokens_per_s:.2f} tokens/s (spread {custom.spread_pct:.1f}%)")
print(f"launches per token: original {profile_original.launches:.0f}, "
      f"slow attention {profile_custom.launches:.0f} "
      f"(of which ours: {profile_custom.project_launches_per_token:.0f})")
helpers.record("attention.tps_original", original.tokens_per_s, "tokens/s",
               f"prompt {SIZES.prompt_len}, {SIZES.new_tokens} new tokens")
helpers.record("attention.tps_custom", custom.tokens_per_s, "tokens/s",
               f"{n_attention} attention modules on the slow path; prompt {SIZES.prompt_len}, "
               f"{SIZES.new_tokens} new tokens")
helpers.record("attention.launches_per_token_custom", profile_custom.launches, "launches", helpers.launch_note())

# %%
slowdown = original.tokens_per_s / custom.tokens_per_s
off_by = custom.tokens_per_s / predicted_tps
heads = model.config.num_attention_heads
helpers.md(
    f"Swapping the computation inside {n_attention} attention modules took the model from "
    f"**{original.tokens_per_s:.2f}** to **{custom.tokens_per_s:.2f} tokens/s**, "
    + (f"a **{slowdown:.2f}x** slowdown. " if slowdown > 1 else
       f"an unexpected **{1 / slowdown:.2f}x** speed-up. ")
    + f"The prediction from the microbenchmark was "
    f"{predicted_tps:.2f} tokens/s, so the real model came out {abs(off_by - 1) * 100:.0f}% "
    f"{'faster' if off_by > 1 else 'slower'} than predicted. The launch count per token went from "
    f"{profile_original.launches:.0f} to {profile_custom.launches:.0f}; our own kernels account "
    f"for {profile_custom.project_launches_per_token:.0f} of them, against {n_attention} modules x {heads} "
    f"heads x 3 = {n_attention * heads * 3} counted by hand"
    + (": the count matches. " if abs(profile_custom.project_launches_per_token - n_attention * heads * 3) < 1 else
       ": the two differ, so something launches more (or fewer) of our kernels than the loop alone. ")
    + "The blog gives no tokens/s for attention alone, only for the full custom stack (next chapter)."
)

# %% [markdown]
# ## Takeaway
#
# - Attention for one new token is scores, scale, mask, softmax and a weighted sum; with GQA, pairs of
#   query heads read the same keys and values.
# - Implementations that agree to within rounding can differ widely in speed. Comparing the gap in wall
#   time with the gap in GPU-busy time tells you whether the arithmetic or the launching is to blame.
# - A loop over heads in Python multiplies the launches by the number of heads, and at decode time each
#   of those kernels has only a sliver of work. It is the first thing an optimiser removes: one fused
#   kernel over all heads.
#
# Next, chapter 6 switches everything on at once: RMSNorm, every projection and attention.
