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
# # Chapter 7: Does the slowdown hold as the context grows?
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/07_context_sweep.ipynb)
#
# In this chapter you will learn:
# - how a generation splits into the **prefill** (the whole prompt in one pass) and **decode** (one token
#   per step), and how to time the two phases apart from the same rounds;
# - why the blog's T4 could see the slowdown ease as the prompt grew and an H200 cannot, from a few lines of
#   FLOP arithmetic;
# - how many rounds a sweep needs before its noise threshold is smaller than the trend it looks for.
#
# ## What you will see
#
# The slowdown holds. On the committed H200 run, the all-custom model was 4.46x slower than the original at a
# 128-token prompt and 4.47x slower at 1,024 tokens, with no consistent trend in between. Both models'
# prefills grew a little with the prompt, in step: on the committed H200 run the original's took 21.53 ms at
# 128 tokens and 23.01 ms at 1,024, the custom model's 91.03 ms and 99.19 ms. Each prefill cost about what one
# decoded token did. The reason is arithmetic: a 1,024-token prefill is about 1 TFLOP, which an H200 does in
# about a millisecond, hidden behind the tens of milliseconds the host spends launching the pass's kernels. On a
# T4 the custom model's matmuls run on the ordinary FMA cores, and the same prefill needs at least about 126 ms
# there, most of a decode step: that is where a prefill can weigh on a T4, though by the flop alone only a
# little of the blog's 18% fall ("How much arithmetic is a prefill?" below). (The H200 could not reach the
# model hub and ran Qwen3-0.6B's exact architecture with seeded random weights: timings depend on the shapes,
# not on the weights' values.)
#
# ## The blog's claim (T4)
#
# The blog ran this sweep on a T4: every custom kernel on, 32 new tokens per generation, prompts from 128 to
# 1,024 tokens. The all-custom model stayed between 3.2x and 3.9x slower than the original, a little less slow
# at the longer prompts, and it stayed near 6 tokens/s throughout. The post gives the range, not a table, and no
# noise floor; from 3.9x to 3.2x is a fall of about 18%. It put the fall down to the prefill: the original's
# attention costs more as the context grows, while the custom model is held back by its kernel launches
# whatever the context.

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
import matplotlib.pyplot as plt
import pandas as pd

import helpers

helpers.show_env()
ORIGINAL, AGAIN, CUSTOM = helpers.ORIGINAL, helpers.ORIGINAL_AGAIN, "all custom"
PROMPTS = helpers.SIZES.context_prompts  # 128, 256, 512 and 1024 tokens at full size, as the blog swept
# New tokens per generation and rounds per prompt length, by mode: many short rounds (see "How many rounds")
N, ROUNDS = helpers.SIZES.new_tokens_context, helpers.SIZES.rounds_sweep
model, tokenizer, _ = helpers.load_model()
print("prompt lengths:", PROMPTS, "| new tokens:", N, "| rounds per length:", ROUNDS)
print("all custom:", {k: sorted(v) if isinstance(v, set) else v for k, v in helpers.ALL_CUSTOM.items()})

# %% [markdown]
# ## The idea
#
# A generation has two phases of very different shapes.
#
# - **Prefill**: the whole prompt goes through the model in one forward pass. Its matmuls have as many rows as
#   the prompt has tokens, and attention compares every prompt token with every earlier one, so its arithmetic
#   grows with the prompt (attention's part with its square). The number of kernels it launches does not.
# - **Decode**: one token per step. Each step multiplies one row through every weight and reads the KV cache,
#   which grows by one token per step; the kernel count per step is fixed.
#
# The model under test is chapter 6's full stack, `helpers.ALL_CUSTOM` (printed above): the two-pass RMSNorm of
# chapter 3, our tiled matmul in every projection (chapter 4) and the per-head attention loop (chapter 5).
# Chapter 6 checks that it computes the same function as the original (its logits agree within fp16
# tolerance), counts its launches (about twice the original's per token) and finds the GPU idle for most of
# each step: at batch size 1 both models are paced by the host launching kernels, not by the GPU's arithmetic.
#
# So the question becomes: as the prompt grows from 128 to 1,024 tokens, does the prefill's extra arithmetic
# ever outgrow the launches it hides behind? If it does, the original (fast kernels, few launches) feels it
# first in relative terms, and the slowdown falls, as the blog saw on its T4.
#
# ## How much arithmetic is a prefill?
#
# Count it before measuring. Every prompt token goes through the seven projections of each of the 28 decoder
# layers (q, k, v, o; gate, up, down): 0.44 billion weights, each one multiply and one add per token. Causal
# attention adds, per layer, $q \cdot k^T$ and $p \cdot v$ over half of the tokens x tokens pairs. Divide by a
# GPU's fp16 peak (`helpers.NOMINAL_TFLOPS`) and you get the least time the prefill's arithmetic can take.
# A T4 has two peaks: 65 TFLOP/s on its tensor cores, which cuBLAS (the original's matmuls) uses, and about
# 8 TFLOP/s on its ordinary FMA cores, which is where Triton's `tl.dot` lands on a T4 (sm_75; chapter 4 shows
# the `fma` instructions in its PTX). On an H200 (sm_90) both models' matmuls use the tensor cores, 989 TFLOP/s.

# %%
def prefill_flops(tokens, cfg=helpers.QWEN3_0_6B):
    """FLOPs of one forward pass over ``tokens`` prompt tokens.

    2 x weights x tokens for the decoder layers' projections (a multiply and an add per weight per token), plus
    causal attention: q.k^T and p.v, each 2 x head_dim FLOPs per (query, key) pair, over tokens^2 / 2 pairs, for
    every query head: 2 x tokens^2 x (heads x head_dim) per layer. Left out: the embedding (a lookup) and the
    lm_head (generate() asks for the last position's logits only)."""
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    weights = layers * (h * q + 2 * h * kv + q * h + 3 * h * i)  # q, k, v, o; gate, up, down: 0.44 B
    return 2 * weights * tokens + 2 * layers * tokens ** 2 * q


(t4_tensor, t4_fma), (h200_tensor, _) = helpers.NOMINAL_TFLOPS["t4"], helpers.NOMINAL_TFLOPS["h200"]
paths = {"T4 tensor cores (cuBLAS: the original)": t4_tensor,
         "T4 FMA cores (Triton on sm_75: the custom model)": t4_fma,
         "H200 tensor cores (both models)": h200_tensor}
helpers.show(pd.DataFrame([{"GPU and path": path, "fp16 peak TFLOP/s": peak,
                            **{f"{L} tokens ({prefill_flops(L) / 1e9:.0f} GFLOP): ms at peak":
                               prefill_flops(L) / (peak * 1e9) for L in (128, 1024)}}  # FLOP / (FLOP/ms)
                           for path, peak in paths.items()]))

# %% [markdown]
# Set those times beside a decode step. On the blog's T4 the original made 22.58 tokens/s and the custom model
# 6.29 in its final-stack run: about 44 ms and 160 ms per token. The custom model's prefill arithmetic grows
# from at least about 14 ms at 128 tokens to at least about 126 ms at 1,024, most of one of its decode steps:
# somewhere in the blog's sweep the T4's prefill stops being a pass of launches and becomes a pass of
# arithmetic. The original's grows from about 2 to about 16 ms on the tensor cores, a third of its step. On the
# H200 the whole 1,024-token prefill is about 1 ms of arithmetic, beside passes that cost about 20 ms
# (original) and 90 to 100 ms (custom) of launches: at every length in the sweep the prefill stays a pass the
# size of a decode step. The blog's mechanism has room to act on a T4 and none on an H200.
#
# This arithmetic says where the prefill can matter, not that it accounts for the blog's whole 18%. At these
# peaks, going from 128 to 1,024 tokens adds about 2% to the custom model's 32-token generation on a T4 and
# about 1% to the original's, which nearly cancel in the ratio. By arithmetic alone, the fall would have to come
# from kernels running far below their peaks at these shapes (the original's above all), or from noise that a
# four-point sweep with no A/A floor cannot rule out.
#
# The decode steps barely change with the context on either GPU: at 1,024 tokens the KV cache is 28 layers x 2
# (K and V) x 8 heads x 128 x 2 bytes x 1,024 = 117 MB, about 25 µs of reading at the H200's 4.8 TB/s and
# about 0.4 ms at the T4's 320 GB/s.
#
# ## Predict
#
# On the H200:
#
# - **Prefill, both models**: flat. Its arithmetic grows ninefold from 128 to 1,024 tokens but stays near 1 ms.
# - **Per decoded token, both models**: flat; the longer KV cache is microseconds of reading.
# - **The slowdown**, whole generation, prefill and per decoded token: flat, within the noise threshold.
#
# On a T4 (Colab's free GPU), expect the custom model's prefill to grow by most of a decode step from the
# shortest prompt to the longest, the original's by less.
#
# ## Measure
#
# Each prompt length is one `helpers.compare_configs` run: the original, the original again (the A/A floor)
# and the all-custom model, one greedy generation each per round, in shuffled order. Right after each
# generation the same model generates one token from the same prompt: one forward pass, the prefill alone. Its
# wall time per decoded token is (N-token time - 1-token time) / (N - 1), round by round; every slowdown is a
# ratio taken within a round and judged against its own A/A floor ([how we measure](01_setup.ipynb#How-we-measure)).
#
# ### How many rounds?
#
# A sweep can only see a trend larger than its noise threshold, which is twice the A/A floor's distance from 1
# (at least 5%). An earlier H200 run of this sweep timed 4 rounds of 32 new tokens at each length; its A/A floors
# landed as far out as 0.74 and 1.15, thresholds of 52% and 30%, far too loose for an 18% trend. Counted from
# that run's times (about 1.0 s for the original's 32 tokens, 4.9 s for the custom model's), one round of 32
# tokens costs about 7 s on the H200. So this sweep generates 8 new tokens instead: a round takes about a second, and
# 16 rounds at each of the four lengths fit in about the same two minutes as the earlier run's 4. Shorter rounds
# leave the host less time to drift between the original and its copy, and the median of 16 rounds moves less
# than the median of 4. On the H200 a prefill costs about one decode step, so tokens/s hardly depends on the
# number of new tokens; on a T4, 8 new tokens weigh the prefill four times more than the blog's 32, which makes
# its growth easier to see.
#
# The prompt lengths run one after another, so an absolute time (ms) also carries the host's drift from one
# length to the next; a slowdown, taken within each round, cancels it. Read the trend from the slowdowns.

# %%
runs = {L: helpers.compare_configs(model, {CUSTOM: helpers.ALL_CUSTOM}, prompt_len=L, new_tokens=N,
                                   rounds=ROUNDS, tokenizer=tokenizer) for L in PROMPTS}

# %%
def ms(seconds):
    """Median and quartiles of per-round times, in ms."""
    return helpers.Ratio.of([s * 1e3 for s in seconds])


def prefill_ratio(c, name):
    """Round by round, ``name``'s prefill (its one-token generation) over the original's (above 1: slower)."""
    return helpers.Ratio.of([a / b for a, b in zip(c.first_seconds[name], c.first_seconds[ORIGINAL])])


times = pd.DataFrame([{"prompt": L, "tokens/s original": c.tokens_per_s[ORIGINAL],
                       "tokens/s custom": c.tokens_per_s[CUSTOM],
                       "prefill ms original": c.prefill_ms(ORIGINAL), "prefill ms custom": c.prefill_ms(CUSTOM),
                       "ms per decoded token original": c.decode_ms(ORIGINAL).median,
                       "ms per decoded token custom": c.decode_ms(CUSTOM).median} for L, c in runs.items()])
helpers.show(times)

slow = {  # phase -> ({prompt: custom / original, per round}, {prompt: the A/A floor it is judged against})
    "whole generation": ({L: c.ratios[CUSTOM] for L, c in runs.items()}, {L: c.floor for L, c in runs.items()}),
    "prefill": ({L: prefill_ratio(c, CUSTOM) for L, c in runs.items()},
                {L: prefill_ratio(c, AGAIN) for L, c in runs.items()}),
    "per decoded token": ({L: c.decode_ratio(CUSTOM) for L, c in runs.items()},
                          {L: c.decode_ratio(AGAIN) for L, c in runs.items()}),
}
slowdowns = pd.DataFrame([{"prompt": L, "phase": phase, "slowdown": r[L].median, "quartiles": r[L].quartiles,
                           "A/A floor": f[L].median, "verdict": helpers.verdict(r[L], f[L]).text}
                          for L in PROMPTS for phase, (r, f) in slow.items()])
helpers.show(slowdowns)
helpers.save_sweep(times.merge(slowdowns, on="prompt"), "context_sweep")

# %% [markdown]
# The first table gives each model's times at each length; the second, each phase's slowdown with its quartiles
# and the A/A floor it is judged against. Now read the trend from every point at once, not from the two ends:
# `helpers.read_trend` calls a quantity "grew" or "shrank" only when no two lengths move against each other by
# more than the noise threshold and the change from the first length to the last is outside the noise
# (`helpers.verdict` on last over first, with the widest quartile bounds the two allow, against the noisier
# end's A/A floor). Otherwise it reads "no consistent trend".

# %%
positive = lambda points: all(p.median > 0 for p in points.values())  # a CPU-mode decode can drown in noise
series = {f"slowdown, {phase}": (r, f, "x") for phase, (r, f) in slow.items()}
for name in (ORIGINAL, CUSTOM):
    series[f"prefill ms, {name}"] = ({L: ms(c.first_seconds[name]) for L, c in runs.items()}, slow["prefill"][1], "ms")
    series[f"ms per decoded token, {name}"] = ({L: c.decode_ms(name) for L, c in runs.items()},
                                              slow["per decoded token"][1], "ms")
trends = {q: helpers.read_trend(points, floors, unit) for q, (points, floors, unit) in series.items() if positive(points)}
helpers.show(pd.DataFrame([{"quantity": q, "median at each prompt length": t.points, "last / first": t.change.median_text,
                            "quartile bounds": t.change.quartiles, "threshold": f"{100 * t.verdict.noise:.0f}%",
                            "verdict": t.verdict.text, "reading": t.word} for q, t in trends.items()]))
t = trends["slowdown, whole generation"]
print(f"slowdown, {PROMPTS[-1]} / {PROMPTS[0]} tokens: {t.change.median_text}x, quartile bounds {t.change.quartiles}, "
      f"{t.verdict.text} (threshold {100 * t.verdict.noise:.0f}%):",
      "as on the H200 run" if t.word == "no consistent trend" else "unlike the H200 run, see What it shows")

# %%
def tokens_per_s(c, name):
    """tokens/s of ``name``: the comparison's median, with the quartiles of the per-round tokens/s."""
    r = helpers.Ratio.of([c.new_tokens / s for s in c.seconds[name]])
    return helpers.Ratio(c.tokens_per_s[name], r.low, r.high, r.values)


for L, c in runs.items():
    note, rounds = f"prompt {L}, {N} new tokens", f"median of {len(c.orders)} shuffled rounds"
    helpers.record(f"context.{L}.tps_original", c.tokens_per_s[ORIGINAL], "tokens/s",
                   f"{note}; {rounds}, prefill included", spread=tokens_per_s(c, ORIGINAL))
    helpers.record(f"context.{L}.tps_custom", c.tokens_per_s[CUSTOM], "tokens/s",
                   f"{note}, every custom kernel on; {rounds}, prefill included", spread=tokens_per_s(c, CUSTOM))
    c.record(CUSTOM, f"context.{L}.ratio", note)
    c.record(AGAIN, f"context.{L}.floor", note + "; the original against itself")
    for name, tag in ((ORIGINAL, "original"), (CUSTOM, "custom")):
        helpers.record(f"context.{L}.prefill_ms_{tag}", c.prefill_ms(name), "ms",
                       f"wall time of a one-token generation, prompt {L}, right after each {N}-token one; {rounds}",
                       spread=ms(c.first_seconds[name]))

# %%
def errorbars(ax, points, label, **style):
    """Medians with their quartiles as error bars, one point per prompt length."""
    med = [points[L].median for L in PROMPTS]
    err = [[max(0.0, m - points[L].low) for L, m in zip(PROMPTS, med)],  # clipped: a median of tokens/s taken
           [max(0.0, points[L].high - m) for L, m in zip(PROMPTS, med)]]  # over the times can sit outside
    ax.errorbar(PROMPTS, med, yerr=err, capsize=4, label=label, **style)


fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.8))
for (phase, (ratios, _)), marker in zip(slow.items(), "so^"):
    errorbars(left, ratios, f"all custom / original, {phase}", marker=marker)
errorbars(left, slow["whole generation"][1], "original / original (A/A floor)", marker="o", color="gray")
left.axhline(1, color="black", linewidth=0.8)
left.set(ylim=(0, None), ylabel="time ratio to the original (x slower)", title="Does the slowdown hold as the prompt grows?")
for name, color in ((ORIGINAL, "tab:blue"), (CUSTOM, "tab:red")):
    errorbars(right, {L: ms(c.first_seconds[name]) for L, c in runs.items()}, f"prefill, {name}", marker="s",
              color=color)
    errorbars(right, {L: c.decode_ms(name) for L, c in runs.items()}, f"one decoded token, {name}", marker="o",
              color=color, linestyle="--")
right.set_yscale("log")
helpers.plain_log_ticks(right, "y")
right.set(ylabel="wall ms", title="Prefill against one decoded token")
for ax in (left, right):
    ax.set_xscale("log", base=2)
    helpers.plain_log_ticks(ax, "x", PROMPTS)
    ax.set_xlabel("prompt length (tokens)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
fig.suptitle(f"{N} new tokens, median of {ROUNDS} shuffled rounds per point; error bars: the middle half of the rounds",
             fontsize=9)
helpers.save_figure(fig, "context_sweep")
plt.show()

# %% [markdown]
# ## What it shows
#
# **The slowdown held.** On the committed H200 run the all-custom model's whole generations were 4.46x slower
# at 128 tokens, 4.68x at 256, 4.60x at 512 and 4.47x at 1,024, and their A/A floors were 1.002, 1.024, 0.9971
# and 1.000. Read from every point, that is no consistent trend; and nothing in it falls the way the blog's T4
# sweep did. The figure's left panel shows it: the three slowdowns stay level well above the A/A floor.
#
# **Both phases crept up with the prompt, in step.** On the committed H200 run the original took 19.34 ms per
# decoded token at 128 tokens and 21.55 ms at 1,024, the custom model 88.78 ms and 97.36 ms, and the trend table
# reads all four absolute times as grown, by 7% to 11%. The prediction of flat times missed. The KV cache
# (microseconds) and the prefill's extra arithmetic (about a millisecond) cannot explain about 9 ms more per
# decoded token in the custom model; this run does not say what does (the lengths ran one after another, so the
# host's drift is one suspect). Each model's prefill still cost about as much as one of its decoded tokens at
# every length: in the right panel each model's two lines lie close together. A pass over 1,024 tokens costs the
# H200 about as much wall time as a pass over one, because both are set by the kernels the host launches, the
# same number at every length. Both models grew by about the same fraction, so the slowdown did not fall.
#
# **The noise decides what a sweep can say.** A flat reading means something only when the noise threshold is
# smaller than the trend you are looking for. Check the threshold column of the trend table: on the committed
# H200 run, with 16 short rounds per length, it sat at the 5% minimum for every quantity, well under the blog's
# 18%, so the flat slowdown rules out a trend as large as the blog's. Where one length's A/A floor strays far
# from 1 (the host drifted during that comparison), its threshold widens with it: run that length again before
# reading the trend.
#
# ## Beside the blog's T4 numbers

# %%
side = helpers.compare("context.")
side = side[side["id"].str.contains("ratio|tps")].drop(columns="label")
helpers.show(side.assign(L=side["id"].str.extract(r"(\d+)", expand=False).astype(float)).sort_values(["L", "id"])
             .drop(columns="L").reset_index(drop=True))

# %% [markdown]
# The blog's T4 slowdown ranged from 3.2x to 3.9x; the committed H200 run's from 4.46x to 4.68x. In the blog's
# final-stack run on the T4 the original made 22.58 tokens/s, and its custom model stayed near 6 in the sweep.
# On the committed H200 run the original made 50.89 tokens/s at 128 prompt tokens and the custom model 11.29:
# both are faster than on the T4, the original more than twice as fast and the custom model less than twice, so
# the H200's slowdown is the larger.
# Both models are launch-bound on either machine, so these tokens/s measure the host that launches the kernels
# as much as the GPU that runs them.
#
# ## Try it yourself
#
# Each exercise changes **one** thing in a single attention call, the part of the model whose work grows with
# the context, and times it with `helpers.compare_calls` on the **GPU clock** (CUDA-graph replay; in CPU mode,
# the interpreter's wall time): the host's launches are left out, so unlike the sweep above, the answer is
# about the GPU's work alone. The shapes are this model's heads at the sweep's shortest and longest prompts.
# Set `answer` to your guess and run the cell.

# %%
import torch
import torch.nn.functional as F

import slower_kernels

hq, hkv, d = model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_dim
short, long = PROMPTS[0], PROMPTS[-1]


def qkv(queries, keys, heads=hq, kv_heads=hkv):
    """Random q [1, heads, queries, D] and k, v [1, kv_heads, keys, D] on the model's device and dtype."""
    return tuple(torch.randn(1, h, n, d, device=helpers.DEVICE, dtype=helpers.DTYPE)
                 for h, n in ((heads, queries), (kv_heads, keys), (kv_heads, keys)))


# %% [markdown]
# **1. A decode step at a longer context.** Our per-head loop for one new token, against the keys of the
# shortest prompt, then of the longest (8 times as many at full size). Each head's matmuls read that many more
# keys and values, but every kernel also has a fixed cost of starting and finishing (a few µs, chapter 5) that
# does not grow. Faster, slower or the same, and by how much?

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
at_short, at_long = qkv(1, short), qkv(1, long)
cmp = helpers.compare_calls({"longer context": lambda: slower_kernels.attention_slow(*at_long, scale=d ** -0.5, causal=True)},
                            reference=lambda: slower_kernels.attention_slow(*at_short, scale=d ** -0.5, causal=True))
measured = helpers.check_answer(answer, cmp.ratios["longer context"], cmp.floor,
                                change=f"per-head loop, one query, {long} keys instead of {short}", clock=cmp.clock)

# %% [markdown]
# **2. The original's prefill attention at a longer prompt.** PyTorch's fused `scaled_dot_product_attention`
# (the original's attention, chapter 5) over the whole prompt, causal, at the shortest and the longest prompt:
# 64 times the work at full size. At the shortest prompt the kernel has only a few tiles of queries for the
# GPU's many multiprocessors (132 on an H200, 40 on a T4); the tiles of a longer prompt first fill the idle ones.
# Expect **slower**: but how far below 64x do you expect it to stay, and would a T4 stay as far below?

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
pre_short, pre_long = qkv(short, short), qkv(long, long)
sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hq != hkv)
cmp = helpers.compare_calls({"longer prompt": lambda: sdpa(*pre_long)}, reference=lambda: sdpa(*pre_short))
measured = helpers.check_answer(answer, cmp.ratios["longer prompt"], cmp.floor,
                                change=f"SDPA prefill over {long} tokens instead of {short}", clock=cmp.clock)

# %% [markdown]
# **3. On paper.** Redo the arithmetic table for a 4,096-token prompt with `prefill_flops(4096)`. At what
# prompt length would the custom model's prefill arithmetic on the H200 reach one of its decode steps (about
# 90 ms)? (Mind attention's square, and the model's 40,960-token limit.)
#
# Chapter 8 gathers every number of the series into one table and reads the lessons off it.
#
# ## Takeaway
#
# - A generation is one prefill plus decode steps: time them apart from the same rounds, and judge every
#   slowdown within its round against the A/A floor.
# - On an H200 a 1,024-token prefill is about a millisecond of arithmetic behind tens of milliseconds of
#   launches, so the prompt length does not move the slowdown; on a T4's FMA cores it is most of a decode step.
# - A sweep sees only trends larger than its noise threshold: count the rounds it needs before reading one.
