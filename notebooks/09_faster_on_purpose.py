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
# # Chapter 9: Faster on purpose
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/09_faster_on_purpose.ipynb)
#
# In this chapter you will learn:
# - how to win the speed back from chapter 6's all-custom model one fix at a time, and how to measure
#   each fix against the step before it, in the same shuffled rounds as every other step;
# - how fused kernels (a flash-decoding attention, one-launch RMSNorm, residual add + RMSNorm, matrix-vector
#   projections, q/k norm + RoPE) cut the launches per token, and how a CUDA graph cuts the host's
#   launches to one per token;
# - how well chapter 8's launch budget predicts each step from its launch counts alone;
# - whether the fast model beats the original eager model, and transformers' own compiled generation;
# - what a reader with a T4 should expect, as an estimate built from this run's ratios and the T4's floor.

# %% [markdown]
# ## The idea
#
# Chapters 2 to 8 made Qwen3-0.6B slower on purpose and measured why. Two findings carried the series:
# every kernel launch costs the host time, whatever the kernel does; and at batch size 1 the GPU spends
# most of each token waiting for the host to launch the next kernel. So the way back is to launch less.
#
# This chapter walks the staircase `helpers.STAIRCASE` from the all-custom model (two-pass RMSNorms, tiled
# matmuls for every projection, the per-head attention loop) to a fast model, one swap per step:
#
# 1. **fast attention**: one grouped-query decode kernel (split-KV flash-decoding) instead of three
#    launches per query head;
# 2. **fused RMSNorm**: every RMSNorm in one launch instead of two;
# 3. **matrix-vector projections**: at decode the projections multiply a single row, so a small-M kernel
#    replaces the 64 x 64 tiled matmul; then (3b) the MLP fused: gate and up in one projection, SwiGLU,
#    down, three launches in all;
# 4. **fused layers**: q, k and v in one projection, q/k norm and RoPE in one launch, the residual add fused
#    with the next RMSNorm: the fast model (`helpers.ALL_FAST`), still launched from Python token by token;
# 5. **CUDA graph**: the same fast model, with a static KV cache and each decode step replayed from one
#    CUDA graph (`helpers.GraphDecoder`): one launch per token for the host.
#
# Beside the staircase, four reference lines: the original model as `generate()` runs it, the original
# replayed from a CUDA graph (what a graph alone buys), transformers' own static-cache compiled generation
# (on a GPU), and the weight-read floor of your GPU (every weight read once per token at the nominal
# bandwidth). Before looking at each step's time, the launch budget of chapter 8 predicts it.

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
import re
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.patches import Patch

import helpers
import kernels

helpers.show_env()
SIZES = helpers.SIZES
ORIGINAL = helpers.ORIGINAL
STEPS = list(helpers.STAIRCASE)  # in order: each step is one fix on the step before
BESIDE = {name: kwargs for name, kwargs in helpers.BESIDE_STAIRCASE.items()  # transformers' compiled path: GPU only
          if helpers.HAS_GPU or kwargs.get("decoder") != "compiled"}
CONFIGS = {**helpers.STAIRCASE, **BESIDE}
START = STEPS[0]  # chapter 6's all-custom model
FAST = next(n for n, kw in helpers.STAIRCASE.items() if kw == helpers.ALL_FAST)  # the fast model, eager
FAST_GRAPH = next(n for n, kw in helpers.STAIRCASE.items() if kw == dict(helpers.ALL_FAST, decoder="graph"))
ORIGINAL_GRAPH = next(n for n, kw in BESIDE.items() if kw == {"decoder": "graph"})
COMPILED = next((n for n, kw in BESIDE.items() if kw.get("decoder") == "compiled"), None)  # None in CPU mode


def tag(name: str) -> str:
    """The part of a result id that names a configuration: '4. fused layers (the fast model)' -> '4_fused_layers'."""
    return re.sub(r"\W+", "_", re.sub(r"\s*\(.*?\)", "", name)).strip("_").lower()


def decoder_of(name: str) -> str:
    return CONFIGS.get(name, {}).get("decoder", "generate")


def graphed(name: str) -> bool:
    """Does ``name`` replay its decode step from a CUDA graph here? (In CPU mode the graph step runs eagerly.)"""
    return decoder_of(name) == "graph" and helpers.HAS_GPU


def how_it_decodes(name: str) -> str:
    return {"generate": "eager generate()", "compiled": "transformers, static cache, compiled",
            "graph": ("static cache, one CUDA-graph replay per token" if helpers.HAS_GPU else
                      "static cache, step run eagerly (CPU mode: no CUDA graph)")}[decoder_of(name)]


# %% [markdown]
# ## The staircase, step by step
#
# Each step's `patched()` arguments and what changed from the step before (read from `helpers.STAIRCASE`,
# so this table cannot drift from what is measured).

# %%
def shown(value) -> str:
    return "{" + ", ".join(sorted(value)) + "}" if isinstance(value, (set, frozenset)) else repr(value)


def what_changed(before: dict, after: dict) -> str:
    """The arguments that differ between two configurations, as 'key: old -> new'."""
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
    return "; ".join(f"{k}: {shown(before[k]) if k in before else '(default)'} -> "
                     f"{shown(after[k]) if k in after else '(default)'}" for k in keys)


staircase_steps = pd.DataFrame([
    {"step": name, "decodes with": how_it_decodes(name),
     "what changed from the step before": what_changed(helpers.STAIRCASE[STEPS[i - 1]], kwargs) if i else
     "(the start: chapter 6's model) " + ", ".join(f"{k}={shown(v)}" for k, v in kwargs.items())}
    for i, (name, kwargs) in enumerate(helpers.STAIRCASE.items())]).set_index("step")
helpers.show(staircase_steps)

# %% [markdown]
# The fused decoder layer of step 4 is short enough to read whole. Every line is one launch or a view,
# except the two inside `self_attn` and `self.mlp` (three launches each, plus the attention kernel);
# transformers' own layer launches several times as many kernels for the same arithmetic.

# %%
print(inspect.getsource(kernels.FastDecoderLayer.forward))

# %% [markdown]
# ## Correctness first
#
# A faster model is worth nothing if it computes something else. Three checks, as chapter 6 made them:
#
# 1. **Logits**: one forward pass over the prompt with the original and with the fast model
#    (`helpers.ALL_FAST`); the largest logit difference, relative to the largest logit, must stay within
#    chapter 6's tolerance (`helpers.tolerance("full_stack")`).
# 2. **Greedy tokens, fast against original**: `SIZES.new_tokens_full_stack` new tokens each; where do
#    they first differ? A different order of additions can flip a near-tie (chapter 6 showed why). Where
#    they split, both models read the same prefix once more and we compare the original's top-2 margin
#    with the largest logit difference between the models: a pick can flip only where the margin is at
#    most twice that difference. A split with a wider margin is an error, not rounding.
# 3. **Greedy tokens, graph against eager**: the fast model replayed from a CUDA graph should generate the
#    tokens the eager fast model generates, up to near-ties: it runs the same kernels, but over a static
#    cache, where the decode attention splits the keys differently. Its first token comes from the same
#    eager prefill, so a difference there is a bug.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
config = model.config
prompt = helpers.make_prompt(SIZES.prompt_len, tokenizer, config.vocab_size)
with torch.no_grad():
    logits_original = model(prompt).logits.float()
    with helpers.patched(model, **helpers.ALL_FAST) as counts:
        logits_fast = model(prompt).logits.float()
print("modules replaced by the fast model:", {k: v for k, v in counts.items() if v})
err = (logits_fast - logits_original).abs().max().item()
rel = err / logits_original.abs().max().item()
top1 = (logits_fast.argmax(-1) == logits_original.argmax(-1)).float().mean().item()
REL_TOLERANCE = helpers.tolerance("full_stack")
print(f"max abs logit difference {err:.3e} ({rel:.1e} of the largest logit, tolerance {REL_TOLERANCE:.0e}); "
      f"same top-1 token at {100 * top1:.0f}% of {prompt.shape[1]} positions")
ok = rel < REL_TOLERANCE
print("fast model, logits:", "PASS" if ok else "FAIL")
assert ok, f"the fast model moved the logits by {rel:.1e} of their scale (tolerance {REL_TOLERANCE})"
helpers.record("faster.logits_rel_err", rel, "fraction",
               f"max |fast - original| logit / max |original| logit, one forward pass over {prompt.shape[1]} tokens")

# %%
N = SIZES.new_tokens_full_stack


def greedy(kwargs: dict, decoder: str, desc: str) -> torch.Tensor:
    """One untimed greedy generation of N new tokens with ``patched(model, **kwargs)``; the new tokens, on the CPU."""
    with helpers.patched(model, **kwargs):
        run = helpers.decoder_for(model, prompt, N, decoder)  # built inside the patch: a graph holds its weights
        if decoder == "generate":
            with helpers.generation_progress(model, N, desc):
                return run(N)[0].cpu()
        return run(N)[0].cpu()


def first_difference(a: torch.Tensor, b: torch.Tensor) -> int:
    """The index of the first generated token where two streams differ; -1 when they never do."""
    n = min(len(a), len(b))
    differ = (a[:n] != b[:n]).nonzero().flatten()
    return int(differ[0]) if len(differ) else -1


ids_original = greedy({}, "generate", "original, greedy")
ids_fast = greedy(helpers.ALL_FAST, "generate", "fast model, greedy")
ids_graph = greedy(helpers.ALL_FAST, "graph", "fast model, graph")
first = first_difference(ids_original, ids_fast)
first_graph = first_difference(ids_fast, ids_graph)
helpers.record("faster.first_divergence", first, "token index",
               f"fast model (eager) against the original, {N} greedy tokens; 0-based, -1: never differ")
helpers.record("faster.graph_first_divergence", first_graph, "token index",
               f"fast model from the graph decoder against the eager fast model, {N} greedy tokens; -1: never differ")
print(f"fast model against the original, {N} greedy tokens:",
      "PASS (identical)" if first < 0 else f"differ from generated token {first} on")
print(f"graph decoder against the eager fast model, {N} greedy tokens:",
      "PASS (identical)" if first_graph < 0 else f"differ from generated token {first_graph} on")


def split_margin(first: int):
    """At the first split: (the original's top-2 margin, the largest |original - fast| logit), both models reading
    the prompt and the shared tokens before the split in one forward pass; None when the tokens never split."""
    if first < 0:
        return None
    prefix = torch.cat([prompt, ids_original[:first].to(prompt.device)[None]], dim=1)
    with torch.no_grad():
        at_original = model(prefix).logits[0, -1].float()
        with helpers.patched(model, **helpers.ALL_FAST):
            at_fast = model(prefix).logits[0, -1].float()
    top = at_original.topk(2).values
    return (top[0] - top[1]).item(), (at_original - at_fast).abs().max().item()


def read_agreement(first: int, first_graph: int, n: int, chapter6, margin) -> str:
    """The token checks in words: where the fast model's greedy text leaves the original's (and whether a near-tie
    explains it: ``margin`` from ``split_margin``), and whether the graph decoder reproduces the eager fast model.
    ``chapter6``: chapter 6's recorded first divergence, or None."""
    if first < 0:
        text = f"The fast model's {n} greedy tokens are the original's, every one. "
    else:
        top2, gap = margin
        text = f"The fast model's greedy tokens follow the original's for {first} tokens and first differ at generated token {first}. "
        if top2 <= 2 * gap:
            text += (f"There the original's top-2 margin was {top2:.3g} and the models' logits differed by up to {gap:.3g}, "
                     f"so the fast model's could close that margin by up to {2 * gap:.3g}: a near-tie, flipped by "
                     "the fused kernels adding in another order than PyTorch's (chapter 6 showed the same). ")
        else:
            text += (f"**That is not rounding**: the original's top-2 margin there was {top2:.3g}, wider than twice the "
                     f"largest logit difference between the models ({2 * gap:.3g}) on the same prefix read at once, so "
                     "the fast model's decode path computes something else. ")
    if chapter6 is not None:
        text += ("Chapter 6's all-custom model, on this machine, " +
                 (f"first differed at token {chapter6:.0f}. " if chapter6 >= 0 else "never differed. "))
    if first_graph < 0:
        text += (f"The graph decoder generated exactly the eager fast model's {n} tokens"
                 + (": replaying the step from a CUDA graph changes when kernels are launched, not what they compute."
                    if helpers.HAS_GPU else " (in CPU mode its step runs eagerly, with a static cache)."))
    else:
        text += f"The graph decoder left the eager fast model's tokens at generated token {first_graph}. "
        text += ("Token 0 comes from the same eager prefill in both, so a difference there is a bug, not rounding."
                 if first_graph == 0 else
                 "Both ran the same prefill; from then on the graph's static cache is longer than the text, so the "
                 "decode attention splits the keys differently from the eager run's growing cache: another order "
                 "of additions, where a near-tie can flip.")
    return text


chapter6_rows = helpers.results()
chapter6_rows = chapter6_rows[chapter6_rows["id"] == "full.first_divergence"]
margin = split_margin(first)
if margin is not None:
    print(f"at the split: original's top-2 margin {margin[0]:.3g}; largest logit difference between the models "
          f"{margin[1]:.3g} (a flip needs margin <= 2 x difference)")
helpers.md(read_agreement(first, first_graph, N, float(chapter6_rows["value"].iloc[0]) if len(chapter6_rows) else None,
                          margin))

# %% [markdown]
# ## Measure every step in the same rounds
#
# One `helpers.compare_configs` run times every step of the staircase and the lines beside it, with the
# original twice (its A/A ratio is this run's noise floor). Each of `SIZES.rounds` rounds runs every
# configuration once, in a shuffled order: a greedy generation of `SIZES.new_tokens` new tokens from the
# `SIZES.prompt_len`-token prompt, then a one-token generation, so that the wall ms per decoded token
# (prefill excluded) come from the same rounds. A graph configuration builds its static cache and captures
# its step in every run, before the timed part; transformers' compiled path compiles once, in the untimed
# warm-up. After the rounds, `profile=True` counts each configuration's kernels and GPU-busy time per
# decoded token with `torch.profiler`.
#
# Two clocks, named wherever a time appears: **wall** is the host's clock (synchronised) per decoded token
# or per generation, what a user waits for; **GPU-busy** is the profiler's summed kernel time per decoded
# token, what the GPU worked. Every ratio below is a time ratio (above 1: slower), the median of per-round
# ratios, with its verdict against the A/A floor (`helpers.verdict`).

# %%
comparison = helpers.compare_configs(model, CONFIGS, tokenizer=tokenizer, profile=True)
profiles = {name: comparison.profile(name) for name in comparison.counts}
floor = comparison.floor
print(f"{len(comparison.orders)} shuffled rounds, prompt {comparison.prompt_len} tokens, "
      f"{comparison.new_tokens} new tokens; A/A floor {floor.median:.3f} ({floor.low:.2f}-{floor.high:.2f}), "
      f"noise threshold {100 * helpers.noise_threshold(floor):.0f}%")

# %% [markdown]
# ## Predict each step from its launches
#
# Chapter 8's launch budget prices a decoded token from what it launches: a price per PyTorch launch and a
# price per launch of ours (the host's work around each), plus the GPU-busy time on top. The host's speed
# differs from one process to the next by more than the spread inside one, so the prices come from this
# run: they are fitted on two of its configurations, the original (no launch of ours) and the all-custom
# model (thousands), and those two rows are fits, not predictions. Every other step is predicted from its
# launch counts and GPU-busy time alone, with prices that have not seen its time.
#
# A step replayed from a CUDA graph launches once per token, so there is no launch budget to pay: its
# prediction is its GPU-busy time per token, the time the GPU needs with the host out of the way. In CPU
# mode there are no PyTorch launches to count and no GPU time: the prediction is the original's wall time
# plus our launches times the interpreter's price per launch of ours.

# %%
def launch_prices():
    """(LaunchBudget, where its prices come from, the configurations of this run they were fitted on)."""
    fitted = (ORIGINAL, START)
    if helpers.HAS_GPU:
        budget = helpers.fit_launch_budget(profiles, fitted)
        return (budget, f"fitted on this run's *{ORIGINAL}* and *{START}* ({budget.torch_us:.1f} µs per PyTorch "
                        f"launch, {budget.ours_us:.1f} µs per launch of ours)", fitted)
    o, c = profiles[ORIGINAL], profiles[START]  # CPU: one price, the interpreter's per launch of ours
    ours_us = 1e3 * (c.wall_ms_per_token - o.wall_ms_per_token) / c.project_launches_per_token
    return (helpers.LaunchBudget(0.0, ours_us, fitted),
            f"fitted on this run's *{ORIGINAL}* and *{START}* ({ours_us:.0f} interpreter µs per launch of ours)", fitted)


def predict_ms(name: str, p, budget) -> float:
    """Predicted wall ms per decoded token of ``name`` from its profile ``p`` (launch counts, GPU-busy time)."""
    if graphed(name):
        return p.gpu_busy_ms_per_token  # one host launch per token: what is left is the GPU's work
    if helpers.HAS_GPU:
        return budget.predict_ms(p)
    return profiles[ORIGINAL].wall_ms_per_token + budget.host_ms(p)  # CPU: ours counted, PyTorch's part measured


def role(name: str, fitted: tuple) -> str:
    if name in fitted:
        return "fitted"
    if not helpers.HAS_GPU and name == ORIGINAL:
        return "base (the original's own time)"
    return "predicted"


budget, price_source, FITTED = launch_prices()
PREDICTED = [ORIGINAL, *STEPS, ORIGINAL_GRAPH]  # transformers' compiled path runs inside torch.compile: not priced
predictions = {name: predict_ms(name, profiles[name], budget) for name in PREDICTED}
predicted_table = pd.DataFrame([{
    "configuration": name, "how": ("GPU-busy time (one graph launch per token)" if graphed(name) else "launch budget"),
    "kernels per token": profiles[name].launches, "ours per token": profiles[name].project_launches_per_token,
    "GPU-busy ms per token": helpers.fmt(profiles[name].gpu_busy_ms_per_token),
    "predicted wall ms per token": predictions[name], "role": role(name, FITTED)} for name in PREDICTED])
print(f"prices: {price_source}")
print(f"per decoded token, prefill excluded; kernels: {helpers.launch_note()}")
helpers.show(predicted_table.set_index("configuration").round(3))

# %% [markdown]
# ## The staircase, measured
#
# One row per step: tokens/s (new tokens over the generation's wall time, prefill included, median of the
# rounds), wall ms per decoded token (prefill excluded), kernels and GPU-busy ms per decoded token from the
# profile, and two time ratios, each round by round in the same rounds: the step against **the step before
# it** (what this one fix did) and against **the original** (where the step stands). "Launched by the
# host" is what the host itself launches per token: every kernel when it launches them one by one, one graph
# when the step is replayed.

# %%
def step_ratio(name: str, before: str) -> helpers.Ratio:
    """``name``'s generation time over ``before``'s, round by round (the same rounds, back to back)."""
    return helpers.Ratio.of([a / b for a, b in zip(comparison.seconds[name], comparison.seconds[before])])


def ratio_cells(r: helpers.Ratio, v: helpers.Verdict, prefix: str) -> dict:
    return {f"{prefix}": r.median, f"{prefix} quartiles": f"{r.low:.2f}-{r.high:.2f}",
            f"{prefix} verdict": v.text + (f" ({v.reason})" if not v.real else "")}


wall = {name: p.wall_ms_per_token for name, p in profiles.items()}
steps_before = {name: STEPS[i - 1] for i, name in enumerate(STEPS) if i}
vs_before = {name: step_ratio(name, before) for name, before in steps_before.items()}
vs_before_verdict = {name: helpers.verdict(r, floor) for name, r in vs_before.items()}
rows = []
for name in STEPS:
    p = profiles[name]
    row = {"step": name, "tokens/s (median)": comparison.tokens_per_s[name], "wall ms per decoded token": wall[name],
           "kernels per token": p.launches,
           "launched by the host per token": 1 if graphed(name) else p.launches,
           "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token)}
    if name in vs_before:
        row.update(ratio_cells(vs_before[name], vs_before_verdict[name], "x the step before"))
    else:
        row.update({"x the step before": np.nan, "x the step before quartiles": "",
                    "x the step before verdict": "(the start)"})
    row.update(ratio_cells(comparison.ratios[name], comparison.verdict(name), "x the original"))
    rows.append(row)
staircase = pd.DataFrame(rows).set_index("step")
helpers.show(staircase.round(3))
print("ratios: time per generation (prefill included), median of per-round ratios; above 1 slower. "
      f"Kernels: {helpers.launch_note()}.")

# %% [markdown]
# ### Beside the staircase
#
# The original as `generate()` runs it, the original with the CUDA-graph step alone, transformers' compiled
# static-cache generation (GPU only), and the weight-read floor: the model's bytes over your GPU's nominal
# bandwidth (`helpers.NOMINAL_GB_S`), the time it takes just to read every weight once per token. The floor
# is per decoded token, so the column that sets everything beside it is "decoded tokens/s" = 1000 / wall ms
# per decoded token (prefill excluded).

# %%
reference = helpers.bandwidth(model, comparison.tokens_per_s[ORIGINAL])
FLOOR_MS = reference["floor_ms_per_token"]  # None in CPU mode, or for a GPU without a nominal bandwidth
beside_rows = []
for name in [ORIGINAL, ORIGINAL_GRAPH, *([COMPILED] if COMPILED else [])]:
    row = {"line": name, "decodes with": how_it_decodes(name), "tokens/s (median)": comparison.tokens_per_s[name],
           "wall ms per decoded token": wall[name], "decoded tokens/s": 1e3 / wall[name],
           "kernels per token": profiles[name].launches,
           "GPU-busy ms per token": helpers.fmt(profiles[name].gpu_busy_ms_per_token)}
    if name != ORIGINAL:
        row.update(ratio_cells(comparison.ratios[name], comparison.verdict(name), "x the original"))
    beside_rows.append(row)
beside_rows.append({"line": f"weight-read floor ({helpers.SLUG})",
                    "decodes with": (f"{reference['model_bytes'] / 1e9:.3f} GB / {reference['nominal_gb_s']} GB/s"
                                     if FLOOR_MS else f"n/a: {reference['note']}"),
                    "wall ms per decoded token": FLOOR_MS if FLOOR_MS else np.nan,
                    "decoded tokens/s": 1e3 / FLOOR_MS if FLOOR_MS else np.nan})
beside = pd.DataFrame(beside_rows).set_index("line")
helpers.show(beside.round(3))
if COMPILED is None:
    helpers.md("CPU mode: transformers' compiled path needs a GPU (it compiles the decode step with CUDA graphs), "
               "and the floor needs a memory bandwidth, so both lines are left out here.")

# %% [markdown]
# ## Were the predictions right?
#
# Each prediction beside the measured wall ms per decoded token, and how far off it was; a prediction
# holds within `helpers.PREDICTION_BAR` of the measurement. The columns on the right price the fix itself:
# the launches it removed from the step before, and the wall ms per token it was predicted to save and did.

# %%
BAR = helpers.PREDICTION_BAR
judged_rows = []
for name in PREDICTED:
    before = steps_before.get(name)
    err_pct = 100 * (predictions[name] / wall[name] - 1)
    r = role(name, FITTED)
    judged_rows.append({
        "configuration": name, "role": r, "predicted wall ms per token": predictions[name],
        "measured wall ms per token": wall[name], "error %": err_pct,
        f"within {100 * BAR:.0f}%": ("(fitted)" if r == "fitted" else "(base)" if r.startswith("base") else
                                     "yes" if abs(err_pct) <= 100 * BAR else "no"),
        "launches removed": profiles[before].launches - profiles[name].launches if before else np.nan,
        "predicted ms saved": predictions[before] - predictions[name] if before else np.nan,
        "measured ms saved": wall[before] - wall[name] if before else np.nan})
judged = pd.DataFrame(judged_rows).set_index("configuration")
helpers.show(judged.round(2))


def read_predictions(judged: pd.DataFrame, source: str) -> str:
    """How many of the predictions held, which missed and by how much, in words."""
    bar = f"within {100 * BAR:.0f}%"
    real = judged[judged["role"] == "predicted"]
    hits, misses = real[real[bar] == "yes"], real[real[bar] == "no"]
    text = (f"Prices: {source}. Of the {len(real)} predictions, **{len(hits)} held {bar}** of the measured wall ms "
            "per decoded token")
    text += (": " + ", ".join(f"*{n}* ({e:+.0f}%)" for n, e in hits["error %"].items()) if len(hits) else "")
    text += ("; missed: " + ", ".join(f"*{n}* ({e:+.0f}%)" for n, e in misses["error %"].items()) if len(misses)
             else "") + "."
    fitted = judged[judged["role"] != "predicted"]
    if len(fitted):
        text += (" Not judged: " + ", ".join(f"*{n}* ({r})" for n, r in fitted["role"].items())
                 + ", on the line by construction.")
    graph_rows = [n for n in real.index if graphed(n)]
    if graph_rows:
        text += (" For the graph steps the prediction is the GPU-busy time alone; a measurement above it is host time "
                 "that a graph launch, the prefill's eager launches or the read-back still cost: "
                 + ", ".join(f"*{n}* {judged.loc[n, 'measured wall ms per token']:.2f} wall ms against "
                             f"{judged.loc[n, 'predicted wall ms per token']:.2f} GPU-busy ms" for n in graph_rows) + ".")
    if not helpers.HAS_GPU:
        text += (" CPU mode: the interpreter runs every program of a kernel in numpy, so a launch's price grows with "
                 "its grid, and one average price per launch can miss by far; on a GPU the prices are the host's.")
    return text


helpers.md(read_predictions(judged, price_source))

# %% [markdown]
# ## Where the time went
#
# The first figure is the staircase: decoded tokens/s after each fix, with the lines beside it. The second
# shows what each fix changed underneath: the kernels per decoded token, and the GPU-busy ms per token.

# %%
fig, ax = plt.subplots(figsize=(9.5, 5))
x = np.arange(len(STEPS))
rates = [1e3 / wall[n] for n in STEPS]
colors = ["tab:purple" if graphed(n) else "tab:blue" for n in STEPS]
ax.bar(x, rates, color=colors, width=0.6)
for i, name in enumerate(STEPS):
    words = (vs_before_verdict[name].text if name in vs_before_verdict else "the start")
    ax.annotate(f"{rates[i]:.3g}\n{words}", (x[i], rates[i]), xytext=(0, 3), textcoords="offset points",
                ha="center", va="bottom", fontsize=7,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.5))
lines = [(f"{ORIGINAL} (eager)", 1e3 / wall[ORIGINAL], "black", "-"),
         (ORIGINAL_GRAPH + ("" if helpers.HAS_GPU else " (step run eagerly)"), 1e3 / wall[ORIGINAL_GRAPH], "gray", "--")]
if COMPILED:
    lines.append((COMPILED, 1e3 / wall[COMPILED], "tab:orange", "-."))
if FLOOR_MS:
    lines.append((f"weight-read floor ({helpers.SLUG}, {reference['nominal_gb_s']} GB/s)", 1e3 / FLOOR_MS, "tab:red", ":"))
for label, y, color, style in lines:
    ax.axhline(y, color=color, linestyle=style, linewidth=1.2, label=f"{label}: {y:.3g}")
ax.set_yscale("log")
values = rates + [y for _, y, _, _ in lines]
ax.set_ylim(min(values) / 1.5, max(values) * 3)
helpers.plain_log_ticks(ax, "y")
ax.set_xticks(x, [textwrap.fill(n, 16) for n in STEPS], fontsize=8)
ax.set_ylabel("decoded tokens/s (1000 / wall ms per decoded token)")
ax.set_xlabel("step of the staircase (each bar: the verdict against the bar before it, per generation)")
ax.set_title("How much speed does each fix win back?")
handles = [Patch(color="tab:blue", label="step launched from Python, kernel by kernel")]
if any(graphed(n) for n in STEPS):
    handles.append(Patch(color="tab:purple", label="step replayed from a CUDA graph"))
handles += ax.get_legend_handles_labels()[0]
ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1),
          title="bars: the staircase; lines: beside it", title_fontsize=8)
helpers.save_figure(fig, "faster_staircase")
plt.show()

# %%
panels = 2 if helpers.HAS_GPU else 1
fig, axes = plt.subplots(1, panels, figsize=(6 * panels + 1, 4.5), sharey=True, squeeze=False)
y = np.arange(len(STEPS))
ax = axes[0, 0]
kernels_per_token = [profiles[n].launches for n in STEPS]
ax.barh(y, kernels_per_token, color=colors)
for i, name in enumerate(STEPS):
    note = " (host: 1 graph launch)" if graphed(name) else ""
    ax.text(kernels_per_token[i], y[i], f" {kernels_per_token[i]:.0f}{note}", va="center", fontsize=8)
ax.axvline(profiles[ORIGINAL].launches, color="black", linewidth=1,
           label=f"{ORIGINAL}: {profiles[ORIGINAL].launches:.0f}")
ax.set_xlim(0, max(kernels_per_token + [profiles[ORIGINAL].launches]) * 1.6)
ax.set_yticks(y, STEPS, fontsize=8)
ax.invert_yaxis()
ax.set_xlabel("kernels per decoded token (every CUDA kernel, torch.profiler)" if helpers.HAS_GPU else
              "our Triton launches per decoded token (CPU mode)")
ax.set_title("Launches per token")
ax.legend(fontsize=8, loc="lower right")
if helpers.HAS_GPU:
    ax = axes[0, 1]
    busy = [profiles[n].gpu_busy_ms_per_token for n in STEPS]
    ax.barh(y, busy, color="tab:green")
    for i, b in enumerate(busy):
        ax.text(b, y[i], f" {b:.2f}", va="center", fontsize=8)
    ax.axvline(profiles[ORIGINAL].gpu_busy_ms_per_token, color="black", linewidth=1,
               label=f"{ORIGINAL}: {profiles[ORIGINAL].gpu_busy_ms_per_token:.2f}")
    if FLOOR_MS:
        ax.axvline(FLOOR_MS, color="tab:red", linestyle=":", label=f"weight-read floor: {FLOOR_MS:.2f}")
    ax.set_xlim(0, max(busy + [profiles[ORIGINAL].gpu_busy_ms_per_token]) * 1.3)
    ax.set_xlabel("GPU-busy ms per decoded token (summed kernel time, torch.profiler)")
    ax.set_title("GPU work per token")
    ax.legend(fontsize=8, loc="lower right")
fig.suptitle("What did each fix change underneath?")
fig.tight_layout()
helpers.save_figure(fig, "faster_launches")
plt.show()

# %% [markdown]
# ## What each fix recovered
#
# Read from the table above, one fix at a time: its verdict against the step before (per generation, round by
# round), and per decoded token the wall ms, kernels and GPU-busy ms before and after. Where a fix made the
# model faster beyond the noise, its share says how much of the staircase's net saving (all-custom model to
# last step, wall ms per decoded token) it brought; where another step lost time, the shares add up to more
# than 100%.

# %%
def read_fix(name: str, before: str, total_ms: float) -> str:
    """One fix in words: its verdict against the step before, and what moved per decoded token."""
    v, r = vs_before_verdict[name], vs_before[name]
    p, q = profiles[name], profiles[before]
    saved = wall[before] - wall[name]
    text = f"- **{name}**: "
    text += (f"{v.text} than *{before}* per generation (median {r.median:.2f}x its time, quartiles "
             f"{r.low:.2f}-{r.high:.2f})" if v.real else
             f"within noise of *{before}* per generation ({r.median:.2f}x its time; {v.reason})")
    text += (f". Per decoded token: {wall[before]:.2f} -> {wall[name]:.2f} wall ms, {q.launches:.0f} -> "
             f"{p.launches:.0f} kernels" + (" (one graph launch by the host)" if graphed(name) else ""))
    if p.gpu_busy_ms_per_token is not None:
        text += f", {q.gpu_busy_ms_per_token:.2f} -> {p.gpu_busy_ms_per_token:.2f} GPU-busy ms"
    faster = v.real and v.text.endswith("faster")
    if v.real and (saved > 0) != faster:
        text += (" (the wall ms per decoded token moved the other way: they leave the prefill out, which the "
                 "per-generation ratio includes)")
    elif faster and total_ms > 0:
        text += f"; {100 * saved / total_ms:.0f}% of the staircase's net saving"
    return text + "."


total_ms = wall[START] - wall[STEPS[-1]]
helpers.md(f"From *{START}* to *{STEPS[-1]}*, the staircase's net saving: {wall[START]:.2f} -> {wall[STEPS[-1]]:.2f} "
           f"wall ms per decoded token ({total_ms:+.2f} ms saved).\n\n"
           + "\n".join(read_fix(name, before, total_ms) for name, before in steps_before.items()))

# %% [markdown]
# ## Targets: does the fast model beat the original, and transformers' compiled path?
#
# We set this chapter two targets before writing it, each read from a verdict of this run's rounds: the
# eager fast model faster than the original eager model, and the fast model replayed from a CUDA graph at
# least as fast as transformers' compiled static-cache generation (a GPU comparison). A third line, the
# moonshot of 1,000 tokens/s, is a distance to go, not a target. A "within noise" is neither met
# nor missed: this run could not tell the two apart.

# %%
def read_target(r: helpers.Ratio, v: helpers.Verdict, who: str, other: str, target: str) -> str:
    """A target read from a verdict: met, missed or undecided, with the ratio it rests on."""
    if v.real and v.text.endswith("faster"):
        outcome = f"**met**: {who} was {v.text} than {other}"
    elif v.real:
        outcome = f"**missed**: {who} was {v.text} than {other}"
    else:
        outcome = f"**undecided**: {who} was within noise of {other}, {v.reason}"
    return (f"- *{target}*: {outcome}; median {r.median:.3f}x its time per generation, quartiles "
            f"{r.low:.2f}-{r.high:.2f}, {len(r.values)} rounds.")


checks = [read_target(comparison.ratios[FAST], comparison.verdict(FAST), f"the eager fast model (*{FAST}*)",
                      "the original eager", "the eager fast model is faster than the original eager")]
if COMPILED:
    graph_vs_compiled = step_ratio(FAST_GRAPH, COMPILED)
    graph_vs_compiled_verdict = helpers.verdict(graph_vs_compiled, floor)
    checks.append(read_target(graph_vs_compiled, graph_vs_compiled_verdict, f"the graph fast model (*{FAST_GRAPH}*)",
                              f"*{COMPILED}*", "the graph fast model is at least as fast as transformers' compiled path"))
    fast_rate = 1e3 / wall[FAST_GRAPH]
    checks.append(f"- *Moonshot, 1,000 tokens/s*: the graph fast model decoded {fast_rate:.0f} tokens/s "
                  f"(1000 / {wall[FAST_GRAPH]:.2f} wall ms per decoded token; "
                  f"{comparison.tokens_per_s[FAST_GRAPH]:.0f} tokens/s with the prefill included): "
                  + ("reached." if fast_rate >= 1000 else f"{fast_rate / 1000:.0%} of the way."))
else:
    checks.append("- *The graph fast model against transformers' compiled path*: not judged here; transformers' "
                  "compiled generation needs a GPU.")
if not helpers.HAS_GPU:
    checks.append("CPU mode: these verdicts compare interpreter times on a tiny model, not a GPU's.")
helpers.md("\n".join(checks))

# %% [markdown]
# ## What should a T4 reader expect?
#
# An **estimate**, not a measurement: the blog's T4 ran the original at `full.tps_original` tokens/s
# (the blog's figure, in the catalogue). Two rules turn ratios measured on a faster GPU into T4 numbers:
#
# - an eager step is bound by the host launching kernels, on a T4 as here: its T4 tokens/s is the blog's
#   original tokens/s divided by the step's time ratio to the original, never above the T4's floor;
# - a graph-replayed step is bound by the GPU's work, so it gets a range: at worst its GPU-busy time scaled
#   by the two GPUs' bandwidth ratio (the T4's kernels reaching no larger a share of its bandwidth than this
#   GPU's reached; a small GPU is usually easier to keep busy, so this end is pessimistic), at best the T4's
#   weight-read floor: Qwen3-0.6B's bytes in float16 over the T4's 320 GB/s.
#
# The ratios come from this run when it ran on a GPU; otherwise from the committed H200 run, where it has
# recorded this chapter's results.

# %%
def real_model_bytes() -> int:
    """Qwen3-0.6B's weights in float16 (a T4 runs float16), counted on the meta device: no memory, no download."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        real = Qwen3ForCausalLM(Qwen3Config(**helpers.QWEN3_0_6B))
    return helpers.module_census(real)["parameters"] * torch.finfo(torch.float16).bits // 8


def t4_estimate(points: dict, source_gb_s: float | None, blog_tps: float, t4_bytes: int) -> pd.DataFrame:
    """T4 tokens/s per configuration: ``points`` maps a name to (time ratio to the original, GPU-busy ms per token
    or None, replayed from a graph?), measured on a GPU of ``source_gb_s`` nominal GB/s."""
    t4_gb_s = helpers.NOMINAL_GB_S["t4"]
    floor_tps = t4_gb_s * 1e9 / t4_bytes
    rows = []
    for name, (ratio, busy_ms, graph) in points.items():
        if graph and busy_ms is not None and source_gb_s:
            low = min(floor_tps, 1e3 / (busy_ms * source_gb_s / t4_gb_s))
            rows.append({"configuration": name, "rule": "GPU-bound: from GPU-busy x bandwidth ratio up to the floor",
                         "T4 tokens/s (estimate, low)": low, "T4 tokens/s (estimate, high)": floor_tps})
        else:
            tps = min(floor_tps, blog_tps / ratio)
            rows.append({"configuration": name, "rule": "host-bound: the blog's original / this time ratio",
                         "T4 tokens/s (estimate, low)": tps, "T4 tokens/s (estimate, high)": tps})
    return pd.DataFrame(rows).set_index("configuration")


T4_BYTES = real_model_bytes()
T4_FLOOR_TPS = helpers.NOMINAL_GB_S["t4"] * 1e9 / T4_BYTES
BLOG_TPS = helpers.blog("full.tps_original")
t4_names = [*STEPS, ORIGINAL_GRAPH]
if helpers.HAS_GPU:
    t4_source, t4_gb_s = f"this run ({helpers.SLUG})", helpers.NOMINAL_GB_S.get(helpers.SLUG)
    t4_points = {n: (comparison.ratios[n].median, profiles[n].gpu_busy_ms_per_token, graphed(n)) for n in t4_names}
else:  # the interpreter's ratios say nothing about a GPU: the committed H200 run's, where recorded
    h200 = helpers.results(helpers.COMMITTED_DIR / "h200" / "results.csv")
    h200_values = dict(zip(h200["id"], h200["value"]))
    t4_source, t4_gb_s = "the committed H200 run", helpers.NOMINAL_GB_S["h200"]
    t4_points = {n: (h200_values[f"faster.{tag(n)}.vs_original"], h200_values.get(f"faster.{tag(n)}.gpu_busy_ms_per_token"),
                     decoder_of(n) == "graph")
                 for n in t4_names if f"faster.{tag(n)}.vs_original" in h200_values}
text = (f"The T4's weight-read floor: {T4_BYTES / 1e9:.2f} GB of Qwen3-0.6B weights (float16) / "
        f"{helpers.NOMINAL_GB_S['t4']} GB/s = {1e3 / T4_FLOOR_TPS:.2f} ms per token, at most "
        f"**{T4_FLOOR_TPS:.0f} tokens/s**. The blog's T4 original: {BLOG_TPS:.2f} tokens/s. ")
if t4_points:
    t4 = t4_estimate(t4_points, t4_gb_s, BLOG_TPS, T4_BYTES)
    helpers.show(t4.round(1))
    low, high = "T4 tokens/s (estimate, low)", "T4 tokens/s (estimate, high)"
    expected = [f"about {t4.loc[FAST, low]:.0f} tokens/s from the eager fast model"] if FAST in t4.index else []
    if FAST_GRAPH in t4.index:
        g_low, g_high = t4.loc[FAST_GRAPH, low], t4.loc[FAST_GRAPH, high]
        expected.append(f"{g_low:.0f} to {g_high:.0f} tokens/s from the graph fast model" if g_high > g_low else
                        f"about {g_low:.0f} tokens/s from the graph fast model")
    text += f"From {t4_source}'s ratios, a T4 reader should expect, as an estimate, " + " and ".join(expected) + "."
    blog_custom = helpers.blog("full.tps_custom")
    if START in t4.index and isinstance(blog_custom, float):  # the one step the blog measured on its T4
        text += (f" A check of the host-bound rule on a number the blog did measure: it estimates the all-custom "
                 f"model at {t4.loc[START, low]:.1f} tokens/s on a T4, and the blog measured {blog_custom:.2f}.")
    text += (" A T4's host (Colab's) is not this run's, and a T4's small kernels run further from its bandwidth "
             "than a large GPU's: read these as the order of magnitude, and measure.")
else:
    text += ("CPU mode: the interpreter's ratios say nothing about a GPU, and the committed H200 run has not recorded "
             "this chapter's results yet, so there is no estimate per step here.")
helpers.md(text)

# %% [markdown]
# ## Record the results
#
# Every configuration's numbers go into your results file under `faster.<configuration>.*` (the catalogue's
# `faster.{config}.*` rows), the ratios with their quartiles and verdicts; the three headline numbers
# (the eager fast model against the original, the graph fast model's tokens/s and, on a GPU, its ratio to
# transformers' compiled path) get their own ids for the README's results table.

# %%
tps_note = (f"median of {len(comparison.orders)} shuffled rounds; new tokens / generation wall time, prefill "
            f"included; prompt {comparison.prompt_len}, {comparison.new_tokens} new tokens")
wall_note = (f"wall ms per decoded token, prefill excluded, from the {len(comparison.orders)} shuffled rounds"
             + ("" if helpers.HAS_GPU else " (CPU mode: interpreter time)"))
for name, p in profiles.items():
    t = tag(name)
    helpers.record(f"faster.{t}.tps", comparison.tokens_per_s[name], "tokens/s", f"{how_it_decodes(name)}; {tps_note}")
    helpers.record(f"faster.{t}.wall_ms_per_token", p.wall_ms_per_token, "ms", f"{wall_note}; {p.note}")
    helpers.record(f"faster.{t}.launches_per_token", p.launches, "launches",
                   helpers.launch_note() + ("; one graph launch by the host" if graphed(name) else ""))
    if p.gpu_busy_ms_per_token is not None:
        helpers.record(f"faster.{t}.gpu_busy_ms_per_token", p.gpu_busy_ms_per_token, "ms",
                       "summed kernel time per decoded token (torch.profiler, after the rounds)")
    if name in predictions:
        helpers.record(f"faster.{t}.predicted_wall_ms_per_token", predictions[name], "ms",
                       f"{role(name, FITTED)}; " + ("GPU-busy time (graph)" if graphed(name) else price_source))
    if name != ORIGINAL:
        comparison.record(name, f"faster.{t}.vs_original", "generation time / original's, round by round")
aa_note = (f"median of {len(comparison.orders)} shuffled rounds, A/A floor {floor.median:.3f} "
           f"({floor.low:.2f}-{floor.high:.2f})")
for name, before in steps_before.items():
    r = vs_before[name]
    helpers.record(f"faster.{tag(name)}.vs_previous", r.median, "x slower",
                   f"generation time / {before}'s, round by round; {aa_note}", spread=r,
                   verdict=vs_before_verdict[name].text)
comparison.record(FAST, "faster.fast_eager_vs_original", f"{FAST} / original, generation time, round by round")
helpers.record("faster.fast_graph_tps", comparison.tokens_per_s[FAST_GRAPH], "tokens/s",
               f"{FAST_GRAPH}: {how_it_decodes(FAST_GRAPH)}; {tps_note}")
if COMPILED:
    helpers.record("faster.fast_graph_vs_compiled", graph_vs_compiled.median, "x slower",
                   f"{FAST_GRAPH} / {COMPILED}, generation time, round by round; {aa_note}", spread=graph_vs_compiled,
                   verdict=graph_vs_compiled_verdict.text)
if FLOOR_MS:
    helpers.record("faster.floor_ms_per_token", FLOOR_MS, "ms",
                   f"model bytes / nominal bandwidth ({reference['nominal_gb_s']} GB/s, {helpers.SLUG})")
helpers.show(helpers.compare(["faster.fast_eager_vs_original", "faster.fast_graph_tps", "faster.fast_graph_vs_compiled",
                              f"faster.{tag(FAST)}.wall_ms_per_token", f"faster.{tag(FAST_GRAPH)}.wall_ms_per_token",
                              "full.tps_original", "full.tps_custom"]))

# %% [markdown]
# ## Takeaway

# %%
fast_v = comparison.verdict(FAST)
lines = [f"- From the all-custom model to the last step of the staircase, the wall time per decoded token went from "
         f"{wall[START]:.2f} to {wall[STEPS[-1]]:.2f} ms and the kernels per token from {profiles[START].launches:.0f} "
         f"to {profiles[STEPS[-1]].launches:.0f}" + (" (one graph launch by the host)" if graphed(STEPS[-1]) else "")
         + f"; the original eager model takes {wall[ORIGINAL]:.2f} wall ms per decoded token.",
         f"- The eager fast model against the original eager: "
         + (f"{fast_v.text}." if fast_v.real else f"within noise ({fast_v.reason}).")]
real_fixes = [n for n, v in vs_before_verdict.items() if v.real and v.text.endswith("faster")]
if real_fixes:
    top = max(real_fixes, key=lambda n: wall[steps_before[n]] - wall[n])
    lines.append(f"- The fix that won back the most wall time per decoded token: *{top}* "
                 f"({wall[steps_before[top]] - wall[top]:.2f} wall ms, {vs_before_verdict[top].text} than the step "
                 "before per generation).")
lines.append(f"- Launch-budget predictions within {100 * BAR:.0f}%: "
             f"{int((judged[f'within {100 * BAR:.0f}%'] == 'yes').sum())} of {int((judged['role'] == 'predicted').sum())}.")
if not helpers.HAS_GPU:
    lines.append("- CPU mode: all of this is interpreter time on a tiny model; the method is the point, the numbers "
                 "are not a GPU's.")
helpers.md("\n".join(lines))

# %% [markdown]
# The lessons of the slow chapters hold in reverse, with a caveat this chapter measured. At batch size 1 the
# host's launches set most of a token's time, so the fixes that remove launches (the attention loop first,
# then fusions) won back the most here; but the launch budget's prices, fitted on the slow kernels, did not
# predict every step (the table of predictions above says which missed, and by how much), and a step that
# cuts GPU work without cutting launches, as the matrix-vector projections do, can win little while the host
# sets the pace (compare its row in the staircase with the step before). Once the host launches one graph per token, what remains is the GPU's own work, and
# only better kernels bring it down towards the weight-read floor. Every number above is your own run's: rerun the chapter, on another GPU, and read it again.
