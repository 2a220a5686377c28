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
# # Chapter 6: Everything custom at once
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/06_full_stack.ipynb)
#
# In this chapter you will learn:
# - how to run Qwen3-0.6B with every RMSNorm, every linear projection and every attention module on
#   our own Triton kernels, and check that it still computes the same function;
# - how much slower the fully custom model generates, and why, in launches and GPU-busy time per token;
# - why the custom model's greedy output eventually differs from the original's, and how small the
#   difference that flips a token can be;
# - why the order of floating-point additions changes results, and why that is not a bug.

# %% [markdown]
# ## The idea
#
# Chapters 3 to 5 swapped one kind of module at a time. Here all of them go in together:
#
# - every RMSNorm, with the **two-pass** kernel from chapter 3 (two launches per call, the input read twice);
# - every linear layer (attention projections, MLP projections and `lm_head`) with the tiled **matmul**
#   from chapter 4;
# - every attention module with the **per-head loop** from chapter 5 (three launches per query head).
#
# The model still computes the same mathematical function. What changes is how the work is cut into
# kernels, and so how many launches each token costs and how many bytes travel between them. At full
# size this is the longest generation of the series (`SIZES.new_tokens_full_stack` new tokens), made slow
# on purpose.

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
import torch

import helpers

helpers.show_env()
SIZES = helpers.SIZES
FULL = helpers.ALL_CUSTOM  # two-pass RMSNorm, every projection, slow attention

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
config = model.config
with helpers.patched(model, **FULL) as counts:
    pass  # just to count what the full stack replaces
replaced = pd.DataFrame([
    {"module": "RMSNorm (two-pass)", "in the model": census["rmsnorm"], "replaced": counts["rmsnorm"]},
    {"module": "linear (matmul)", "in the model": census["linear"],
     "replaced": counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]},
    {"module": "attention (per-head loop)", "in the model": census["attention"], "replaced": counts["attention"]},
])
helpers.show(replaced)
ok = (replaced["in the model"] == replaced["replaced"]).all()
print("every module replaced:", "PASS" if ok else "FAIL")
assert ok, "the full stack must replace every RMSNorm, linear layer and attention module"

# %% [markdown]
# ## Does the custom model compute the same function?
#
# One forward pass over the prompt with each model, then compare the logits (the scores over the
# vocabulary at every position). They cannot be bit-identical: our kernels add numbers in a different
# order than PyTorch's. They should agree closely, and the most likely next token should almost always
# be the same.

# %%
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, config.vocab_size)  # the prompt measure_tps uses
with torch.no_grad():
    logits_original = model(prompt).logits.float()
    with helpers.patched(model, **FULL):
        logits_custom = model(prompt).logits.float()
err = (logits_custom - logits_original).abs().max().item()
rel = err / logits_original.abs().max().item()
top1 = (logits_custom.argmax(-1) == logits_original.argmax(-1)).float().mean().item()
print(f"max abs logit difference {err:.3e} ({rel:.1e} of the largest logit); "
      f"same top-1 token at {100 * top1:.0f}% of {prompt.shape[1]} positions")
REL_TOLERANCE = helpers.tolerance("full_stack")
ok = rel < REL_TOLERANCE
print("full-stack check:", "PASS" if ok else "FAIL")
assert ok, f"the custom stack moved the logits by {rel:.1e} of their scale (tolerance {REL_TOLERANCE})"

# %% [markdown]
# ## Predict: how many launches per token?
#
# We can count our own launches per decoded token by hand. Each RMSNorm call is two launches, each
# linear layer one matmul (at decode, `lm_head` runs on the last position only), and each attention
# module three launches per query head. PyTorch's own kernels for those modules disappear, but the
# glue between them stays: rotary embeddings, residual additions, the activation, reshapes.
#
# So we expect the total launch count per token to go up by roughly the attention loop's launches, the
# GPU-busy time to go up a little (our kernels are less efficient, but the work is tiny), and the wall
# time per token to go up by about the extra launches times a few microseconds each. If that is right,
# the slowdown comes from launching, not from computing.

# %%
heads = config.num_attention_heads
expected_ours = 2 * counts["rmsnorm"] + (counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]) \
    + 3 * heads * counts["attention"]
print(f"our launches per token, by hand: 2 x {counts['rmsnorm']} + "
      f"{counts['attention_proj'] + counts['mlp_proj'] + counts['lm_head']} + 3 x {heads} x {counts['attention']} "
      f"= {expected_ours}")

# %% [markdown]
# ## Measure: tokens per second
#
# Both models generate the same number of new tokens from the same prompt, greedily. The original goes
# first; then the custom stack, in a cell of its own because it is the slow one. Each model gets one
# untimed warm-up of the same length and then `SIZES.repeats` timed runs, of which we keep the median;
# the spread between the runs says how much to trust a difference. At full size the custom stack's runs
# take a few minutes; a progress bar counts the forward passes (one per generated token) as they go.

# %%
N = SIZES.new_tokens_full_stack
with helpers.generation_progress(model, helpers.forwards_per_tps(N), "original, tokens/s"):
    original = helpers.measure_tps(model, SIZES.prompt_len, N, tokenizer)
print(f"original: {original.tokens_per_s:.2f} tokens/s over {N} new tokens "
      f"(median of {len(original.times_s)}, spread {original.spread_pct:.1f}%)")

# %%
with helpers.patched(model, **FULL), \
        helpers.generation_progress(model, helpers.forwards_per_tps(N), "custom, tokens/s"):
    custom = helpers.measure_tps(model, SIZES.prompt_len, N, tokenizer)
print(f"custom:   {custom.tokens_per_s:.2f} tokens/s over {N} new tokens "
      f"(median of {len(custom.times_s)}, spread {custom.spread_pct:.1f}%)")

# %% [markdown]
# ## Where the time goes, per token
#
# `helpers.profile_decode` profiles a short generation of each model (a few decode steps suffice: the
# count per token does not depend on how many tokens are profiled) and reports launches, GPU-busy time
# and wall time per decoded token.

# %%
with helpers.patched(model, **FULL), \
        helpers.generation_progress(model, helpers.forwards_per_profile(SIZES.new_tokens), "custom, profile"):
    profile_custom = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer)
with helpers.generation_progress(model, helpers.forwards_per_profile(SIZES.new_tokens), "original, profile"):
    profile_original = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer)




per_token = pd.DataFrame([
    {"model": name, "tokens/s": t.tokens_per_s, "ms per token (1000 / tokens/s)": 1000 / t.tokens_per_s,
     "launches per token": p.launches, "our launches per token": p.project_launches_per_token,
     "GPU-busy ms per token": p.gpu_busy_ms_per_token, "profiled wall ms per token": p.wall_ms_per_token}
    for name, t, p in (("original", original, profile_original), ("custom", custom, profile_custom))
])
helpers.show(per_token)
print(f"our launches per token: {profile_custom.project_launches_per_token:.0f} measured, "
      f"{expected_ours} predicted by hand")

slowdown = original.tokens_per_s / custom.tokens_per_s
helpers.record("full.tps_original", original.tokens_per_s, "tokens/s", f"prompt {SIZES.prompt_len}, {N} new tokens")
helpers.record("full.tps_custom", custom.tokens_per_s, "tokens/s",
               f"{counts['rmsnorm']} two-pass RMSNorm + {census['linear']} matmul + {counts['attention']} "
               f"slow attention; prompt {SIZES.prompt_len}, {N} new tokens")
helpers.record("full.slowdown", slowdown, "x slower", "full.tps_original / full.tps_custom")
helpers.record("full.launches_per_token_original", profile_original.launches, "launches", helpers.launch_note())
helpers.record("full.launches_per_token_custom", profile_custom.launches, "launches", helpers.launch_note())
if helpers.HAS_GPU:
    helpers.record("full.gpu_busy_ms_per_token_original", profile_original.gpu_busy_ms_per_token, "ms",
                   "summed kernel time per decoded token")
    helpers.record("full.gpu_busy_ms_per_token_custom", profile_custom.gpu_busy_ms_per_token, "ms",
                   "summed kernel time per decoded token")

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
names = ["original", "custom"]
walls = [1000 / original.tokens_per_s, 1000 / custom.tokens_per_s]
if helpers.HAS_GPU:
    busy = [profile_original.gpu_busy_ms_per_token, profile_custom.gpu_busy_ms_per_token]
    ax.barh(names, busy, color="tab:green", label="GPU busy (kernels running)")
    ax.barh(names, [max(w - b, 0) for w, b in zip(walls, busy)], left=busy, color="tab:gray",
            label="GPU idle (waiting for the host)")
else:
    ax.barh(names, walls, color="tab:gray", label="wall time (interpreter)")
for i, (w, p) in enumerate(zip(walls, (profile_original, profile_custom))):
    ax.text(w, i, f"  {p.launches:.0f} launches", va="center", fontsize=9)
ax.set_xlabel("milliseconds per generated token")
ax.set_title("Why is the custom stack slower: more work, or more waiting?")
ax.set_xlim(0, max(walls) * 1.35)
ax.legend(fontsize=8, loc="lower right")
helpers.save_figure(fig, "full_stack_time_per_token")
plt.show()

# %%
extra_ms = walls[1] - walls[0]
extra_launches = profile_custom.launches - profile_original.launches
word = "slower" if slowdown > 1 else "faster"
text = (f"With everything custom the model generated **{custom.tokens_per_s:.2f} tokens/s** against "
        f"**{original.tokens_per_s:.2f}** for the original: **{slowdown:.2f}x {word}**. Each token took "
        f"{abs(extra_ms):.1f} ms {'more' if extra_ms > 0 else 'less'} and made {abs(extra_launches):.0f} "
        f"{'more' if extra_launches >= 0 else 'fewer'} launches. ")
if helpers.HAS_GPU:
    extra_busy = profile_custom.gpu_busy_ms_per_token - profile_original.gpu_busy_ms_per_token
    idle = [max(0.0, 1 - b / w) for b, w in zip(busy, walls)]
    text += f"The GPU's own work per token went from {busy[0]:.2f} to {busy[1]:.2f} ms. "
    if extra_ms > 0:
        text += (f"That is {extra_busy:.2f} ms of the {extra_ms:.1f} ms added ({100 * extra_busy / extra_ms:.0f}%); "
                 "the rest is the GPU waiting"
                 + (f", about {1e3 * (extra_ms - extra_busy) / extra_launches:.1f} µs per extra launch. "
                    if extra_launches > 0 and extra_ms > extra_busy else ". ")
                 + ("Launches, not arithmetic, are what made the model slow. "
                    if extra_busy < 0.5 * extra_ms else
                    "On this machine our kernels' own GPU time is a large part of the slowdown. "))
    text += (f"The GPU sat idle {100 * idle[0]:.0f}% of each original token and {100 * idle[1]:.0f}% of each "
             "custom one.")
else:
    text += ("In CPU mode every one of our launches runs in Triton's interpreter, so the slowdown here measures "
             "the interpreter; the GPU-busy split needs a GPU.")
helpers.md(text)

# %%
helpers.show(helpers.compare("full."))
ORIGINAL_IDS = ("rmsnorm.tps_original", "matmul.tps_all_proj_rmsnorm_original", "full.tps_original")
blog = {r.id: float(r.blog_value) for r in helpers.blog_numbers().itertuples()
        if (r.id.startswith("full.") or r.id in ORIGINAL_IDS) and r.blog_value}
blog_originals = [blog[i] for i in ORIGINAL_IDS]  # the post's unmodified model, in three of its chapters
helpers.md(
    f"The blog's T4 run went from {blog['full.tps_original']:.2f} to {blog['full.tps_custom']:.2f} tokens/s, "
    f"{blog['full.slowdown']:.2f}x slower, over 512 new tokens (the post's original speed differs from "
    "chapter to chapter: " + ", ".join(f"{v:.2f}" for v in blog_originals) + " tokens/s, a hint of the noise "
    "between runs). "
    f"Yours is {slowdown:.2f}x over {N} tokens: "
    + (f"a {'larger' if slowdown > blog['full.slowdown'] else 'smaller'} factor than the blog's. "
       "A faster GPU does not shrink the launch cost per kernel by as much as it shrinks the kernels, so the "
       "share of the time spent launching, and with it the slowdown, depends on the machine."
       if helpers.HAS_GPU else "interpreter numbers, not comparable to a GPU's.")
)

# %% [markdown]
# ## When do the two models part ways?
#
# Both models decode greedily: at every step each picks the token with the highest logit. If two tokens
# are nearly tied, a tiny difference in the logits can flip the pick, and from then on the two models
# continue different texts. `measure_tps` kept the generated tokens of each run, so we can find the first
# position where the streams differ without generating again.
#
# To see *why* they differ there, we run one forward pass of each model over the shared text up to that
# step (prompt plus the tokens both agreed on) and look at the logits that chose the next token.

# %%
ids_original, ids_custom = original.ids.cpu(), custom.ids.cpu()
n = min(len(ids_original), len(ids_custom))
differ = (ids_original[:n] != ids_custom[:n]).nonzero().flatten()
first = int(differ[0]) if len(differ) else -1
helpers.record("full.first_divergence", first, "token index",
               "0-based index into the generated tokens; -1: the streams never differ")


def show_tokens(ids):
    if tokenizer is not None:
        return repr(tokenizer.decode(ids))
    return " ".join(str(i) for i in ids.tolist())


if first < 0:
    print(f"the two streams agree on all {n} generated tokens")
else:
    lo, hi = max(0, first - 8), first + 8
    print(f"first difference at generated token {first} of {n}")
    print("shared text before it:", show_tokens(ids_original[lo:first]))
    print("original continues:   ", show_tokens(ids_original[first:hi]))
    print("custom continues:     ", show_tokens(ids_custom[first:hi]))
    print(f"tokens that agree after the split (same position): "
          f"{int((ids_original[first:n] == ids_custom[first:n]).sum())} of {n - first}")

# %%
P = prompt.shape[1]
step = first if first >= 0 else n - 1  # where we look: the split, or the last step when there is none
prefix = torch.cat([prompt, ids_original[:step].to(prompt.device)[None]], dim=1)  # shared by both models
with torch.no_grad():
    steps_original = model(prefix).logits[0, P - 1:].float()  # (step + 1, vocab): logits that chose tokens 0..step
    with helpers.patched(model, **FULL):
        steps_custom = model(prefix).logits[0, P - 1:].float()
at_o, at_c = steps_original[-1], steps_custom[-1]


def name(token):
    return repr(tokenizer.decode([token])) if tokenizer is not None else str(token)


top_o, top_c = at_o.topk(5), at_c.topk(5)
helpers.show(pd.DataFrame({
    "original: token": [name(t) for t in top_o.indices.tolist()], "original: logit": top_o.values.tolist(),
    "custom: token": [name(t) for t in top_c.indices.tolist()], "custom: logit": top_c.values.tolist(),
}, index=pd.RangeIndex(1, 6, name="rank")))

two = at_o.topk(2).values
margins = (steps_original.topk(2).values[:, 0] - steps_original.topk(2).values[:, 1])  # per step, original
logit_gap = (steps_original - steps_custom).abs().max(dim=-1).values  # per step, between the models
print(f"at step {step}: largest logit difference between the models {logit_gap[-1]:.3g}; "
      f"original's top-2 margin {two[0] - two[1]:.3g}")

# %%
pick_o, pick_c = int(at_o.argmax()), int(at_c.argmax())
median_margin = margins[:-1].median().item() if len(margins) > 1 else float("nan")
if first >= 0:
    tok_o, tok_c = int(ids_original[first]), int(ids_custom[first])
    pref_o = (at_o[tok_o] - at_o[tok_c]).item()  # how much the original preferred its own pick
    pref_c = (at_c[tok_c] - at_c[tok_o]).item()  # and the custom model its own
    same_flip = pick_o == tok_o and pick_c == tok_c
    def preference(p, who):
        if p > 0:
            return f"{who} preferred its own token by {p:.3g}"
        if p == 0:
            return f"{who} saw an exact tie (the first of the tied tokens wins)"
        return f"{who} now preferred the other token, by {-p:.3g}"

    text = (f"The streams split at generated token **{first}**: the original picked {name(tok_o)}, the custom "
            f"stack {name(tok_c)}. In the forward pass over the shared prefix, {preference(pref_o, 'the original')} "
            f"in logit and {preference(pref_c, 'the custom model')}. The largest logit difference between the two "
            f"models at that step was {logit_gap[-1]:.3g}, against a median top-2 margin of {median_margin:.3g} "
            "over the steps before. ")
    text += ("The recomputed logits reproduce the flip. " if same_flip else
             "This recomputation does not reproduce the flip exactly: here both models see the whole prefix "
             "in one pass, while during generation they computed the step from the KV cache, one token at a "
             "time, with different kernel shapes and so yet another order of additions. The pick was that "
             "close. ")
    text += ("A near-tie plus a difference in the last digits is all it takes; after that, the two models are "
             "continuing different texts, and the later tokens differ for that reason alone.")
else:
    text = (f"The streams never differ over these {n} tokens. At the last step the largest logit difference "
            f"between the models was {logit_gap[-1]:.2e}, while the median top-2 margin was {median_margin:.3f}: "
            "no pick was close enough to flip. Longer generations, lower precision or a deeper model make a "
            "flip more likely.")
helpers.md(text)

# %%
fig, ax = plt.subplots(figsize=(7, 4))
x = range(len(margins))
floor = 1e-7  # a log axis cannot show an exact tie or an exact match: plot those at this floor
ax.plot(x, margins.clamp_min(floor).cpu(), marker=".", label="original's top-2 margin (how close the pick was)")
ax.plot(x, logit_gap.clamp_min(floor).cpu(), marker=".", label="largest logit difference between the two models")
ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
if first >= 0:
    ax.axvline(first, color="red", linestyle="--", label=f"first divergence (token {first})")
ax.set_yscale("log")
helpers.plain_log_ticks(ax, "y")
ax.set_xlabel("generated token index")
ax.set_ylabel("logit units")
ax.set_title("How close was each greedy pick, and how far apart were the models?")
ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15))  # below the axes, off the data
helpers.save_figure(fig, "full_stack_divergence")
plt.show()
closest = int(margins.argmin())
n_smallest = int((margins == margins.min()).sum())
n_close = int((margins <= logit_gap).sum())  # steps where the models' difference could outweigh the pick
helpers.md(
    f"Over the {len(margins)} steps shown, the two models' logits differed by at most "
    f"{logit_gap.max():.3g} (median {logit_gap.median():.3g}), while the original's top-2 margin had a median "
    f"of {margins.median():.3g} and dipped to {margins.min():.3g}, first at token {closest}"
    + (f" and {n_smallest} times in all" if n_smallest > 1 else "")
    + f". A pick can flip only where the margin is no larger than the difference between the models: that "
    f"happened at {n_close} of the {len(margins)} steps, and"
    + (" the red line marks the first step where a pick did flip." if first >= 0 else " no pick flipped.")
)

# %% [markdown]
# ## Why the same math gives different numbers
#
# Floating-point addition is not associative: $(a + b) + c$ need not equal $a + (b + c)$, because every
# addition rounds its result to the nearest representable number. fp16 has 11 significant bits, so above
# 2048 the representable numbers are 2 apart.

# %%
a = torch.tensor(2048.0, dtype=torch.float16)
one = torch.tensor(1.0, dtype=torch.float16)
print("(2048 + 1) + 1 =", ((a + one) + one).item(), "  in fp16: 2049 rounds back to 2048, twice")
print("2048 + (1 + 1) =", (a + (one + one)).item())

# a realistic case: 4096 numbers summed in three orders, all in float32
x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
orders = {"one after another": x.cumsum(0)[-1].item(),
          "in tiles of 32, then the partial sums": x.view(-1, 32).sum(1).sum().item(),
          "torch.sum's own tree": x.sum().item()}
exact = x.double().sum().item()
for k, v in orders.items():
    print(f"{k:40s} {v:+.9f}   (error {abs(v - exact):.1e} against float64)")

# %% [markdown]
# A matmul kernel with 64 x 64 tiles walks the reduction in chunks of 32 and adds the partial sums in
# its own order; cuBLAS picks another; a fused attention kernel computes its softmax in blocks with a
# running maximum, where our kernel takes the whole row at once. Each difference is in the last bits.
# Through every layer those bits compound; how far they grew in your run is what the logit comparison
# above measured. Neither model is more correct than the other: both are rounding the same exact
# computation, each its own way.

# %%
random_weights = "random" in description
if random_weights:
    helpers.md(
        f"**About this run's weights.** The model here has seeded random weights ({description}). Its speed "
        "is the real model's speed: the kernels see the same shapes. Its text is meaningless, and nothing "
        "makes one token a clear favourite: the median top-2 margin was "
        f"{margins.median():.3g}. Where margins are that small, the first divergence says more about the random "
        "weights than about our kernels. A trained model is usually more confident, so with the real weights "
        "the streams tend to agree for longer."
    )
else:
    helpers.md(
        f"**About this run's weights.** These are the trained weights ({description}), so the text is real and "
        f"the margins are those of a trained model (median top-2 margin {margins.median():.3g}). Without the "
        "hub the series falls back to random weights: the speed stays the same, but random logits are nearly "
        "flat, so near-ties, and with them early divergences, become more likely."
    )

# %% [markdown]
# ## Takeaway
#
# - All RMSNorms, all projections and all attention modules can run on our own kernels, and the model
#   still computes the same function to within rounding.
# - To explain a slowdown, put launches, GPU-busy time and wall time per token side by side: extra
#   wall time that the GPU was not busy for is time spent waiting for the host to launch.
# - Greedy decoding amplifies rounding differences: once a near-tie flips, the two models write different
#   texts. That is floating-point arithmetic, not an error in either model.
#
# Next, chapter 7 asks whether the slowdown holds as the prompt grows.
