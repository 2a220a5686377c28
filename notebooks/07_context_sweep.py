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
# - how the original and the fully custom model behave as the prompt gets longer;
# - how to split a generation's time into the prefill (the prompt, in one pass) and the decode (one
#   token at a time);
# - which of the two grows with the context, and which stays pinned by launch overhead;
# - how to read a ratio that moves: which part of the work changed, and which did not.

# %% [markdown]
# ## The idea
#
# A generation has two phases with very different shapes.
#
# - **Prefill**: the whole prompt goes through the model in one forward pass. Its matmuls have as many
#   rows as the prompt has tokens, and attention compares every prompt token with every earlier one, so
#   its work grows with the prompt (attention's part quadratically). The number of kernels it launches
#   hardly depends on the prompt's length.
# - **Decode**: one token per step. Each step reads all the weights and the KV cache, which grows by one
#   token per step; the kernel count per step is fixed.
#
# We fix the number of new tokens and grow the prompt, with every custom kernel switched on. If the
# custom model's time is dominated by launches, its decode time per token should barely move with the
# context, while the parts of the original that do real work (the prefill above all) grow. The
# `measure_tps` helper already times a one-token generation (that is the prefill) next to the full one,
# so decode time is simply total time minus prefill time.

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
import matplotlib.pyplot as plt
import pandas as pd

import helpers

helpers.show_env()
SIZES = helpers.SIZES
FULL = helpers.ALL_CUSTOM  # two-pass RMSNorm, every projection, slow attention

model, tokenizer, description = helpers.load_model()
print(description)
N = SIZES.new_tokens_context
print(f"prompt lengths: {SIZES.context_prompts}; new tokens per run: {N}; repeats: {SIZES.repeats}")

# %% [markdown]
# ## Predict
#
# - **Original, prefill**: more tokens per pass means more work; on a GPU a short prompt still leaves
#   most of the chip idle, so the growth should start slowly and then pick up.
# - **Custom, prefill**: the same work, done by less efficient kernels, plus the attention loop launching
#   three kernels per head whatever the length. It should also grow, from a higher floor.
# - **Decode per token, both**: the KV cache gets longer, but at batch size 1 reading it is a small part
#   of a step, so both should stay nearly flat, the custom one far above the original.
# - **The ratio** of tokens/s: the custom model's fixed launch cost per token is large, while the
#   original's prefill grows with the prompt; so if anything the ratio should shrink a little as the
#   prompt grows.

# %%
rows = []
for L in helpers.progress(SIZES.context_prompts, desc="prompt lengths"):
    o = helpers.measure_tps(model, L, N, tokenizer)
    with helpers.patched(model, **FULL):
        c = helpers.measure_tps(model, L, N, tokenizer)
    for name, t in (("original", o), ("custom", c)):
        total_ms = 1e3 * N / t.tokens_per_s
        rows.append({"prompt": L, "model": name, "tokens/s": t.tokens_per_s, "prefill ms": t.prefill_ms,
                     "decode ms": total_ms - t.prefill_ms,
                     "decode ms per token": (total_ms - t.prefill_ms) / (N - 1) if N > 1 else float("nan"),
                     "spread %": t.spread_pct})
sweep = pd.DataFrame(rows)
wide = sweep.pivot(index="prompt", columns="model")
table = pd.DataFrame({
    "tokens/s original": wide["tokens/s", "original"], "tokens/s custom": wide["tokens/s", "custom"],
    "ratio (x slower)": wide["tokens/s", "original"] / wide["tokens/s", "custom"],
    "prefill ms original": wide["prefill ms", "original"], "prefill ms custom": wide["prefill ms", "custom"],
    "decode ms/token original": wide["decode ms per token", "original"],
    "decode ms/token custom": wide["decode ms per token", "custom"],
}).reset_index()
helpers.show(table)
helpers.save_sweep(table, "context_sweep")

for r in table.to_dict("records"):
    L = int(r["prompt"])
    note = f"prompt {L}, {N} new tokens"
    helpers.record(f"context.{L}.tps_original", r["tokens/s original"], "tokens/s", note)
    helpers.record(f"context.{L}.tps_custom", r["tokens/s custom"], "tokens/s", note + ", every custom kernel on")
    helpers.record(f"context.{L}.ratio", r["ratio (x slower)"], "x slower", "tps_original / tps_custom")
    helpers.record(f"context.{L}.prefill_ms_original", r["prefill ms original"], "ms",
                   f"one-token generation, prompt {L}")
    helpers.record(f"context.{L}.prefill_ms_custom", r["prefill ms custom"], "ms",
                   f"one-token generation, prompt {L}, every custom kernel on")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
for name, marker, color in (("original", "o", "tab:blue"), ("custom", "s", "tab:red")):
    sub = sweep[sweep["model"] == name]
    ax1.plot(sub["prompt"], sub["tokens/s"], marker=marker, color=color, label=name)
    ax2.plot(sub["prompt"], sub["prefill ms"], marker=marker, color=color, label=f"prefill, {name}")
    ax2.plot(sub["prompt"], sub["decode ms per token"], marker=marker, color=color, linestyle="--",
             alpha=0.6, label=f"decode per token, {name}")
for ax in (ax1, ax2):
    ax.set_xscale("log", base=2)
    helpers.plain_log_ticks(ax, "x", SIZES.context_prompts)
    ax.set_xlabel("prompt length (tokens)")
    ax.grid(True, which="both", alpha=0.3)
ax1.set_ylabel("tokens/s (including prefill)")
ax1.set_title(f"Does the slowdown hold as the prompt grows? ({N} new tokens)")
ax1.set_ylim(bottom=0)
ax2.set_yscale("log")
helpers.plain_log_ticks(ax2, "y")
ax2.set_ylabel("milliseconds")
ax2.set_title("Which part moves with the context: prefill or decode?")
ax1.legend()
ax2.legend(fontsize=8)
helpers.save_figure(fig, "context_sweep")
plt.show()

# %%
short, long = table.iloc[0], table.iloc[-1]
Ls, Ll = int(short["prompt"]), int(long["prompt"])
r0, r1 = short["ratio (x slower)"], long["ratio (x slower)"]
trend = "shrank" if r1 < 0.97 * r0 else "grew" if r1 > 1.03 * r0 else "stayed about the same"


def growth(column):
    return long[column] / short[column]


def change(column):
    """'grew 1.52x', 'fell to 0.76x' or 'stayed about the same (0.99x)' from the shortest to the longest prompt."""
    g = growth(column)
    if g > 1.05:
        return f"grew {g:.2f}x"
    if g < 0.95:
        return f"fell to {g:.2f}x"
    return f"stayed about the same ({g:.2f}x)"


custom_range = (table["tokens/s custom"].min(), table["tokens/s custom"].max())
decode_growth = [growth("decode ms/token original"), growth("decode ms/token custom")]
helpers.md(
    f"From a {Ls}-token to a {Ll}-token prompt the ratio **{trend}**: {r0:.2f}x to {r1:.2f}x "
    f"(range {table['ratio (x slower)'].min():.2f}x to {table['ratio (x slower)'].max():.2f}x). "
    f"The custom model ran between {custom_range[0]:.2f} and {custom_range[1]:.2f} tokens/s throughout. "
    f"Over the {Ll // Ls}x longer prompt, the original's prefill time {change('prefill ms original')} and the "
    f"custom one's {change('prefill ms custom')}, while the decode time per token "
    f"{change('decode ms/token original')} (original) and {change('decode ms/token custom')} (custom). "
    + ("Decode stayed nearly pinned: its cost is set by what each step launches, not by the length of the context."
       if all(0.8 < g < 1.25 for g in decode_growth) else
       "Here decode time moved with the context too: each step's work on the growing KV cache was a visible "
       "part of its time." if min(decode_growth) > 1.05 and max(decode_growth) >= 1.25 else
       "Decode per token even came out faster with the longer prompt" if max(decode_growth) < 0.95 else
       "The two models' decode times did not move together, although a longer cache adds work to both")
    + ("" if all(0.8 < g < 1.25 for g in decode_growth) or min(decode_growth) > 1.05 else
       f": with repeats of one measurement differing by up to {sweep['spread %'].max():.0f}%, the noise between "
       "runs is larger here than any effect of the context.")
)

# %% [markdown]
# ## How much of each token is prefill?
#
# The ratio of tokens/s mixes the two phases. Splitting the custom model's extra time per generation
# into its prefill part and its decode part shows which phase carries the slowdown, and whether that
# changes with the prompt.

# %%
split = pd.DataFrame({
    "prompt": table["prompt"],
    "extra ms in prefill": table["prefill ms custom"] - table["prefill ms original"],
    "extra ms in decode": (table["decode ms/token custom"] - table["decode ms/token original"]) * (N - 1),
})
split["decode share of the extra time"] = split["extra ms in decode"] / (
    split["extra ms in prefill"] + split["extra ms in decode"])
helpers.show(split)
extra0, extra1 = (split["extra ms in decode"].iloc[i] / max(N - 1, 1) for i in (0, -1))
growth_extra = extra1 / extra0 if extra0 > 0 else float("nan")
helpers.md(
    f"At {Ls} prompt tokens, {100 * split['decode share of the extra time'].iloc[0]:.0f}% of the custom model's extra "
    f"time is spent in decode; at {Ll}, {100 * split['decode share of the extra time'].iloc[-1]:.0f}%. "
    f"The extra decode time per token went from {extra0:.2f} to {extra1:.2f} ms "
    + ("(the custom model was not slower in decode at the shortest prompt, so there is no extra cost to follow)."
       if not extra0 > 0 else
       f"({100 * abs(growth_extra - 1):.0f}% {'more' if extra1 > extra0 else 'less'} over a {Ll // Ls}x longer "
       "prompt): that is the cost of the launches the custom kernels add to every step, and the context length "
       "barely touches it." if abs(growth_extra - 1) < 0.25 else
       f"({growth_extra:.2f}x over a {Ll // Ls}x longer prompt): "
       + ("on this machine the custom kernels' extra cost per step grew with the context too, so more than launch "
          "overhead is at work in decode." if growth_extra > 1 else
          "it shrank, so the noise between runs is at least as large as any effect of the context here."))
)

# %% [markdown]
# ## Beside the blog's T4 numbers
#
# The blog swept prompts of 128 to 1024 tokens with 32 new tokens and gave its ratios as a range rather
# than a table, so the comparison below puts your range next to its range.

# %%
helpers.show(helpers.compare("context."))
blog_range = helpers.blog_numbers().set_index("id").loc["context.ratio_range", "blog_value"]
helpers.md(
    f"The blog's T4 ratios spanned {blog_range}x across its sweep, falling slightly with longer prompts, "
    f"with the custom model near 6 tokens/s. Your ratios spanned {table['ratio (x slower)'].min():.2f}x to "
    f"{table['ratio (x slower)'].max():.2f}x and {trend} from the shortest to the longest prompt"
    + ("." if helpers.HAS_GPU else " (interpreter times, on a tiny model and short prompts).")
)

# %% [markdown]
# ## Takeaway
#
# - Prefill is where the context length enters: its work grows with the prompt, and its kernel count
#   does not. Decode adds one token of KV cache per step and keeps its kernel count fixed.
# - The custom kernels add a fixed number of launches to every step, whatever the context. Where launches
#   set the pace, that is a fixed time per token; the split above shows how close your machine came.
# - A ratio of tokens/s mixes both phases, so read it together with the prefill and decode times: they
#   say which phase moved it.
#
# Chapter 8 gathers every number of the series into one table and reads the lessons off it.
