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
# - how to check that all three agree, and how to time them on two clocks: GPU time and host time per call;
# - how to test whether a slow function is slow because of its arithmetic or because of its launches;
# - what happens to tokens/s when all attention modules of Qwen3-0.6B take the slow path, measured against
#   the original in interleaved rounds, and whether a prediction from the microbenchmark holds.

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
# query head $h$ uses KV head $h \,/\!/\, 2$. Against 16 KV heads of the same head dimension, that halves
# the KV cache (and the bytes read per step) while keeping 16 different attention patterns, one per query
# head. The blog's benchmark shape has 16 KV heads of dimension 64 (no sharing): twice the heads at half the
# head dimension, so on a GPU it reads exactly as many bytes per step as Qwen3's shape (the table below; CPU
# mode shrinks both shapes to one head dimension, so there the blog's shape reads twice as many).
#
# **Count the bytes.** At decode time each KV head's keys and values are read once: $2 \cdot T \cdot D$
# numbers. The arithmetic is $4 \cdot T \cdot D$ floating-point operations per query head: two to four
# operations per number read (four where two query heads share each KV head), far less than a GPU can do in
# the time it takes to read a number. The cell
# below computes both for the two shapes this chapter uses.

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
import math
import sys

import matplotlib.pyplot as plt
import pandas as pd
import torch
import torch.nn.functional as F

import helpers
import slower_kernels

helpers.show_env()

SIZES = helpers.SIZES
SHAPES = {"blog": SIZES.attention_blog_shape, "qwen": SIZES.attention_qwen_shape}
element_bytes = torch.empty((), dtype=helpers.DTYPE).element_size()

rows, KV_BYTES = [], {}
for name, s in SHAPES.items():
    KV_BYTES[name] = kv_bytes = 2 * s["B"] * s["Hkv"] * s["T"] * s["D"] * element_bytes  # K and V, read once
    flops = 4 * s["B"] * s["Hq"] * s["S"] * s["T"] * s["D"]  # q K^T and p V, 2 flops per multiply-add
    rows.append({"shape": name, "q": f"[{s['B']}, {s['Hq']}, {s['S']}, {s['D']}]",
                 "k, v": f"[{s['B']}, {s['Hkv']}, {s['T']}, {s['D']}]",
                 "K+V bytes": f"{kv_bytes / 2**20:.3f} MiB", "flops": f"{flops / 1e6:.2f} M",
                 # the time to read K and V once at each GPU's nominal memory bandwidth
                 "read time, T4 (µs)": kv_bytes / (helpers.NOMINAL_GB_S["t4"] * 1e3),
                 "read time, H200 (µs)": kv_bytes / (helpers.NOMINAL_GB_S["h200"] * 1e3)})
helpers.show(pd.DataFrame(rows))

# %% [markdown]
# The last two columns are the time the bytes take at each GPU's full (nominal) memory speed: a few
# microseconds or less. Keep that scale in mind when the timings come in.

# %% [markdown]
# ## Three versions of the same computation
#
# **1. PyTorch's SDPA.** `torch.nn.functional.scaled_dot_product_attention` is one fused kernel (on a
# GPU, a FlashAttention-style one when the shapes allow): scores, softmax and the weighted sum happen
# on-chip, in registers and shared memory (the SM's own storage, [chapter 1](01_setup.ipynb#The-GPU-you-are-on)),
# without writing the scores to memory. With `enable_gqa=True` it handles the shared KV heads
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
# doing a sliver of work. Both come from `slower_kernels/`:

# %%
print(inspect.getsource(slower_kernels.attention_torch_ops))
print(inspect.getsource(slower_kernels.attention_slow))

# %% [markdown]
# The softmax kernel handles one row per program: it loads the row, subtracts its maximum (so `exp`
# cannot overflow), exponentiates, sums and divides, all in fp32, and writes the row back in the
# input's dtype.

# %%
softmax_module = sys.modules[slower_kernels.softmax.__module__]
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


VERSIONS = {"sdpa": attention_sdpa, "torch_ops": slower_kernels.attention_torch_ops, "slow": slower_kernels.attention_slow}
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
# Two clocks answer two different questions, and this chapter reads both:
#
# - **GPU time** (`helpers.compare_calls`): the call is replayed in a CUDA graph, so the host is out of the
#   loop and the clock measures how long the GPU works on one call. The three versions are timed in shuffled
#   rounds against SDPA, and SDPA against itself: that A/A pair is the noise floor of a kernel of a few
#   microseconds, and a ratio that does not stand out of it is "within noise".
# - **host time per call** (`helpers.host_ms_per_call`): the call runs back to back many times,
#   synchronised before and after the loop. This is how long a caller waits per call, launching included;
#   for kernels that finish in microseconds it is mostly the price of launching them.
#
# Each call is timed once on each clock, and every later cell reads those numbers. All three are called the
# way the model calls attention at decode time: `causal=True` with no mask (transformers passes none, so
# causality is ours to apply; with one query it hides nothing). In CPU mode there is one clock, the
# interpreter's wall time, and the rounds run on it.
#
# What we expect (each expectation with the bar it will be held to, after the measurement, at both shapes):
#
# - **SDPA** should be quickest on both clocks: about one kernel, which reads K and V once and never
#   writes the scores. Its GPU time should be microseconds: within twice the larger of two floors, the read
#   time in the table at the top (at this GPU's nominal bandwidth) and the floor of any kernel, about a
#   microsecond of GPU time (chapter 2's smallest additions: even an almost empty kernel keeps the GPU busy
#   that long). Where the read time is below a microsecond, as it is on an H200, the kernel's floor sets
#   the bar.
# - **PyTorch ops** should take a few times SDPA's GPU time (2 to 10 times): five or more kernels, with the
#   scores written and read again between them, plus the copies that expand the KV heads. Every kernel is a
#   launch, so its host time per call should be above SDPA's too.
# - **The slow path** makes three of our launches per query head, plus the small PyTorch ops of the mask
#   and the copy into the output, each a launch too: dozens of kernels with almost nothing to do. Its GPU
#   time should be dozens of tiny kernels' worth, well under a millisecond (under 0.5 ms). Its host time
#   should be dozens of launches at tens of microseconds each (our Triton launchers run Python before every
#   launch): milliseconds (1 ms or more). We expect its host time to dwarf its GPU time (10 times or more),
#   and its gap to SDPA to follow launches rather than bytes (the test of the next section).
#
# The section after that holds every one of these against the measurement.

# %%
CLOCK = helpers.CLOCK_LABELS["gpu" if helpers.HAS_GPU else "interpreter"]  # the clock of the rounds
HOST = "host ms per call" if helpers.HAS_GPU else "interpreter ms per call"  # CPU mode has one clock
rounds, times, rows = {}, {}, []
for shape_name, shape in SHAPES.items():
    q, k, v = make_qkv(**shape, seed=100)
    scale = 1 / math.sqrt(shape["D"])
    fns = {name: (lambda fn=fn, q=q, k=k, v=v, scale=scale: fn(q, k, v, scale, True))  # as the model calls it
           for name, fn in VERSIONS.items()}
    # GPU time: shuffled rounds against SDPA, and SDPA against itself (the A/A floor)
    rounds[shape_name] = cc = helpers.compare_calls({n: fns[n] for n in ("torch_ops", "slow")}, fns["sdpa"])
    for name, fn in fns.items():
        median = cc.ms[helpers.REFERENCE if name == "sdpa" else name]
        with slower_kernels.count_launches() as ours:  # how many of the call's launches are our Triton kernels
            fn()
        times[shape_name, name] = helpers.KernelTime(
            gpu_ms=median if helpers.HAS_GPU else None,
            host_ms=helpers.host_ms_per_call(fn) if helpers.HAS_GPU else median,  # CPU mode: the rounds' clock
            launches=helpers.launches_per_call(fn))
        r = cc.ratios.get(name)
        rows.append({"shape": shape_name, "version": name, "gpu_ms": times[shape_name, name].gpu_ms,
                     "host_ms": times[shape_name, name].host_ms, "launches": times[shape_name, name].launches,
                     "our launches": sum(ours.values()),
                     "vs SDPA (median)": r.median_text if r else "1",  # at its quartiles' digits
                     "quartiles": r.quartiles if r else "-",
                     "verdict": cc.verdict(name).text if r else "reference"})
timing = pd.DataFrame(rows)
for shape_name, cc in rounds.items():
    print(f"{shape_name} shape: {cc.clock}, medians of {cc.rounds} shuffled rounds; A/A floor (SDPA against "
          f"itself) {cc.floor.median_text} ({cc.floor.quartiles})")
if helpers.HAS_GPU:
    print(f"host ms per call: {times['blog', 'sdpa'].host_clock}")
helpers.show(pd.DataFrame({
    "shape": timing["shape"], "version": timing["version"],
    "GPU ms per call": [helpers.fmt(t.gpu_ms, 4) for t in times.values()],
    HOST: [f"{t.host_ms:.4f}" for t in times.values()],
    f"vs SDPA ({'GPU' if helpers.HAS_GPU else 'interpreter'} time, median)": timing["vs SDPA (median)"],
    "quartiles": timing["quartiles"], "verdict": timing["verdict"],
    "launches per call": timing["launches"], "our launches": timing["our launches"]}))

LABELS = {"sdpa": "F.scaled_dot_product_attention", "torch_ops": "PyTorch ops", "slow": "per-head loop, our kernels"}
for prefix, shape in (("", "blog"), ("qwen_", "qwen")):
    s, cc = SHAPES[shape], rounds[shape]
    where = f"q [{s['B']},{s['Hq']},{s['S']},{s['D']}], k/v [{s['B']},{s['Hkv']},{s['T']},{s['D']}], causal"
    for version, label in LABELS.items():
        helpers.record(f"attention.{prefix}{version}_ms", cc.ms[helpers.REFERENCE if version == "sdpa" else version],
                       "ms", f"{label}, {where}; {cc.clock}, median of {cc.rounds} shuffled rounds against SDPA "
                       "(compare_calls, one run per shape)")
    helpers.record(f"attention.{prefix}slow_launches", times[shape, "slow"].launches, "launches",
                   helpers.launch_note(per="call"))
s = SHAPES["blog"]
where = f"q [{s['B']},{s['Hq']},{s['S']},{s['D']}], k/v [{s['B']},{s['Hkv']},{s['T']},{s['D']}], causal"
for version in ("sdpa", "slow"):
    helpers.record(f"attention.host_{version}_ms", times["blog", version].host_ms, "ms",
                   f"{LABELS[version]}, {where}; {times['blog', version].host_clock}"
                   + ("" if helpers.HAS_GPU else ": the same measurement as the rounds (CPU mode has one clock)"))

# %%
print("attention.*_ms: GPU time (CUDA-graph replay; interpreter wall time in CPU mode); attention.host_*_ms: "
      "host time per call; blog_t4: the blog's do_bench times, which mix host and GPU time")
helpers.show(helpers.compare(["attention.sdpa_ms", "attention.torch_ops_ms", "attention.slow_ms",
                              "attention.host_sdpa_ms", "attention.host_slow_ms", "attention.slow_launches",
                              "attention.qwen_sdpa_ms", "attention.qwen_torch_ops_ms", "attention.qwen_slow_ms",
                              "attention.qwen_slow_launches"]))


# %%
def in_words(v, other):
    """'5.62x slower than SDPA' or 'within noise of SDPA', from a helpers.Verdict."""
    return f"{v.text} than {other}" if v.real else f"within noise of {other}"


def than(a, b, floor=None):
    """'1.09x faster than' or 'within noise of': helpers.verdict on the time ratio a / b (against ``floor``
    where one was measured). For medians of rounds only: two single readings get ``single_ratio``."""
    v = helpers.verdict(a / b, floor)
    return f"{v.text} than" if v.real else "within noise of"


def single_ratio(a, b):
    """A ratio of two single host readings (one of each call, no rounds, so no verdict): '151 times', '0.89 times'."""
    r = a / b
    return f"{r:.0f} times" if r >= 10 else f"{r:.2f} times"


def rounds_vs_sdpa(shape, version):
    """The GPU-time (interpreter-time in CPU mode) verdict from the rounds, against their A/A floor."""
    return in_words(rounds[shape].verdict(version), "SDPA")


def gpu(shape, version):
    return times[shape, version].gpu_ms


def host(shape, version):
    return times[shape, version].host_ms


blog_ms = {v: helpers.blog(f"attention.{v}_ms") for v in VERSIONS}
blog_ratio = {v: blog_ms[v] / blog_ms["sdpa"] for v in ("torch_ops", "slow")}
blog_part = (
    f"The blog's T4 numbers ({blog_ms['sdpa']}, {blog_ms['torch_ops']} and {blog_ms['slow']} ms) come from "
    "`triton.testing.do_bench`, which times calls back to back, so launching and running overlap and its time "
    "per call lies between our two clocks: nearer the GPU's where the kernels run long against their launches, "
    "nearer the host's where they are short. They give ratios of "
    f"{blog_ratio['torch_ops']:.1f}x and {blog_ratio['slow']:.0f}x for the same two comparisons. Its loop made "
    "two matmul launches per head, ours three (the softmax is a kernel of its own)."
)


def nearer_clock(shape="blog"):
    """Which of this run's clocks gives ratios to SDPA nearer the blog's do_bench ratios, in words: the distance is
    |log(ours / blog's)| summed over the two comparisons; 'about as near' within the series' smallest effect."""
    def times_x(r):
        return f"{r:.0f}x" if r >= 10 else f"{r:.1f}x"

    clocks = {"GPU": gpu, "host": host}
    dist = {c: sum(abs(math.log(t(shape, v) / t(shape, "sdpa") / blog_ratio[v])) for v in blog_ratio)
            for c, t in clocks.items()}
    ours = {c: " and ".join(times_x(t(shape, v) / t(shape, "sdpa")) for v in blog_ratio) for c, t in clocks.items()}
    if abs(dist["GPU"] - dist["host"]) < math.log(1 + helpers.MIN_EFFECT):
        return (f"The blog's ratios lie about as near this run's GPU-clock ratios ({ours['GPU']}) as its host-clock "
                f"ones ({ours['host']}). ")
    near, far = sorted(dist, key=dist.get)
    if near == "host":
        why = "in the blog's timing, too, the launching likely outweighed kernels this small"
    elif helpers.SLUG == "t4":
        why = "on a T4 these kernels run long enough against their launches for do_bench to see mostly GPU time"
    else:
        why = ("likely because the blog's T4 ran each kernel several times longer than this GPU does, so its "
               "back-to-back timing saw more of the GPU's work and less of the launching")
    return (f"The blog's ratios lie nearer this run's {near}-clock ratios ({ours[near]}) than its {far}-clock ones "
            f"({ours[far]}): {why}. The two machines differ in GPU and host alike, so compare directions and orders "
            "of magnitude, not the factors. ")


blog_r = rounds["blog"]
if helpers.HAS_GPU:
    host_above = sum(host(s, v) > gpu(s, v) for s, v in times)
    helpers.md(
        f"**GPU clock.** On the blog's shape, round by round, the PyTorch-ops version was "
        f"**{rounds_vs_sdpa('blog', 'torch_ops')}** ({gpu('blog', 'torch_ops'):.4f} against "
        f"{gpu('blog', 'sdpa'):.4f} GPU ms), and the slow path **{rounds_vs_sdpa('blog', 'slow')}** "
        f"({gpu('blog', 'slow'):.4f} GPU ms, {times['blog', 'slow'].launches:.0f} launches), against an A/A floor "
        f"of {blog_r.floor.median:.3f}. On Qwen3's own shape the slow path was {rounds_vs_sdpa('qwen', 'slow')}.\n\n"
        f"**Host clock.** The same three calls took {host('blog', 'sdpa'):.3f}, {host('blog', 'torch_ops'):.3f} "
        f"and {host('blog', 'slow'):.3f} host ms per call on the blog's shape: PyTorch ops took "
        f"{single_ratio(host('blog', 'torch_ops'), host('blog', 'sdpa'))} SDPA's host time, the slow path "
        f"{single_ratio(host('blog', 'slow'), host('blog', 'sdpa'))} (one host reading of each call, no rounds: "
        f"ratios, not verdicts). In {host_above} of the {len(times)} measurements the host time per call was "
        "longer than the GPU time.\n\n"
        + blog_part + " " + nearer_clock()
    )
else:
    helpers.md(
        f"In CPU mode there is one clock, the interpreter's wall time. On the blog's shape, round by round, the "
        f"PyTorch-ops version was {rounds_vs_sdpa('blog', 'torch_ops')} and the slow path "
        f"{rounds_vs_sdpa('blog', 'slow')} ({host('blog', 'slow'):.1f} interpreter ms per call, "
        f"{times['blog', 'slow'].launches:.0f} of our launches, each run in numpy), against an A/A floor of "
        f"{blog_r.floor.median:.3f}. These are interpreter times: they follow the method, not a GPU's speed. "
        + blog_part
    )

# %% [markdown]
# ## Launches or arithmetic?
#
# Two explanations compete for the slow path's extra time.
#
# - **Arithmetic (and bytes).** Our kernels could simply be worse at the work: smaller tiles, no fusion,
#   the scores written to memory and read back. Then the GPU time would grow about as much as the host
#   time per call: the host would be waiting for a busy GPU.
# - **Launches.** Each launch costs a roughly fixed slice of host time (Python, PyTorch's dispatcher,
#   Triton's launcher, the driver), while the kernel itself finishes in microseconds. Then the host time
#   per call would grow with the number of launches while the GPU time stayed small, and the host time
#   *per launch* would land in the same range for every version.
#
# The test: split the slow path's extra host time per call (over SDPA) into the part the GPU spent
# working (the extra GPU time) and the rest. The rest is the host launching kernels while the GPU waits.

# %%
PER_LAUNCH = "host µs per launch" if helpers.HAS_GPU else "interpreter µs per launch"
timing[PER_LAUNCH] = [1e3 * r.host_ms / r.launches if r.launches else float("nan") for r in timing.itertuples()]
if helpers.HAS_GPU:
    timing["GPU time / host time"] = timing["gpu_ms"] / timing["host_ms"]
helpers.show(timing.drop(columns=["vs SDPA (median)", "quartiles", "verdict"])
             .assign(gpu_ms=[helpers.fmt(t.gpu_ms, 4) for t in times.values()])
             .rename(columns={"gpu_ms": "GPU ms per call", "host_ms": HOST}))

NAMES = {"sdpa": "SDPA", "torch_ops": "PyTorch ops", "slow": "per-head loop"}
OWNER = {"sdpa": "SDPA's", "torch_ops": "the PyTorch ops'", "slow": "the per-head loop's"}  # inside a sentence
THE = {"sdpa": "SDPA", "torch_ops": "the PyTorch ops", "slow": "the per-head loop"}  # inside a sentence
fig, axes = plt.subplots(1, len(SHAPES), figsize=(11, 4.5), sharey=True)
for ax, (shape_name, s) in zip(axes, SHAPES.items()):
    sub = timing[timing["shape"] == shape_name]
    ax.scatter(sub["launches"], sub["host_ms"], s=60, color="tab:blue", zorder=3,
               label="host time per call" if helpers.HAS_GPU else "interpreter wall time per call")
    if helpers.HAS_GPU:
        ax.scatter(sub["launches"], sub["gpu_ms"], s=60, facecolors="none", edgecolors="black", zorder=3,
                   label="GPU time per call (CUDA-graph replay)")
        ax.vlines(sub["launches"], sub["gpu_ms"], sub["host_ms"], color="gray", lw=0.8, ls=":")
    for x_, y_, v in zip(sub["launches"], sub["host_ms"], sub["version"]):
        # a label sits up and to the right of its host-time point; the rightmost one to its left, inside the axes
        right = x_ == sub["launches"].max() and len(sub) > 1
        ax.annotate(NAMES[v], (x_, y_), textcoords="offset points", xytext=(-9, 0) if right else (6, 6),
                    ha="right" if right else "left", va="center" if right else "bottom", fontsize=9)
    if helpers.HAS_GPU:
        ax.set_xscale("log")
        ax.set_xlim(0.6, 2.0 * sub["launches"].max())
    else:  # SDPA and the PyTorch ops launch none of our kernels: a symlog axis keeps their zeros
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(-0.5, 3.0 * max(sub["launches"].max(), 1))
    ax.set_yscale("log")
    helpers.plain_log_ticks(ax, axis="both" if helpers.HAS_GPU else "y")
    ax.set_xlabel("kernel launches per call" + ("" if helpers.HAS_GPU else " (our kernels only, CPU mode)"))
    ax.set_title(f"{shape_name} shape: q [{s['B']}, {s['Hq']}, {s['S']}, {s['D']}], "
                 f"k/v [{s['B']}, {s['Hkv']}, {s['T']}, {s['D']}]", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
bottom, top = axes[0].get_ylim()  # shared y: about 30% of the log axis as headroom above the highest point
axes[0].set_ylim(bottom, top * (top / bottom) ** 0.3)
axes[0].set_ylabel("ms per call" if helpers.HAS_GPU else "interpreter ms per call (CPU mode)")
axes[0].legend(fontsize=8, loc="upper left")
fig.suptitle("Does attention's time follow its launch count?")
fig.tight_layout()
helpers.save_figure(fig, "attention_launches")
plt.show()


# %%
def read_split(gpu_gap_ms, host_gap_ms):
    """The launches-or-arithmetic test in words: did the GPU work for most of the extra host time?"""
    if gpu_gap_ms < 0.5 * host_gap_ms:
        return "launches, not arithmetic, account for most of the gap"
    return "the GPU's own work accounts for most of the gap, so arithmetic and bytes matter here"


qs, bs = SHAPES["qwen"], SHAPES["blog"]
flops_ratio = (qs["Hq"] * qs["T"] * qs["D"]) / (bs["Hq"] * bs["T"] * bs["D"])
bytes_ratio = (qs["Hkv"] * qs["T"] * qs["D"]) / (bs["Hkv"] * bs["T"] * bs["D"])
slow, sdpa = times["blog", "slow"], times["blog", "sdpa"]
host_gap = slow.host_ms - sdpa.host_ms
extra_launches = slow.launches - sdpa.launches
gap_verdict = (helpers.verdict(slow.host_ms / sdpa.host_ms) if helpers.HAS_GPU else
               rounds["blog"].verdict("slow"))  # CPU mode: the one clock, from the rounds
if not (gap_verdict.real and gap_verdict.ratio > 1):
    reading = ("On the blog's shape the slow path's host time per call was "
               + (f"{single_ratio(slow.host_ms, sdpa.host_ms)} SDPA's (one host reading of each call)"
                  if helpers.HAS_GPU else f"{in_words(gap_verdict, 'SDPA')}'s in the rounds")
               + ", not clearly more, so there is no gap to split into launching and computing. ")
elif helpers.HAS_GPU:
    gpu_gap = slow.gpu_ms - sdpa.gpu_ms
    reading = (f"On the blog's shape the slow path's host time per call was **{host_gap:.3f} ms** above SDPA's, "
               f"for **{extra_launches:.0f}** more launches. Its GPU time was **{gpu_gap:.4f} ms** above SDPA's "
               f"({100 * gpu_gap / host_gap:.0f}% of the gap): {read_split(gpu_gap, host_gap)}. The other "
               f"{host_gap - gpu_gap:.3f} ms, host time beyond the extra GPU work, come to about "
               f"**{1e3 * (host_gap - gpu_gap) / extra_launches:.1f} µs per extra launch**. ")
else:
    reading = (f"In the interpreter the slow path took {host_gap:.1f} ms longer than SDPA for {extra_launches:.0f} "
               f"more of our launches, about {1e3 * host_gap / max(extra_launches, 1):.0f} µs each: the interpreter "
               "runs every launch in numpy, so here a launch is expensive for a different reason. The split into "
               "launching and GPU work needs the GPU clock; on a GPU this cell makes it. ")
if helpers.HAS_GPU:
    reading += (f"Across all six measurements the GPU time was {100 * timing['GPU time / host time'].min():.0f}% to "
                f"{100 * timing['GPU time / host time'].max():.0f}% of the host time per call. ")
# two shapes, two runs of rounds: the GPU-time ratio is held against the noisier of their two A/A floors
noisier = helpers.noisier_floor(rounds[s].floor for s in SHAPES)
reading += (
    f"Qwen3's shape does {flops_ratio:.1f}x the arithmetic of the blog's on {bytes_ratio:.1f}x the bytes, with "
    + (f"the same {slow.launches:.0f} launches" if f"{times['qwen', 'slow'].launches:.0f}" == f"{slow.launches:.0f}"
       else f"{times['qwen', 'slow'].launches:.0f} launches against {slow.launches:.0f}")
    + ": its slow path was "
    + (f"{than(gpu('qwen', 'slow'), gpu('blog', 'slow'), noisier)} the blog shape's on the GPU clock (the "
       "medians of two separate runs of rounds, one per shape, not paired round by round, so this verdict, held "
       "against the noisier of their two A/A floors, is weaker than the chapter's others), and took "
       f"{single_ratio(host('qwen', 'slow'), host('blog', 'slow'))} its host time per call "
       "(one host reading of each, no rounds: a ratio, not a verdict)."
       if helpers.HAS_GPU else
       f"{than(host('qwen', 'slow'), host('blog', 'slow'), noisier)} the blog shape's in interpreter time (medians "
       "of two separate runs of rounds, not paired round by round: a weaker verdict than the others).")
)


def chapter2_prices():
    """Chapter 2's host µs of an empty Triton launch and of a one-element PyTorch op, where this run's results
    (helpers.results()) hold them: {"triton": ..., "torch": ..., "time": the older row's time}, or fewer keys."""
    recorded = helpers.results()
    found, times_ = {}, []
    for key, id in (("triton", "add.launch_us_triton"), ("torch", "add.launch_us_torch")):
        row = recorded[recorded["id"] == id]
        if len(row) and pd.notna(row["value"].iloc[0]):
            found[key] = float(row["value"].iloc[0])
            times_.append(str(row["time"].iloc[0]))
    if len(found) == 2:
        stamps = pd.to_datetime(pd.Series(times_), utc=True, errors="coerce")
        found["time"] = "" if stamps.isna().any() else str(stamps.min())  # the older; unknown if either is missing
    return found


def times_range(lo, hi):
    """'1.4 to 3.6 times', or '2.2 times' when the two ends round alike."""
    return f"{lo:.1f} times" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f} to {hi:.1f} times"


def more_launches_less_time(v):
    """A sentence for a version whose call with more launches took less host time: that call first."""
    more, fewer = sorted(SHAPES, key=lambda s: -times[s, v].launches)
    return (f"{OWNER[v][0].upper() + OWNER[v][1:]} call with more launches took less host time ({host(more, v):.4f} "
            f"against {host(fewer, v):.4f} {HOST.removesuffix(' per call')} for {times[more, v].launches:.0f} and "
            f"{times[fewer, v].launches:.0f} launches). ")


def read_launch_prices():
    """The host µs per launch of the six measurements, judged: how wide their range is, how far single readings
    scatter (the same call read at two shapes with the same launches: its price ratio is its host time's ratio),
    whether "the same range for every version" held, and how each version compares with its own kind of empty
    launch from chapter 2. A version whose launch count changes with the shape changes its price per launch with
    it, so its two prices are no measure of scatter."""
    price = {(r["shape"], r["version"]): r[PER_LAUNCH] for _, r in timing.iterrows()}
    lo_at, hi_at = min(price, key=price.get), max(price, key=price.get)
    span = price[hi_at] / price[lo_at]
    by_version = {v: [price[s, v] for s in SHAPES] for v in VERSIONS}
    counts = {v: [times[s, v].launches for s in SHAPES] for v in VERSIONS}
    same = [v for v in VERSIONS if len(set(counts[v])) == 1]
    within = {v: max(by_version[v]) / min(by_version[v]) for v in same}  # one call, two readings
    widest = max(within, key=within.get) if within else None
    each = "; ".join(f"{NAMES[v]} {min(p):.1f}-{max(p):.1f}" for v, p in by_version.items())
    slow_ours = timing.query("shape == 'qwen' and version == 'slow'")["our launches"].iloc[0]
    bar = f"the series' {100 * helpers.PREDICTION_BAR:.0f}% bar"
    wider = f"The range, a factor of {span:.2f}, is wider than {bar}"
    weaker = ("The launch explanation holds in a weaker form here: the host time follows the number of launches, "
              "at a price that depends on what runs around each launch. " if launch_bound else "")
    text = (f"**The price of a launch.** Host time per call over launches per call (the column above) ranged from "
            f"{price[lo_at]:.1f} µs ({NAMES[lo_at[1]]}, {lo_at[0]} shape) to {price[hi_at]:.1f} µs "
            f"({NAMES[hi_at[1]]}, {hi_at[0]} shape), a factor of {span:.2f}; by version, in µs: {each}. Each is one "
            f"host reading of a call's wall time spread evenly over its launches: SDPA's whole host time per call "
            f"(its Python wrapper, PyTorch's checks and dispatch) sits on "
            + ("its single launch" if times["qwen", "sdpa"].launches == 1 else
               f"its {times['qwen', 'sdpa'].launches:.0f} launches")
            + f", and {slow_ours:.0f} of the per-head loop's "
            f"{times['qwen', 'slow'].launches:.0f} launches are ours, each run through our launchers' Python. "
            + "".join(f"{OWNER[v][0].upper() + OWNER[v][1:]} launch count changes with the shape "
                      f"({' and '.join(f'{n:.0f}' for n in counts[v])} launches at the {' and '.join(SHAPES)} shapes, "
                      f"in {' and '.join(f'{host(s, v):.4f}' for s in SHAPES)} {HOST.removesuffix(' per call')}), "
                      "and its price per launch changes with it: its two prices measure no scatter. "
                      for v in VERSIONS if v not in same))
    if span <= 1 + helpers.PREDICTION_BAR:
        text += (f"Within {bar}, every version paid about the same price per launch, as the launch explanation "
                 "expects. ")
    elif widest is None:
        text += (f"{wider}, but no version ran the same launches at both shapes, so these six readings do not "
                 "measure their own scatter and cannot say whether the versions pay different prices per launch; "
                 "that needs repeated readings, as chapter 2 took for its empty launches. ")
    elif within[widest] > 1 + helpers.PREDICTION_BAR:
        # the same call, read at two shapes with the same launches, already differs beyond the bar: readings scatter
        fewer_cost_more = [v for v in VERSIONS if v not in same
                           and (times["blog", v].launches - times["qwen", v].launches)
                           * (host("blog", v) - host("qwen", v)) < 0]
        # a version sets itself apart from another only if its lowest price is further above the other's highest
        # than one call's own two readings lie apart
        lowest, highest = ({v: f(by_version[v]) for v in VERSIONS} for f in (min, max))
        dearer = {a: [b for b in VERSIONS if b != a and lowest[a] / highest[b] > within[widest]] for a in VERSIONS}
        apart = {a: bs for a, bs in dearer.items() if bs}
        tied = [(a, b) for i, a in enumerate(VERSIONS) for b in list(VERSIONS)[i + 1:]
                if b not in dearer[a] and a not in dearer[b]]
        n = counts[widest][0]
        text += (f"{wider}, but "
                 + ("part" if apart else "much") + " of it lies within "
                 f"one call: {OWNER[widest]} price differs by a factor of {within[widest]:.2f} between the two "
                 f"shapes, for the same {'single launch' if n == 1 else f'{n:.0f} launches'}. "
                 + "".join(more_launches_less_time(v) for v in fewer_cost_more))
        if apart:
            text += ("Single host readings scatter this much, but the gap between versions is wider: "
                     + "; ".join(f"{OWNER[a]} lowest price ({lowest[a]:.1f} µs) is "
                                 f"{lowest[a] / max(highest[b] for b in bs):.2f} times the highest "
                                 f"price of {' and '.join(THE[b] for b in bs)} ({max(highest[b] for b in bs):.1f} µs)"
                                 for a, bs in apart.items())
                     + ", so " + "; ".join(f"{THE[a]} paid more per launch than {' and '.join(THE[b] for b in bs)}"
                                           for a, bs in apart.items())
                     + (". " if not tied else
                        f", while {'; '.join(f'{THE[a]} and {THE[b]}' for a, b in tied)} lie within that "
                        "scatter of each other, and these readings cannot say whether "
                        + ("they pay" if len(tied) == 1 else "those pairs pay")
                        + " different prices per launch; that needs repeated readings, as chapter 2 took for its "
                          "empty launches. ")
                     + weaker)
        else:
            text += ("Single host readings scatter this much, so these six prices cannot say whether the versions "
                     "pay different prices per launch; a per-launch price needs repeated readings, as chapter 2 "
                     "took for its empty launches. ")
    else:
        text += (f"{wider}, while "
                 + (f"{THE[same[0]]}, read at both shapes with the same launches, agrees with itself within it"
                    if len(same) == 1 else
                    f"{', '.join(THE[v] for v in same[:-1])} and {THE[same[-1]]}, each read at both shapes with the "
                    "same launches, agree with themselves within it")
                 + f" (at most a factor of {within[widest]:.2f}): the versions did not pay one price per launch. "
                 + weaker)
    ch2 = chapter2_prices()
    if len(ch2) < 3:
        return text + ("Chapter 2's prices of an empty launch are not in this run's results (run chapter 2 first "
                       "to compare with them). ")
    # like for like: PyTorch's launches against chapter 2's PyTorch op; the loop, whose launches mix ours and
    # PyTorch's, against the two empty launches mixed in the loop's own proportion
    torch_side = by_version["sdpa"] + by_version["torch_ops"]
    ours = {s: timing.query(f"shape == '{s}' and version == 'slow'")["our launches"].iloc[0] for s in SHAPES}
    mix = {s: (ours[s] * ch2["triton"] + (times[s, "slow"].launches - ours[s]) * ch2["torch"])
              / times[s, "slow"].launches for s in SHAPES}
    loop_ratio = [price[s, "slow"] / mix[s] for s in SHAPES]
    text += (f"Chapter 2 recorded, in this GPU's results and on this machine's host clock, {ch2['torch']:.2f} µs "
             f"for a one-element PyTorch op and "
             f"{ch2['triton']:.2f} µs for an empty Triton launch ({helpers.recorded_when(ch2['time'], helpers.STARTED, 2)}). "
             "The launches of SDPA and the PyTorch ops cost "
             f"{times_range(min(torch_side) / ch2['torch'], max(torch_side) / ch2['torch'])} the PyTorch op; the "
             f"per-head loop's launches ({slow_ours:.0f} of its {times['qwen', 'slow'].launches:.0f} are ours) cost "
             f"{times_range(min(loop_ratio), max(loop_ratio))} the two empty launches mixed in the same proportion "
             + (f"({mix[next(iter(SHAPES))]:.1f} µs at both shapes). " if len({f"{m:.1f}" for m in mix.values()}) == 1
                else f"({', '.join(f'{mix[s]:.1f} µs' for s in SHAPES)} at the {' and '.join(SHAPES)} shapes). "))
    torch_above, loop_above = min(torch_side) > ch2["torch"], min(loop_ratio) > 1
    torch_below, loop_below = max(torch_side) <= ch2["torch"], max(loop_ratio) <= 1
    if torch_above and loop_above:
        text += ("Every price here is above its own kind of empty launch: an empty launch is the floor, and the rest "
                 "is the host work around each real one (argument checks, output allocation, and in the loop the "
                 "slicing of q, k and v and the loop itself). ")
    elif torch_below and loop_below:
        text += ("Every price here is at or below its own kind of empty launch: the two chapters' readings were "
                 "taken under different host conditions, and single readings like these cannot say which is "
                 "typical. ")
    else:
        below = [w for w, above in (("PyTorch's launches", torch_above), ("the loop's", loop_above)) if not above]
        text += (f"Not all of them clear their floor ({' and '.join(below)} come out at or below it in at least one "
                 "reading): single host readings, taken at different times from chapter 2's, do not place every "
                 "launch above its floor. ")
    return text


launch_bound = (helpers.HAS_GPU and gap_verdict.real and gap_verdict.ratio > 1
                and slow.gpu_ms - sdpa.gpu_ms < 0.5 * host_gap)  # read_split's test: launches, not arithmetic
if helpers.HAS_GPU:
    reading += "\n\n" + read_launch_prices()
helpers.md(reading)

# %% [markdown]
# ## The predictions, revisited
#
# Every expectation written before the timings, held to its bar against this run's numbers, at both shapes.
# Verdicts on the GPU clock come from the rounds against their A/A floor; host times are single readings, so
# a host-clock expectation is checked as a plain comparison.

# %%
NOMINAL = helpers.NOMINAL_GB_S.get(helpers.SLUG) if helpers.HAS_GPU else None  # this GPU's memory, GB/s


def both(test):
    """An expectation that must hold at both shapes."""
    return all(test(shape) for shape in SHAPES)


def at_shapes(fmt):
    """One measured value per shape, e.g. 'blog 0.0060, qwen 0.0077'."""
    return ", ".join(f"{shape} {fmt(shape)}" for shape in SHAPES)


def our_launches(shape, version):
    """Our own Triton launches in one call (counted with slower_kernels.count_launches in the timing cell)."""
    return timing[(timing["shape"] == shape) & (timing["version"] == version)]["our launches"].iloc[0]


def slower_than_sdpa(shape, version, low=1.0, high=float("inf")):
    """The rounds' verdict says slower than SDPA, by a median ratio within [low, high]."""
    v = rounds[shape].verdict(version)
    return v.real and low <= v.ratio <= high


KERNEL_FLOOR_US = 1.0  # about the GPU time of an almost empty kernel (chapter 2's smallest additions)
SDPA_READ = (f"SDPA's GPU time within 2x the larger of the time to read K and V at the nominal bandwidth and "
             f"a kernel's floor (about {KERNEL_FLOOR_US:.0f} µs)")


def revisit():
    """(expectation, measured, held) for each expectation of the "Predict first" cell; measured and held are
    None where this mode cannot check it (CPU mode has no GPU clock and counts only our own launches)."""
    def read_time_us(shape):
        return KV_BYTES[shape] / (NOMINAL * 1e3)

    def sdpa_bar_us(shape):  # the larger of the two floors, doubled
        return 2 * max(read_time_us(shape), KERNEL_FLOOR_US)

    def gap_split():
        if not (gap_verdict.real and gap_verdict.ratio > 1):
            return "no gap to split", False
        return f"{100 * gpu_gap / host_gap:.0f}% of the gap", gpu_gap < 0.5 * host_gap

    heads = {shape: s["B"] * s["Hq"] for shape, s in SHAPES.items()}
    # (expectation, what it needs: "gpu", "nominal" or "any", measured in words, held)
    checks = [
        ("SDPA quickest on the GPU clock (the others' rounds: slower than SDPA)", "gpu",
         lambda: at_shapes(lambda sh: f"ops {rounds[sh].verdict('torch_ops').text}, "
                                      f"loop {rounds[sh].verdict('slow').text}"),
         lambda: both(lambda sh: slower_than_sdpa(sh, "torch_ops") and slower_than_sdpa(sh, "slow"))),
        ("SDPA quickest on the host clock (single readings)", "gpu",
         lambda: at_shapes(lambda sh: " / ".join(f"{host(sh, v):.3f}" for v in VERSIONS))
         + " host ms (SDPA / ops / loop)",
         lambda: both(lambda sh: host(sh, "sdpa") < min(host(sh, "torch_ops"), host(sh, "slow")))),
        (SDPA_READ, "nominal",
         lambda: at_shapes(lambda sh: f"{1e3 * gpu(sh, 'sdpa'):.2f} µs against a bar of {sdpa_bar_us(sh):.2f} µs "
                                      f"(read time {read_time_us(sh):.3f} µs)"),
         lambda: both(lambda sh: 1e3 * gpu(sh, "sdpa") <= sdpa_bar_us(sh))),
        ("PyTorch ops 2 to 10 times SDPA's GPU time", "gpu",
         lambda: at_shapes(lambda sh: rounds[sh].verdict("torch_ops").text),
         lambda: both(lambda sh: slower_than_sdpa(sh, "torch_ops", 2, 10))),
        ("PyTorch ops: five or more kernels per call", "gpu",
         lambda: at_shapes(lambda sh: f"{times[sh, 'torch_ops'].launches:.0f}"),
         lambda: both(lambda sh: times[sh, "torch_ops"].launches >= 5)),
        ("PyTorch ops' host time per call above SDPA's", "gpu",
         lambda: at_shapes(lambda sh: f"{single_ratio(host(sh, 'torch_ops'), host(sh, 'sdpa'))} SDPA's"),
         lambda: both(lambda sh: host(sh, "torch_ops") > host(sh, "sdpa"))),
        ("Slow path: three of our launches per query head", "any",
         lambda: at_shapes(lambda sh: f"{our_launches(sh, 'slow'):.0f} for {heads[sh]} heads"),
         lambda: both(lambda sh: our_launches(sh, "slow") == 3 * heads[sh])),
        ("Slow path: dozens of kernels per call in all (24 or more)", "gpu",
         lambda: at_shapes(lambda sh: f"{times[sh, 'slow'].launches:.0f}"),
         lambda: both(lambda sh: times[sh, "slow"].launches >= 24)),
        ("Slow path's GPU time well under a millisecond (under 0.5 ms)", "gpu",
         lambda: at_shapes(lambda sh: f"{gpu(sh, 'slow'):.4f} ms"),
         lambda: both(lambda sh: gpu(sh, "slow") < 0.5)),
        ("Slow path's host time: milliseconds (1 ms or more)", "gpu",
         lambda: at_shapes(lambda sh: f"{host(sh, 'slow'):.3f} ms"),
         lambda: both(lambda sh: host(sh, "slow") >= 1)),
        ("Slow path's host time at least 10 times its GPU time", "gpu",
         lambda: at_shapes(lambda sh: single_ratio(host(sh, "slow"), gpu(sh, "slow"))),
         lambda: both(lambda sh: host(sh, "slow") >= 10 * gpu(sh, "slow"))),
        ("Slow path's gap to SDPA follows launches, not bytes (blog shape: extra GPU time under half the "
         "extra host time)", "gpu", lambda: gap_split()[0], lambda: gap_split()[1]),
    ]
    can = {"any": True, "gpu": helpers.HAS_GPU, "nominal": helpers.HAS_GPU and NOMINAL is not None}
    return [(e, measured(), held()) if can[needs] else (e, None, None) for e, needs, measured, held in checks]


revisited = revisit()
unchecked = "n/a (CPU mode)" if not helpers.HAS_GPU else "n/a (nominal bandwidth unknown)"
helpers.show(pd.DataFrame([{"expectation": e, "measured": "-" if m is None else m,
                            "held": unchecked if h is None else "yes" if h else "no"}
                           for e, m, h in revisited]).set_index("expectation"))
checked = [(e, h) for e, _, h in revisited if h is not None]
missed = [e for e, h in checked if not h]
text = (f"Of the {len(revisited)} expectations, this run can check {len(checked)}, and "
        + (("it held. " if len(checked) == 1 else f"all {len(checked)} held. ") if not missed else
           f"{len(checked) - len(missed)} held; {len(missed)} did not: " + "; ".join(missed) + ". "))
sdpa_fast_enough = next(h for e, _, h in revisited if e == SDPA_READ)
if sdpa_fast_enough is False:
    sh = max(SHAPES, key=lambda s: gpu(s, "sdpa") / KV_BYTES[s])  # the shape furthest from its read time
    achieved = KV_BYTES[sh] / (gpu(sh, "sdpa") * 1e-3) / 1e9
    floor_us = max(KV_BYTES[sh] / (NOMINAL * 1e3), KERNEL_FLOOR_US)
    text += (f"SDPA's GPU time was paced neither by its bytes nor by a kernel's floor alone: on the {sh} shape it "
             f"read {KV_BYTES[sh] / 2**20:.1f} MiB of K and V in {1e3 * gpu(sh, 'sdpa'):.2f} GPU µs, "
             f"{achieved:,.0f} GB/s, "
             f"{100 * achieved / NOMINAL:.0f}% of the nominal {NOMINAL:,} GB/s, and "
             f"{1e3 * gpu(sh, 'sdpa') / floor_us:.1f}x the larger floor ({floor_us:.2f} µs). A fused attention kernel "
             "does more in sequence than stream K and V: per query head it computes the scores, a running maximum "
             "and sum for the softmax, and the weighted sum, block after block along the keys, and with a single "
             "query most of each block's rows of queries are padding. How its time splits, this chapter does not "
             "measure. (The replayed call may also find K and V in the L2 cache, the on-chip cache in front of the "
             "GPU's memory, [chapter 1](01_setup.ipynb#The-GPU-you-are-on), which makes its bytes cheaper still.) ")
elif not helpers.HAS_GPU:
    text += "The clock-based expectations need a GPU: in CPU mode only the count of our own launches is checked. "
helpers.md(text)

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
# tokens so far, instead of the benchmark's fixed count). At batch size 1 we expect a decode step to be paced
# by the host, which launches the kernels one after another (the profile below says how busy the GPU was), so
# the prediction is a **launch budget**, the model chapter 4 used and chapter 8 applies to the whole series:
#
# $$\text{wall ms per decoded token} \approx n_\text{PyTorch} \cdot p_\text{PyTorch} + n_\text{ours} \cdot p_\text{ours} + \text{GPU-busy ms}$$
#
# - $p_\text{PyTorch}$, the host's price of one PyTorch launch inside `generate()`, comes from the original
#   model in the same comparison: its wall ms per decoded token minus its GPU-busy ms, over its launches.
# - $p_\text{ours}$ is measured, not fitted: the per-head loop's host time per call (above), less its
#   PyTorch launches (the mask's ops) at $p_\text{PyTorch}$, over its launches of ours. Priced so, a call of
#   the loop costs the budget exactly the host time it cost on its own. Of the loop's two rows, Qwen3's shape
#   is the one used, because it is the shape the model's attention runs; the blog's shape, priced the same
#   way, is printed beside it.
# - Chapter 8 prices each kind of call the same way, ours and the original's it replaces, each timed on its
#   own, and fits only one factor for how much dearer the swaps are inside the model
#   (`helpers.ModuleBudget`).
# - The launch counts $n$ and the GPU-busy ms are the patched model's own, from the profiler.
#
# The launch count itself is predicted by hand from the microbenchmark: the original's launches per token,
# plus, once per attention module, the slow path's launches per call minus SDPA's.
#
# `helpers.compare_configs` then times whole generations (`SIZES.new_tokens` new tokens from a
# `SIZES.prompt_len`-token prompt, prefill included) of the original, the original again and the patched
# model, in a shuffled order, round after round; each round's time of the patched model is divided by the
# original's of the same round, and the original against itself gives the run's noise floor (the A/A
# ratio). Each generation is followed by a one-token one, so the same rounds give the **wall ms per decoded
# token** (prefill excluded); after the rounds the profiler counts launches and GPU-busy ms per decoded
# token. We expect the slow path to generate several times slower than the original, so at full size the
# comparison takes a minute or two.

# %%
n_attention = counts["attention"]
qwen_slow, qwen_sdpa = times["qwen", "slow"], times["qwen", "sdpa"]
qwen_slow_ours = timing.query("shape == 'qwen' and version == 'slow'")["our launches"].iloc[0]  # ours, per call
extra_per_token = n_attention * (qwen_slow.launches - qwen_sdpa.launches)
PREDICTION_BAR = helpers.PREDICTION_BAR  # a prediction within 20% of the measurement holds, as in chapter 8
print(f"launches per token: the original's + {n_attention} x ({qwen_slow.launches:.0f} - {qwen_sdpa.launches:.0f}) "
      f"= the original's {extra_per_token:+,.0f} ({helpers.launch_note(per='call')})")
if helpers.HAS_GPU:
    print(f"the per-head loop at Qwen3's shape: {qwen_slow.host_ms:.3f} host ms per call ({qwen_slow.host_clock}), "
          f"{qwen_slow.launches:.0f} launches per call, {qwen_slow_ours:.0f} of them ours; the price of a launch of "
          "ours follows once the comparison below has priced a PyTorch launch")
else:
    print("CPU mode: the wall-time budget needs every CUDA launch per token and the GPU-busy time, which only a "
          "GPU profile gives; only the count of our launches is predicted here.")

# %%
SLOW = "per-head attention"
comparison = helpers.compare_configs(model, {SLOW: dict(attention="slow")}, tokenizer=tokenizer, profile=True)
helpers.show(comparison.table())
slowdown = comparison.record(SLOW, "attention.slowdown",
                             f"{n_attention} attention modules on the per-head loop; prompt {comparison.prompt_len}, "
                             f"{comparison.new_tokens} new tokens")
tps_note = (f"median of {len(comparison.orders)} shuffled rounds; new tokens / generation time, prefill included; "
            f"prompt {comparison.prompt_len}, {comparison.new_tokens} new tokens")
helpers.record("attention.tps_original", comparison.tokens_per_s[helpers.ORIGINAL], "tokens/s", tps_note)
helpers.record("attention.tps_custom", comparison.tokens_per_s[SLOW], "tokens/s",
               f"{n_attention} attention modules on the slow path; {tps_note}")

# %%
profile_original, profile_custom = comparison.profile(helpers.ORIGINAL), comparison.profile(SLOW)
helpers.record("attention.launches_per_token_custom", profile_custom.launches, "launches", helpers.launch_note())
predicted_launches = profile_original.launches + extra_per_token
predicted_ms = budget = None
if helpers.HAS_GPU:
    torch_us = ((profile_original.wall_ms_per_token - profile_original.gpu_busy_ms_per_token) * 1e3
                / profile_original.launches)

    def price_ours(shape) -> float:
        """p_ours from the per-head loop at ``shape``: its host µs per call, less its PyTorch launches at
        ``torch_us``, over its launches of ours (so that the budget charges a call what it cost on its own)."""
        t = times[shape, "slow"]
        ours = timing.query(f"shape == '{shape}' and version == 'slow'")["our launches"].iloc[0]
        return (1e3 * t.host_ms - (t.launches - ours) * torch_us) / ours

    ours_us, blog_us = price_ours("qwen"), price_ours("blog")  # Qwen3's shape is the one the model runs
    # where the loop's PyTorch launches at the model's price already exceed its whole host time
    no_budget = (f"There is no wall-time prediction: the loop's {qwen_slow.launches - qwen_slow_ours:.0f} PyTorch "
                 f"launches at {torch_us:.1f} host µs each cost more than its whole host time per call, "
                 f"{1e3 * qwen_slow.host_ms:.1f} µs, which leaves no positive price for a launch of ours. ")
    if ours_us <= 0:
        print(no_budget)
    else:
        # both prices measured here, not fitted: fitted_on names where each came from (chapter 8 prices module calls)
        budget = helpers.LaunchBudget(torch_us=torch_us, ours_us=ours_us,
                                      fitted_on=("original", "host time per call of the per-head attention"))
        predicted_ms = budget.predict_ms(profile_custom)
rows = []
for name, p in (("original", profile_original), (SLOW, profile_custom)):
    row = {"model": name, "wall ms per decoded token": round(p.wall_ms_per_token, 2),
           "launches per token": p.launches, "our launches per token": p.project_launches_per_token,
           "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token, 2),
           "predicted launches per token": "" if name == "original" else f"{predicted_launches:,.0f}"}
    if budget is not None:
        row["predicted wall ms per decoded token"] = ("" if name == "original" else f"{predicted_ms:.2f}")
        error = round(100 * (predicted_ms / p.wall_ms_per_token - 1), 1) + 0.0  # + 0.0: never "-0.0"
        row["error %"] = "" if name == "original" else f"{error:+.1f}"
    rows.append(row)
print(f"wall ms per decoded token: {profile_custom.note}"  # in CPU mode the note says what the launches count
      + (f"; launches and GPU-busy ms: {helpers.launch_note()}" if helpers.HAS_GPU else "")
      + (f"; price of a PyTorch launch from the original: ({profile_original.wall_ms_per_token:.2f} wall ms - "
         f"{profile_original.gpu_busy_ms_per_token:.2f} GPU-busy ms) / {profile_original.launches:,.0f} = "
         f"{torch_us:.1f} host µs; price of a launch of ours from the per-head loop at Qwen3's shape: "
         f"({1e3 * qwen_slow.host_ms:.1f} host µs per call - {qwen_slow.launches - qwen_slow_ours:.0f} PyTorch "
         f"launches x {torch_us:.1f} µs) / {qwen_slow_ours:.0f} launches of ours = {ours_us:.1f} host µs (the blog's "
         + (f"shape, priced the same way: {blog_us:.1f} µs, not used: the model runs at Qwen3's shape)"
            if blog_us > 0 else "shape leaves no positive price that way)")
         if budget is not None else ""))
helpers.show(pd.DataFrame(rows).set_index("model"))

# %%
heads = model.config.num_attention_heads
by_hand = n_attention * heads * 3
floor = comparison.floor
measured_ms = profile_custom.wall_ms_per_token
tps_original, tps_slow = comparison.tokens_per_s[helpers.ORIGINAL], comparison.tokens_per_s[SLOW]
text = (
    f"With the computation inside {n_attention} attention modules swapped, round by round the patched model's "
    f"generations took **{comparison.ratios[SLOW].median_text}x** the original's (quartiles "
    f"{comparison.ratios[SLOW].quartiles}), against an A/A floor of "
    f"{floor.median_text} ({floor.quartiles}): **{slowdown.text}**. In tokens/s, prefill included, "
    f"the original ran at {tps_original:.2f} and the patched model at {tps_slow:.2f}, each its own median over the "
    f"{len(comparison.orders)} rounds; their quotient, {tps_original / tps_slow:.2f}, is a different statistic "
    "from the median of per-round ratios, which cancels the host's drift between rounds and is what the verdict "
    f"reads. Per decoded token, from the same rounds: {profile_original.wall_ms_per_token:.2f} wall ms for the "
    f"original and {measured_ms:.2f} for the patched model ({comparison.decode_ratio(SLOW).median:.2f}x; the ratio "
    "of whole generations above also carries the prefill).\n\n"
)
if budget is not None:
    err_pct = 100 * (predicted_ms / measured_ms - 1)
    size = f"{abs(err_pct):.1f}%" if abs(err_pct) < 100 else f"{abs(err_pct):.0f}%"
    text += (f"**The prediction.** The launch budget gave **{predicted_ms:.2f} wall ms per decoded token** against "
             f"**{measured_ms:.2f}** measured: "
             + ("equal to within 0.05%, " if abs(err_pct) < 0.05 else
                f"{size} {'under' if err_pct < 0 else 'over'} the measurement, "))
    text += (f"within the series' {100 * PREDICTION_BAR:.0f}%. " if abs(err_pct) <= 100 * PREDICTION_BAR else
             f"outside the series' {100 * PREDICTION_BAR:.0f}%. ")
    if abs(err_pct) > 100 * helpers.MIN_EFFECT:  # beyond the smallest effect the series calls real: say why
        ours = profile_custom.project_launches_per_token
        torch_part = (profile_custom.launches - ours) * torch_us / 1e3
        implied_us = (measured_ms - profile_custom.gpu_busy_ms_per_token - torch_part) * 1e3 / ours
        text += (f"With its {profile_custom.launches - ours:,.0f} PyTorch launches at {torch_us:.1f} host µs "
                 f"({torch_part:.2f} ms of host time) and {profile_custom.gpu_busy_ms_per_token:.2f} GPU-busy ms, the "
                 f"measurement leaves {implied_us:.1f} host µs per launch of ours inside `generate()`, against the "
                 f"{ours_us:.1f} µs the loop's own host time gave them: "
                 f"{abs(implied_us - ours_us) * ours / 1e3:.2f} wall ms per token that the budget "
                 + ("does not see" if implied_us > ours_us else "counts and the model does not spend")
                 + ". ")
    # the loop's price is one host reading; the blog's shape read the same loop once more
    if blog_us > 0:
        alt_ms = helpers.LaunchBudget(torch_us=torch_us, ours_us=blog_us, fitted_on=()).predict_ms(profile_custom)
        text += (f"That price of ours rests on one host reading of the loop. Priced from the blog shape's reading "
                 f"instead ({blog_us:.1f} µs per launch of ours), the budget would give {alt_ms:.2f} wall "
                 f"ms per decoded token ({helpers.signed_pct(100 * (alt_ms / predicted_ms - 1))} against the "
                 f"prediction above, {helpers.signed_pct(100 * (alt_ms / measured_ms - 1))} against the "
                 "measurement)"
                 + (": the prediction moves with the single host reading it rests on. "
                    if abs(alt_ms / predicted_ms - 1) > helpers.MIN_EFFECT else
                    f": within the series' {100 * helpers.MIN_EFFECT:.0f}% of it, so the second reading hardly "
                    "moves the prediction. "))
    text += (f"Of the predicted time, {budget.host_ms(profile_custom):.2f} ms are host work "
             f"({profile_custom.launches - profile_custom.project_launches_per_token:,.0f} PyTorch launches at "
             f"{torch_us:.1f} µs, {profile_custom.project_launches_per_token:,.0f} of ours at {ours_us:.1f} µs) and "
             f"{profile_custom.gpu_busy_ms_per_token:.2f} ms GPU-busy time. ")
    busy = {name: p.gpu_busy_ms_per_token / p.wall_ms_per_token
            for name, p in (("original", profile_original), ("patched", profile_custom))}
    text += (f"The GPU was busy for {100 * busy['patched']:.0f}% of the patched model's wall time per decoded token "
             f"({100 * busy['original']:.0f}% for the original): "
             + ("the host paced the decode step, as expected. " if busy["patched"] < 0.5 else
                "the GPU's own work took most of the step, so the host did not pace it alone, against the "
                "expectation. "))
elif helpers.HAS_GPU:
    text += no_budget
else:
    text += ("In CPU mode there is no wall-time prediction: the budget needs every CUDA launch and the GPU-busy "
             "time per token. ")
text += (
    f"Launches per token: {predicted_launches:,.0f} predicted, **{profile_custom.launches:,.0f}** measured"
    + (" (the same). " if abs(profile_custom.launches - predicted_launches) < 1 else
       f" ({profile_custom.launches - predicted_launches:+.0f}: the model's attention calls launch a different "
       "number of kernels than the microbenchmark's). ")
    + f"Our own kernels account for {profile_custom.project_launches_per_token:,.0f} launches per token, against "
    f"{n_attention} modules x {heads} heads x 3 = {by_hand:,} counted by hand"
    + (": the count matches. " if abs(profile_custom.project_launches_per_token - by_hand) < 1 else
       ": the two differ, so something launches more (or fewer) of our kernels than the loop alone. ")
    + "The blog gives no tokens/s for attention alone, only for the full custom stack (next chapter)."
)
helpers.md(text)

# %% [markdown]
# The original's own times here need not match chapter 1's: the host's pace drifts between processes and
# over a long run of the series, which is why this chapter reads only ratios within one run's rounds. Set
# them beside chapter 1's anyway (`baseline.wall_ms_per_token` in the results):

# %%
helpers.md(helpers.beside_baseline(profile_original))

# %% [markdown]
# ## Takeaway
#
# - Attention for one new token is scores, scale, mask, softmax and a weighted sum; with GQA, pairs of
#   query heads read the same keys and values.
# - Implementations that agree to within rounding can differ widely in speed. Timing the same call on two
#   clocks, GPU time and host time per call, tells you whether the arithmetic or the launching is to blame.
# - A loop over heads in Python multiplies the launches by the number of heads, and at decode time each
#   of those kernels has only a sliver of work. It is the first thing an optimiser removes: one fused
#   kernel over all heads.

# %% [markdown]
# ## Try it yourself
#
# Each exercise changes one thing in the slow path's input, at Qwen3's decode shape, and times the per-head
# loop against itself unchanged, in shuffled rounds with an A/A floor (`helpers.compare_calls`: GPU time,
# so the host's launching is out of the clock; interpreter time in CPU mode). Write your guess in `answer`
# (`"faster"`, `"slower"` or `"same"`, meaning within noise) before you run the cell; `helpers.check_answer`
# says whether the measurement agrees. Each cell takes a few seconds.

# %%
QWEN = SHAPES["qwen"]


def slow_call(**change):
    """The per-head loop at Qwen3's decode shape, with ``change`` overriding sizes of the shape, on fresh data."""
    shape = {**QWEN, **change}
    q, k, v = make_qkv(**shape, seed=7)
    scale = 1 / math.sqrt(shape["D"])
    return lambda: slower_kernels.attention_slow(q, k, v, scale, True)


# %% [markdown]
# **1. Half the heads.** Loop over half as many query heads (and half the KV heads, so that two query
# heads still share one). The loop launches three of our kernels per query head, plus the small PyTorch ops
# around them, each with a sliver of work, and on the GPU clock every kernel has a floor of its own
# (chapter 2). What happens to the GPU time?
#
# *What to expect, and why:* faster, about twice as fast. Each head's kernels keep the same work; only
# their number halves, and with every kernel near its floor the GPU time follows the kernel count. That
# holds on a T4 as on an H200 (on either, the kernels of one head are far from filling the GPU), and it is
# far from the 5% threshold.

# %%
answer = None  # your guess: "faster", "slower" or "same"
half = {"Hq": QWEN["Hq"] // 2, "Hkv": QWEN["Hkv"] // 2}
cmp = helpers.compare_calls({"half the heads": slow_call(**half)}, reference=slow_call())
measured = helpers.check_answer(answer, cmp.ratios["half the heads"], cmp.floor,
                     change=f"query heads {QWEN['Hq']} -> {half['Hq']} in the per-head loop", clock=cmp.clock)

# %% [markdown]
# **2. A four times longer context.** Keep the heads and give each one four times as many cached keys and
# values. The number of launches does not change; each kernel reads four times the bytes and does four times
# the arithmetic. The tables above say how far each of these kernels is from its bytes' read time: is a
# kernel this small paced by its bytes yet?
#
# *What to expect, and why:* slower, by more than 1x and less than 4x. Not by the bytes: one head's keys are
# a few hundred KiB even at four times the context, a fraction of a microsecond at an H200's bandwidth (on a
# T4, with a fifteenth of that bandwidth, the bytes start to count). What grows is work done in sequence: the
# second matmul ($p V$) walks the keys 32 at a time in one program per 64 output columns, so its loop runs four
# times as long, and the softmax's single program now holds a row four times as long. The scores matmul
# spreads its four times the work over four times the programs, side by side on idle SMs, and every kernel
# keeps its fixed floor, so the total grows by less than 4x.

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"4x the context": slow_call(T=4 * QWEN["T"])}, reference=slow_call())
measured = helpers.check_answer(answer, cmp.ratios["4x the context"], cmp.floor,
                     change=f"cached keys {QWEN['T']} -> {4 * QWEN['T']} in the per-head loop", clock=cmp.clock)

# %% [markdown]
# Next, chapter 6 switches everything on at once: RMSNorm, every projection and attention.
