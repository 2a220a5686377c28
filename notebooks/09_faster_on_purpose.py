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
# - how well chapter 8's launch budget predicts each step from the price of each of our modules and of the
#   original's module it replaces, each measured on its own, and how well the GPU's own time (its kernels'
#   time plus the gap a graph leaves between kernels) predicts a step replayed from our own CUDA graph
#   (`helpers.GraphDecoder`), and why neither predicts transformers' compiled path;
# - what one decode step looks like on a timeline, eager against replayed from a graph, and which kinds of
#   kernel the graph's step runs more or fewer of than the eager one;
# - where the fast kernels sit on a roofline beside the slow kernels of chapters 2 to 5;
# - whether the fast model beats the original eager model, and transformers' own compiled generation;
# - what a reader with a T4 should expect, as an estimate built from this run's ratios and the T4's floor.

# %% [markdown]
# ## The idea
#
# Chapters 2 to 7 made Qwen3-0.6B slower on purpose and measured why, and chapter 8 gathered the lessons.
# Two findings carried the series: every kernel launch costs the host time, whatever the kernel does; and at
# batch size 1 the GPU spends most of each token waiting for the host to launch the next kernel. So the way
# back is to launch less.
#
# This chapter walks the staircase `helpers.STAIRCASE` from the all-custom model (two-pass RMSNorms, tiled
# matmuls for every projection, the per-head attention loop) to a fast model, one swap per step:
#
# 1. **fast attention**: one grouped-query decode kernel instead of three launches of ours per query head
#    (plus PyTorch's own kernels around them: the price list counts every kernel). It is
#    *split-KV flash-decoding*: once the cache holds enough keys, they are cut into chunks that separate
#    programs read in parallel, and a second, small launch combines their partial results; with fewer keys,
#    as in this chapter's short generations, it is one launch (the launch count below says when it splits;
#    exercise 2 times it without the split);
# 2. **fused RMSNorm**: every RMSNorm in one launch instead of two;
# 3. **matrix-vector projections**: at decode the projections multiply a single row, so a small-M kernel
#    (a *gemv*, matrix times vector) replaces the 64 x 64 tiled matmul; then (3b) the MLP fused: gate and up
#    in one projection, SwiGLU, down, three launches in all. (*SwiGLU* is Qwen3's MLP activation:
#    `silu(gate) * up`, element by element.)
# 4. **fused layers**: q, k and v in one projection, q/k norm and RoPE in one launch, the residual add fused
#    with the next RMSNorm: the fast model (`helpers.ALL_FAST`), still launched from Python token by token.
#    (*q/k norm*: Qwen3 applies an RMSNorm to every head's query and key vectors; *RoPE*, rotary position
#    embedding, then rotates pairs of their elements by angles set by the token's position, which is how
#    attention knows where each token sits.)
# 5. **CUDA graph**: the same fast model, each decode step replayed from one CUDA graph
#    (`helpers.GraphDecoder`): one launch per token for the host. A graph records the kernels *and the memory
#    addresses* they read and write, so every tensor it touches must stay where it was at capture: the KV
#    cache cannot grow (a growing cache moves to new memory), so the graph decoder allocates a *static* cache,
#    as long as the whole generation, once, and writes each step's key and value into it in place.
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
import dataclasses
import inspect
import re
import textwrap
import warnings
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.patches import Patch
from transformers import DynamicCache, StaticCache

import helpers
import slower_kernels
from slower_kernels.gemv import INTERPRETER_MIN_PROGRAMS, MIN_PROGRAMS

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
# The fused decoder layer of step 4 is short enough to read whole. Each line is one launch, except the two
# that call blocks (`slower_kernels.FastAttention` and `slower_kernels.FastMLP`, in `slower_kernels/modules.py`):
#
# - `self_attn`: the q/k/v projection (1), q/k norm + RoPE (1), the two appends of the new key and value to
#   `generate()`'s growing cache (PyTorch's `torch.cat`, 2), the decode attention, o_proj (1). The decode
#   attention is one launch while the keys are too few to split (fewer than twice `MIN_SPLIT_KEYS` in
#   `slower_kernels/fast_attention.py`: a split gets at least that many keys), and two once they are split: the
#   split-KV pass and the small combine launch. So 6 launches, or 7 with the keys split;
# - `self.mlp`: gate/up, SwiGLU, down: 3 launches;
# - and the last line's `residual + ...` is one PyTorch add.
#
# With the input RMSNorm and the add + RMSNorm, 12 launches per layer and decode step (13 with the keys
# split); the rest of a token's launches (the embedding, RoPE's cos/sin table, the final norm, lm_head,
# `generate()`'s picking of the next token) come once per token, not per layer. transformers' own layer
# launches several times as many kernels for the same arithmetic.

# %%
print(inspect.getsource(slower_kernels.FastDecoderLayer.forward))

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
#    tokens the eager fast model generates, up to near-ties: it runs the same Triton kernels, but over a
#    static cache, whose bookkeeping can add PyTorch kernels of its own (the trace below counts them), and
#    where the decode attention splits the keys differently. Its first token comes from the same eager prefill, so a difference there
#    is a bug.

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


def graph_split_margin(first_graph: int):
    """At the graph decoder's first split from the eager fast model: (the eager fast model's top-2 margin, the
    largest |eager step - static-cache step| logit), both decoders fed the same tokens (the eager fast model's
    prompt and generated tokens before the split), one decode step at a time; None when they never split.

    The graph replays the static-cache step it captured, the same kernels on the same tensors, so the step run
    eagerly over a static cache computes the graph's logits; the eager fast model's step reads a growing
    (dynamic) cache, as generate() does."""
    if first_graph < 0:
        return None
    tokens = torch.cat([prompt, ids_fast[:first_graph].to(prompt.device)[None]], dim=1)
    p = prompt.shape[1]
    with torch.no_grad(), helpers.patched(model, **helpers.ALL_FAST):
        dynamic = DynamicCache(config=model.config)
        static = StaticCache(config=model.config, max_cache_len=p + N)
        at_eager = model(prompt, past_key_values=dynamic, use_cache=True).logits[0, -1].float()
        at_static = model(prompt, past_key_values=static, use_cache=True).logits[0, -1].float()
        for pos in range(p, tokens.shape[1]):  # token pos predicts generated token pos - p + 1
            step = tokens[:, pos:pos + 1]
            at_eager = model(step, past_key_values=dynamic, use_cache=True).logits[0, -1].float()
            at_static = model(input_ids=step, position_ids=torch.full_like(step, pos), past_key_values=static,
                              use_cache=True).logits[0, -1].float()
    top = at_eager.topk(2).values
    return (top[0] - top[1]).item(), (at_eager - at_static).abs().max().item()


def read_agreement(first: int, first_graph: int, n: int, chapter6, margin, graph_margin) -> str:
    """The token checks in words: where the fast model's greedy text leaves the original's (and whether a near-tie
    explains it: ``margin`` from ``split_margin``), and whether the graph decoder reproduces the eager fast model
    (``graph_margin`` from ``graph_split_margin``). ``chapter6``: the first divergence of chapter 6 in your results
    file when this chapter ran, or None."""
    if first < 0:
        text = f"The fast model's {n} greedy tokens are the original's, every one. "
    else:
        top2, gap = margin
        text = (f"The fast model's greedy tokens follow the original's up to generated token {first}, where they "
                "first differ. " if first else "The fast model's greedy tokens differ from the original's from the "
                "first generated token on. ")
        if top2 == 0:
            text += (f"There the original's top-2 margin was exactly 0: a tie in the original itself, which its argmax "
                     f"breaks by taking the lower token id, and the models' logits differed by up to {gap:.3g}, enough "
                     "to break the tie the other way (chapter 6 showed the same kind of flip). ")
        elif top2 <= 2 * gap:
            text += (f"There the original's top-2 margin was {top2:.3g} and the models' logits differed by up to {gap:.3g}, "
                     f"so the fast model's could close that margin by up to {2 * gap:.3g}: a near-tie, flipped by "
                     "the fused kernels adding in another order than PyTorch's (chapter 6 showed the same). ")
        else:
            text += (f"**That is not rounding**: the original's top-2 margin there was {top2:.3g}, wider than twice the "
                     f"largest logit difference between the models ({2 * gap:.3g}) on the same prefix read at once, so "
                     "the fast model's decode path computes something else. ")
    if chapter6 is not None:
        text += ("Chapter 6's all-custom model, as your results file held it when this chapter ran (the file keeps "
                 "the latest value of each result, which can come from an earlier run of the series than this one), " +
                 (f"first differed at token {chapter6:.0f}. " if chapter6 >= 0 else "never differed. "))
    if first_graph < 0:
        text += (f"The graph decoder generated exactly the eager fast model's {n} tokens"
                 + (": replaying the step from a CUDA graph changes when kernels are launched, not what they compute."
                    if helpers.HAS_GPU else " (in CPU mode its step runs eagerly, with a static cache)."))
    else:
        text += f"The graph decoder left the eager fast model's tokens at generated token {first_graph}. "
        if first_graph == 0:
            text += "Token 0 comes from the same eager prefill in both, so a difference there is a bug, not rounding."
        else:
            top2, gap = graph_margin
            text += ("Both ran the same prefill; from then on the graph's static cache is longer than the text, so the "
                     "decode attention splits the keys differently from the eager run's growing cache: another order "
                     f"of additions. Fed the same tokens, one step at a time, the eager fast model's top-2 margin at "
                     f"that token was {top2:.3g} and its logits differed from the static-cache step's by up to "
                     f"{gap:.3g}: ")
            text += ("an exact tie (margin 0), broken the other way by rounding." if top2 == 0 else
                     f"a margin of at most twice that difference ({2 * gap:.3g}), so a near-tie, flipped by rounding."
                     if top2 <= 2 * gap else
                     f"**that is not rounding**: the margin is wider than twice the difference ({2 * gap:.3g}), so the "
                     "graph's step computes something else than the eager step.")
    return text


chapter6_rows = helpers.results()
chapter6_rows = chapter6_rows[chapter6_rows["id"] == "full.first_divergence"]
margin = split_margin(first)
if margin is not None:
    print(f"at the split: original's top-2 margin {margin[0]:.3g}; largest logit difference between the models "
          f"{margin[1]:.3g} (a flip needs margin <= 2 x difference)")
graph_margin = graph_split_margin(first_graph) if first_graph > 0 else None
if graph_margin is not None:
    print(f"at the graph split: eager fast model's top-2 margin {graph_margin[0]:.3g}; largest logit difference, "
          f"eager step against static-cache step, {graph_margin[1]:.3g}")
helpers.md(read_agreement(first, first_graph, N, float(chapter6_rows["value"].iloc[0]) if len(chapter6_rows) else None,
                          margin, graph_margin))

# %% [markdown]
# ## Measure every step in the same rounds
#
# One `helpers.compare_configs` run times every step of the staircase and the lines beside it, with the
# original twice (its A/A ratio is this run's noise floor). Each of `SIZES.rounds` rounds runs every
# configuration once, in a shuffled order: a greedy generation of `SIZES.new_tokens` new tokens from the
# `SIZES.prompt_len`-token prompt, then a one-token generation, so that the wall ms per decoded token (prefill
# excluded) come from the same rounds. A graph configuration builds its static cache and captures its step in
# every run, before the timed part; transformers' compiled path compiles once, in the untimed warm-up.
# `prices=True` prices the modules of ours in every step launched from Python: the warm-up captures one
# decode-step call of each kind of module of ours that the step calls from outside another of ours (a
# `TritonRMSNorm`, a `TritonLinear` or `GemvLinear`, a `FastMLP`, a whole `FastDecoderLayer`, the attention),
# and in every round, right after the step's generations, each call is timed on its own on the host's clock, so
# the prices see the same host as the wall times. After the rounds, `profile=True` counts each configuration's
# kernels and GPU-busy time per decoded token with `torch.profiler`.
#
# Two clocks for the rounds: **wall** is the host's clock (synchronised) per decoded token or per generation,
# what a user waits for; **GPU-busy** is the profiler's summed kernel time per decoded token, what the GPU
# worked. The prices are host µs per call, and later cells name their own clocks (GPU time of a CUDA-graph
# replay, a trace's µs) where they appear. Every ratio below is a time ratio (above 1: slower), the median of
# per-round ratios, with its verdict against the A/A floor (`helpers.verdict`).

# %%
with warnings.catch_warnings():
    # transformers' compiled path: inductor warns that float32 matmuls could use TF32 tensor cores. The model runs
    # in float16, so the precision of float32 matmuls is not ours to change here: we leave it, and the warning out.
    warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores", category=UserWarning)
    comparison = helpers.compare_configs(model, CONFIGS, tokenizer=tokenizer, profile=True, prices=True)
profiles = {name: comparison.profile(name) for name in comparison.counts}
floor = comparison.floor
print(f"{len(comparison.orders)} shuffled rounds, prompt {comparison.prompt_len} tokens, "
      f"{comparison.new_tokens} new tokens; A/A floor {floor.median:.3f} (quartiles {floor.quartiles}), "
      f"noise threshold {100 * helpers.noise_threshold(floor):.0f}%")

# %% [markdown]
# ## Predict each step from its launches
#
# Chapter 8's launch budget (`helpers.ModuleBudget`) prices a decoded token from what the host does for it,
# swap by swap:
#
# - every call of a module of ours replaces one call of the original's module: a `TritonLinear` or a
#   `GemvLinear` an `nn.Linear`, a `TritonRMSNorm` a `Qwen3RMSNorm`, a `FastDecoderLayer` a
#   `Qwen3DecoderLayer`, our attention function transformers' own (`sdpa`);
# - each kind of call, ours and the original's, is priced on its own: the host time of one call in a loop,
#   measured in the same rounds as the wall times, with its kernels' launches and the framework's Python
#   around them (a `FastDecoderLayer` call launches a dozen kernels, a fused `TritonRMSNorm` call one and a
#   two-pass one two, and their Python differs as much);
# - a step's host time per token is the original's measured wall ms plus, for every call swapped, our call's
#   price minus the replaced call's, times one *in-situ factor*: how much dearer calls are inside the model,
#   where the rest of the step competes for the host's caches, than in a loop on their own (fitted once;
#   below 1 where a step's calls came out cheaper inside);
# - the GPU works while the host is still launching, so the token takes the longer of the two:
#   `max(host, GPU-busy)`.
#
# The host's speed differs from one process to the next by more than the spread inside one, so everything
# comes from this run: the base is the original's own wall ms (measured, not fitted: its role reads *base*),
# the in-situ factor is fitted on the all-custom model (role *fitted*). Those two rows are on the line by
# construction. Every other step is predicted from its calls, their prices alone and its GPU-busy time, with
# numbers that have not seen its time.
#
# A step replayed from a CUDA graph launches once per token, so there is no launch budget to pay: its
# prediction is the GPU's own time per token, with the host out of the way. That is more than its GPU-busy
# time: the profiler sums each kernel's own run time, and leaves out the gap the GPU spends between one
# kernel's end and the next one's start, which a replay still pays once per kernel. So a graph row's
# prediction is its GPU-busy time plus its kernels per token times one *graph gap*
# (`helpers.graph_step_ms`). The gap is measured once, here, on a graph of one-element adds
# (`helpers.graph_kernel_gap_us`: their GPU time per replay, `do_bench_cudagraph`, minus their summed kernel
# time from `torch.profiler`, over the kernels), so it has not seen any configuration's time either. In CPU
# mode there is no GPU time and no graph: the same budget runs on the interpreter's clock, graph rows
# included (their step runs eagerly).

# %%
def launch_prices():
    """(ModuleBudget, where its numbers come from, the configurations of this run it was fitted on)."""
    fitted = (ORIGINAL, START)
    budget = helpers.fit_module_budget(profiles, fitted)
    clock = "wall ms" if helpers.HAS_GPU else "interpreter ms"
    return (budget, f"the base is *{ORIGINAL}*'s own {budget.base_ms:.2f} {clock} per decoded token (measured); each "
                    "call of ours adds its price alone minus the price alone of the original's call it replaces, x "
                    f"{budget.in_situ:.2f} in the model (fitted on *{START}*)", fitted)


def predict_ms(name: str, p, budget) -> float:
    """Predicted wall ms per decoded token of ``name`` from its profile ``p`` (launch counts, prices, GPU-busy)."""
    if graphed(name):  # one host launch per token: what is left is the GPU's work, its kernels and the gaps between
        return helpers.graph_step_ms(p.gpu_busy_ms_per_token, p.launches, GAP_US)
    return budget.predict_ms(p)


def eager_of(name: str) -> str:
    """The configuration that generate()s with the same modules: a graph row's eager counterpart, else itself."""
    if decoder_of(name) != "graph":
        return name
    kwargs = {k: v for k, v in CONFIGS[name].items() if k != "decoder"}
    return ORIGINAL if not kwargs else next(n for n in STEPS if CONFIGS[n] == kwargs)


if not helpers.HAS_GPU:  # CPU mode steps a graph row eagerly: it makes its eager twin's calls, at their prices
    profiles.update({n: dataclasses.replace(profiles[n], modules=profiles[eager_of(n)].modules)
                     for n in profiles if eager_of(n) != n})


def role(name: str, fitted: tuple) -> str:
    """"base" for the original (its own measured time is the budget's base), "fitted" for the configuration the
    in-situ factor is fitted on, "predicted" for every other."""
    return "base" if name == fitted[0] else "fitted" if name in fitted else "predicted"


def busy_cell(p):
    """A profile's GPU-busy ms per decoded token for a table (helpers.show rounds it), or "n/a (CPU)"."""
    return "n/a (CPU)" if p.gpu_busy_ms_per_token is None else p.gpu_busy_ms_per_token


GRAPH_HOW = "GPU-busy time + graph gaps"  # how a step replayed from a CUDA graph is predicted (helpers.graph_step_ms)


def graph_note(name: str) -> str:
    """How a graph row's prediction was made, for its recorded note (which ends with "(graph)": chapter 8 reads it)."""
    return f"GPU-busy time + {GAP_US:.3f} GPU µs x {profiles[name].launches:.0f} kernels (graph)"


budget, price_source, FITTED = launch_prices()
GAP_US = helpers.graph_kernel_gap_us()  # GPU µs per kernel a graph replay spends beyond its kernels; None in CPU mode
if GAP_US is None:
    print("graph gap: none in CPU mode (no GPU, no CUDA graph)")
else:
    gap_note = (f"GPU time of one replay of a CUDA graph of {helpers.GRAPH_GAP_KERNELS} one-element adds "
                "(do_bench_cudagraph, median) minus their summed kernel time from torch.profiler, over the kernels")
    print(f"graph gap: {GAP_US:.3f} GPU µs per kernel beyond the kernels' own time; {gap_note}"
          + ("; negative: the profiler's kernel times already cover what the replay spends" if GAP_US < 0 else ""))
    helpers.record("faster.graph_kernel_gap_us", GAP_US, "us", gap_note)
PREDICTED = [ORIGINAL, *STEPS, ORIGINAL_GRAPH]  # transformers' compiled path runs inside torch.compile: not priced
# (the judged table below shows the graph rule's number for it beside its measurement, counted in neither tally)
predictions = {name: predict_ms(name, profiles[name], budget) for name in PREDICTED}
predicted_table = pd.DataFrame([{
    "configuration": name, "how": (f"{GRAPH_HOW} (one graph launch per token)" if graphed(name) else "launch budget"),
    "kernels per token": profiles[name].launches,
    "calls swapped per token": sum(m.per_token for m in profiles[name].modules.values() if m.twin),
    f"swaps at prices alone, {'host' if helpers.HAS_GPU else 'interpreter'} ms per token":
        "-" if graphed(name) else budget.swapped_ms(profiles[name]),
    "GPU-busy ms per token": busy_cell(profiles[name]),
    "predicted wall ms per token": predictions[name], "role": role(name, FITTED)} for name in PREDICTED])
print(f"prices: {price_source}")
print(f"per decoded token, prefill excluded; kernels: {helpers.launch_note()}")
helpers.show(predicted_table.set_index("configuration"))

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
    return {f"{prefix}": r.median, f"{prefix} quartiles": r.quartiles,
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
           "GPU-busy ms per token": busy_cell(p)}
    if name in vs_before:
        row.update(ratio_cells(vs_before[name], vs_before_verdict[name], "x the step before"))
    else:
        row.update({"x the step before": "(the start)", "x the step before quartiles": "-",
                    "x the step before verdict": "-"})
    row.update(ratio_cells(comparison.ratios[name], comparison.verdict(name), "x the original"))
    rows.append(row)
staircase = pd.DataFrame(rows).set_index("step")
helpers.show(staircase)
print("ratios: wall time per generation (prefill included), median of per-round ratios; above 1 slower. "
      f"Kernels: {helpers.launch_note()}.")


def read_orders(names: list, shown: int = 6) -> str:
    """Where the tokens/s medians rank two steps in the opposite order to their time ratios to the original, the
    pairs, each judged round by round (``step_ratio``, against the A/A floor); '' where the two agree."""
    tps, ratio = comparison.tokens_per_s, {n: comparison.ratios[n].median for n in names}
    crossed = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
               if (tps[a] - tps[b]) * (ratio[a] - ratio[b]) > 0]  # more tokens/s, yet a larger time ratio
    if not crossed:
        return ""
    pairs = []
    for a, b in crossed[:shown]:
        r = step_ratio(a, b)
        v = helpers.verdict(r, floor)
        pairs.append(f"*{a}* against *{b}* ({tps[a]:.2f} against {tps[b]:.2f} tokens/s, but {ratio[a]:.3f}x against "
                     f"{ratio[b]:.3f}x the original's time; round by round *{a}* was "
                     + (f"{v.text} than *{b}*)" if v.real else f"within noise of *{b}*: {v.reason})"))
    return ("The two columns rank " + (f"{len(crossed)} pairs" if len(crossed) > 1 else "one pair")
            + " of steps in opposite orders: " + "; ".join(pairs)
            + (f"; and {len(crossed) - shown} more" if len(crossed) > shown else "")
            + ". *tokens/s (median)* is the median of each configuration's own rounds, so the host's drift from round "
            "to round stays in it; a time ratio is the median of per-round ratios, each generation's time over "
            "another's in the same round, so that drift cancels out of it. Read the ratios and their verdicts, not the "
            "order of the tokens/s.")


orders = read_orders([n for n in STEPS if n in comparison.ratios])
if orders:
    helpers.md(orders)

# %% [markdown]
# ### Beside the staircase
#
# The original as `generate()` runs it, the original with the CUDA-graph step alone, transformers' compiled
# static-cache generation (GPU only), and the weight-read floor: the model's bytes over your GPU's nominal
# bandwidth (`helpers.NOMINAL_GB_S`), the time it takes just to read every weight once per token. The floor
# is a bound computed from bytes and a data sheet, not a time on any clock, so it has its own column; the
# column that sets everything beside it is "decoded tokens/s" = 1000 / (ms per decoded token): wall ms for
# the measured lines (prefill excluded), the floor's ms for the floor.

# %%
reference = helpers.bandwidth(model, comparison.tokens_per_s[ORIGINAL])
FLOOR_MS = reference["floor_ms_per_token"]  # None in CPU mode, or for a GPU without a nominal bandwidth
beside_rows = []
for name in [ORIGINAL, ORIGINAL_GRAPH, *([COMPILED] if COMPILED else [])]:
    row = {"line": name, "decodes with": how_it_decodes(name), "tokens/s (median)": comparison.tokens_per_s[name],
           "wall ms per decoded token": wall[name], "decoded tokens/s": 1e3 / wall[name],
           "kernels per token": profiles[name].launches,
           "GPU-busy ms per token": busy_cell(profiles[name])}
    row["floor ms per decoded token (bytes / bandwidth)"] = "-"
    if name != ORIGINAL:
        row.update(ratio_cells(comparison.ratios[name], comparison.verdict(name), "x the original"))
    else:
        row.update({"x the original": "(reference)", "x the original quartiles": "-", "x the original verdict": "-"})
    beside_rows.append(row)
beside_rows.append({"line": f"weight-read floor ({helpers.SLUG})",
                    "decodes with": (f"{reference['model_bytes'] / 1e9:.3f} GB / {reference['nominal_gb_s']} GB/s"
                                     if FLOOR_MS else f"n/a: {reference['note']}"),
                    "tokens/s (median)": "-", "wall ms per decoded token": "- (a bound, not a time)",
                    "floor ms per decoded token (bytes / bandwidth)": FLOOR_MS if FLOOR_MS else "n/a",
                    "decoded tokens/s": 1e3 / FLOOR_MS if FLOOR_MS else "n/a", "kernels per token": "-",
                    "GPU-busy ms per token": "-", "x the original": "-", "x the original quartiles": "-",
                    "x the original verdict": "-"})
beside = pd.DataFrame(beside_rows).set_index("line")
helpers.show(beside)
print("x the original: wall time per generation (prefill included), median of per-round ratios; above 1 slower. "
      "Not the ratio of the wall ms per decoded token beside it (prefill excluded).")
if COMPILED is None:
    helpers.md("CPU mode: transformers' compiled path needs a GPU (it compiles the decode step with CUDA graphs), "
               "and the floor needs a memory bandwidth, so both lines are left out here.")

# %% [markdown]
# ## Were the predictions right?
#
# Each prediction beside the measured wall ms per decoded token, and how far off it was; a prediction
# holds within `helpers.PREDICTION_BAR` of the measurement. Two models are judged here, and counted apart:
# the launch budget, for the steps launched from Python kernel by kernel, and the GPU-busy time plus one
# graph gap per kernel, for the configurations replayed from our own CUDA graph (`helpers.GraphDecoder`; in
# CPU mode, where they run eagerly, the launch budget prices them too).
#
# On a GPU, *transformers compiled* gets a row of its own, role *not priced*, counted in neither: its step
# runs inside torch.compile's own machinery (its guards and its own CUDA graphs, around `generate()`'s Python
# loop), which neither model describes: the launch budget prices module calls launched from Python one by
# one, which a compiled step does not make, and the graph rule assumes the host out of the way once a graph
# is launched. Its row shows what the graph rule would say anyway (its GPU-busy time plus one graph gap per
# kernel) beside its measured wall ms, and how far off that is.
#
# Every table in this chapter rounds its numbers once, as `helpers.table_number` writes them: four significant
# digits (whole from 10,000 up), a whole count without a decimal point. A count per decoded token (kernels,
# calls) is an average over the profiled tokens, so where those tokens do not all run the same kernels it is
# fractional and prints with its decimals. The readings write most times to two
# decimals, so one value can read 123.46 in a reading and 123.5 in a table. The error % is computed from the
# unrounded times, and its columns print one decimal, more where a value would print as the bar itself
# (-20.04% is a miss).

# %%
BAR = helpers.PREDICTION_BAR
WITHIN = f"within {100 * BAR:.0f}%"


def held(error_pct: float) -> str:
    return "yes" if abs(error_pct) <= 100 * BAR else "no"


def pct_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` for a table: its error % columns as ``signed_pct`` writes them (the % is in the header)."""
    return df.assign(**{c: df[c].map(lambda e: helpers.signed_pct(e)[:-1])
                        for c in df.columns if c.endswith("error %")})


judged_rows = []
for name in PREDICTED:
    err_pct = 100 * (predictions[name] / wall[name] - 1)
    r = role(name, FITTED)
    judged_rows.append({
        "configuration": name, "role": r, "how": GRAPH_HOW if graphed(name) else "launch budget",
        "predicted wall ms per token": predictions[name], "measured wall ms per token": wall[name],
        "error %": err_pct,
        WITHIN: "(fitted)" if r == "fitted" else "(base)" if r.startswith("base") else held(err_pct)})
if COMPILED:  # GPU only: not priced (torch.compile's machinery), the graph rule shown beside it for comparison
    rule_ms = helpers.graph_step_ms(profiles[COMPILED].gpu_busy_ms_per_token, profiles[COMPILED].launches, GAP_US)
    judged_rows.append({
        "configuration": COMPILED, "role": "not priced", "how": f"{GRAPH_HOW}, shown only",
        "predicted wall ms per token": rule_ms, "measured wall ms per token": wall[COMPILED],
        "error %": 100 * (rule_ms / wall[COMPILED] - 1), WITHIN: "(not priced)"})
judged = pd.DataFrame(judged_rows).set_index("configuration")
helpers.show(pct_columns(judged))


def prediction_count(judged: pd.DataFrame) -> str:
    """How many predictions held, counted apart for the launch budget (the steps launched from Python) and for
    the graph configurations (``decoder="graph"``: predicted by their GPU-busy time plus one graph gap per kernel);
    chapter 8 counts alike."""
    real = judged[judged["role"] == "predicted"]
    eager = [n for n in real.index if decoder_of(n) != "graph"]
    graph = [n for n in real.index if decoder_of(n) == "graph"]

    def hits(names: list) -> int:
        return int((real.loc[names, WITHIN] == "yes").sum())

    text = (f"launch budget: {hits(eager)} of {len(eager)} eager steps {WITHIN} (the base and the fitted configuration "
            "excluded)")
    if graph:
        text += (f"; {GRAPH_HOW}: {hits(graph)} of {len(graph)} graph rows" if helpers.HAS_GPU else
                 f"; graph rows (CPU mode: stepped eagerly, priced by the launch budget): {hits(graph)} of {len(graph)}")
    return text


def read_predictions(judged: pd.DataFrame, source: str) -> str:
    """How many of the predictions held, which missed and by how much, in words."""
    real = judged[judged["role"] == "predicted"]
    hits, misses = real[real[WITHIN] == "yes"], real[real[WITHIN] == "no"]
    text = f"Prices: {source}. Predictions that held, of the measured wall ms per decoded token: **{prediction_count(judged)}**"

    def listed(rows):
        return ", ".join(f"*{n}* ({helpers.signed_pct(e)})" for n, e in rows["error %"].items())

    text += (". Held: " + listed(hits) if len(hits) else "") + ("; missed: " + listed(misses) if len(misses) else "")
    text += "."
    fitted = judged[judged["role"].isin(["base", "fitted"])]
    if len(fitted):
        text += (" Not judged: " + ", ".join(f"*{n}* ({r})" for n, r in fitted["role"].items())
                 + ", on the line by construction.")
    errors = real.loc[[n for n in real.index if not graphed(n)], "error %"]  # the launch budget's
    signs = np.sign(errors)
    if len(errors) > 1 and abs(signs.sum()) == len(errors):
        text += (f" Every launch-budget prediction erred the same way ({'under' if signs.iloc[0] < 0 else 'over'}): "
                 "the errors lean one way rather than scatter around the measured times.")
    graph_rows = [n for n in real.index if graphed(n)]
    if graph_rows:  # GPU only: GAP_US is a number here
        busy = {n: profiles[n].gpu_busy_ms_per_token for n in graph_rows}
        text += (f" For the graph rows the prediction is the GPU-busy time plus one graph gap ({GAP_US:.3f} GPU µs, "
                 "measured above) per kernel: "
                 + "; ".join(f"*{n}* {busy[n]:.3f} GPU-busy ms + {helpers.table_number(profiles[n].launches)} "
                             f"kernels x {GAP_US:.3f} GPU µs = {predictions[n]:.3f} predicted wall ms, against "
                             f"{wall[n]:.3f} wall ms measured" for n in graph_rows) + ". "
                 + helpers.graph_wall_against_busy({f"*{n}*": (wall[n], busy[n]) for n in graph_rows}))
        if GAP_US <= 0:
            text += (" The graph gap measured at or below 0 here: the profiler's kernel times already cover what a "
                     "replay spends, and the prediction comes out at or below the GPU-busy time.")
    if "not priced" in set(judged["role"]):  # transformers' compiled path (GPU only)
        n = judged.index[judged["role"] == "not priced"][0]
        rule, measured = judged.loc[n, "predicted wall ms per token"], judged.loc[n, "measured wall ms per token"]
        text += (f" *{n}* is not priced: its step runs inside torch.compile's own machinery, which neither model "
                 "describes. The graph rule applied to it anyway gives "
                 f"{profiles[n].gpu_busy_ms_per_token:.3f} GPU-busy ms + {helpers.table_number(profiles[n].launches)} "
                 f"kernels x {GAP_US:.3f} GPU µs = {rule:.3f} "
                 f"predicted wall ms, against {measured:.3f} wall ms measured "
                 f"({helpers.signed_pct(judged.loc[n, 'error %'])}, "
                 "counted in neither tally)"
                 + (f": {measured - rule:.3f} wall ms per token lie outside its kernels and their graph gaps, the time "
                    "that rule leaves out." if measured > rule else "."))
    if any(not graphed(n) for n in misses.index):
        text += " The price list below says where the launch budget's misses come from."
    if not helpers.HAS_GPU:
        text += (" CPU mode: every time here is the interpreter's, which runs each program of a kernel in numpy; "
                 "on a GPU the prices are the host's.")
    return text


helpers.md(read_predictions(judged, price_source))

# %% [markdown]
# ### Each step's own saving
#
# Each step is predicted from its own counts and prices, so the saving the budget predicts for a fix is the
# difference of two predictions, and a step's error mixes what the budget got wrong about the fix with what it
# got wrong about everything the step shares with the step before. To judge each fix by itself, set its
# predicted saving (the step before's predicted wall ms minus its own) beside its measured saving (the step
# before's wall ms minus its own), and split the step's error in two: its **own** (the prediction rebuilt on
# the step before's *measured* wall ms: measured before minus predicted saving) and the part it **inherits**
# from the step before's prediction. The two add up to the step's error % (to rounding). Beside them, the
# fix's saving on each side of `max(host, GPU-busy)`: the host ms it removes (launches and calls at their
# prices) and the GPU-busy ms; only the longer side reaches the wall.
#
# The own error is a share of the step's measured wall ms, not of its saving: a fix whose saving is small
# next to the token can miss its saving by several times and still hold. Read the predicted and measured
# saving columns side by side: "held" says the step's wall ms was predicted well from the step before's
# measurement, not that the fix's saving was. A measured saving that prints negative is a token that got
# longer; judge such a step by its per-generation verdict against the step before, which the reading also
# prints.

# %%
def host_launches(name: str) -> float:
    """What the host itself launches per decoded token: every kernel one by one, or one graph."""
    return 1 if graphed(name) else profiles[name].launches


def gpu_saved(before: str, name: str):
    """GPU-busy ms per decoded token saved from ``before`` to ``name``; "n/a (CPU)" without a GPU profile."""
    a, b = profiles[before].gpu_busy_ms_per_token, profiles[name].gpu_busy_ms_per_token
    return a - b if a is not None and b is not None else "n/a (CPU)"


def saving_row(name: str, before: str) -> dict:
    """One launch-budget step against the step before it, per decoded token (see the text above)."""
    predicted, measured = predictions[before] - predictions[name], wall[before] - wall[name]
    own = 100 * ((wall[before] - predicted) / wall[name] - 1)
    return {"step": name, "host launches removed": host_launches(before) - host_launches(name),
            "host ms saved (predicted)": budget.host_ms(profiles[before]) - budget.host_ms(profiles[name]),
            "GPU-busy ms saved": gpu_saved(before, name),
            "predicted saving (wall ms)": predicted, "measured saving (wall ms)": measured,
            "step's verdict (per generation)": vs_before_verdict[name].text,
            "own error %": own, f"own {WITHIN}": held(own),
            "inherited error %": 100 * (predictions[before] - wall[before]) / wall[name]}


BUDGET_STEPS = [n for n, b in steps_before.items() if not graphed(n) and not graphed(b) and role(n, FITTED) == "predicted"]
savings = pd.DataFrame([saving_row(n, steps_before[n]) for n in BUDGET_STEPS]).set_index("step")
helpers.show(pct_columns(savings))


def savings_compared(savings: pd.DataFrame) -> str:
    """How the predicted savings themselves compared with the measured ones, in words: in how many steps the predicted
    saving had the measured one's sign, and in how many it lay within the prediction bar of it (predicted / measured
    - 1, as a prediction's error); '' without steps. The own error judges the step's wall ms, not its saving."""
    if not len(savings):
        return ""
    pred, meas = savings["predicted saving (wall ms)"], savings["measured saving (wall ms)"]
    same_sign = [n for n in savings.index if np.sign(pred[n]) == np.sign(meas[n])]
    close = [n for n in savings.index
             if (abs(pred[n] / meas[n] - 1) <= BAR if meas[n] else pred[n] == 0)]
    return (f"the predicted saving had the measured one's sign in {len(same_sign)} of {len(savings)} steps and lay "
            f"{WITHIN} of it in {len(close)} of {len(savings)}"
            + (" (" + ", ".join(f"*{n}*" for n in close) + ")" if close else ""))


def read_savings(savings: pd.DataFrame, judged: pd.DataFrame) -> str:
    """Each step's predicted saving against its measured one, in words: which misses are a step's own and which
    it inherits from an earlier step, and which measured savings lie within noise, so that no mechanism is read
    from them."""
    own_ok = savings[savings[f"own {WITHIN}"] == "yes"]

    def saved(ms: float, predicted: bool) -> str:  # a saving in words; a negative one is a cost
        cost = round(ms, 2) < 0
        if predicted:
            return (f"predicted to cost {-ms:.2f} wall ms more per token" if cost else
                    f"predicted to save {ms:.2f} wall ms per token")
        return f"cost {-ms:.2f} more" if cost else f"saved {ms:.2f} wall ms"

    text = (f"Judged by its own error (a share of the step's measured wall ms, not of its saving), {len(own_ok)} of "
            f"{len(savings)} steps held {WITHIN}: "
            + "; ".join(f"*{n}* was {saved(r['predicted saving (wall ms)'], True)} and "
                        f"{saved(r['measured saving (wall ms)'], False)} "
                        f"(own error {helpers.signed_pct(r['own error %'])})"
                        for n, r in savings.iterrows()) + ". ")
    if len(savings):
        text += f"The savings themselves: {savings_compared(savings)}. "
    for n, r in savings.iterrows():
        v, ratio = vs_before_verdict[n], vs_before[n]
        if r[f"own {WITHIN}"] == "no":
            host = r["host ms saved (predicted)"]
            text += (f"*{n}*'s own miss: the budget expected "
                     + (f"{-host:.2f} host ms more" if round(host, 2) < 0 else f"{host:.2f} host ms saved")
                     + f" ({r['host launches removed']:.0f} host launches removed)")
            gpu = r["GPU-busy ms saved"]
            if isinstance(gpu, float):
                text += f", {-gpu:.2f} GPU-busy ms more" if round(gpu, 2) < 0 else f", {gpu:.2f} GPU-busy ms saved"
            m = r["measured saving (wall ms)"]
            text += f"; the wall time per decoded token {'rose' if m < 0 else 'fell'} by {abs(m):.2f} wall ms. "
            if not v.real:
                text += (f"Per generation the step is within noise of the one before ({ratio.median_text}x; "
                         f"{v.reason}), "
                         f"so no mechanism is read from its {r['measured saving (wall ms)']:+.2f} wall ms saved. ")
        elif not v.real:
            text += (f"*{n}*'s measured saving ({r['measured saving (wall ms)']:.2f} wall ms) lies in a step within "
                     f"noise per generation ({ratio.median:.3f}x; {v.reason}): its size is read, no mechanism. ")
    inherited = [n for n in savings.index if judged.loc[n, WITHIN] == "no" and savings.loc[n, f"own {WITHIN}"] == "yes"]
    if inherited:
        sources = [m for m in savings.index if savings.loc[m, f"own {WITHIN}"] == "no"
                   and list(savings.index).index(m) < max(list(savings.index).index(n) for n in inherited)]
        text += ("Missed, yet predicted well by their own error: "
                 + ", ".join(f"*{n}* ({helpers.signed_pct(judged.loc[n, 'error %'])} in all, "
                             f"{helpers.signed_pct(savings.loc[n, 'inherited error %'])} inherited, "
                             f"{helpers.signed_pct(savings.loc[n, 'own error %'])} its own)" for n in inherited)
                 + (": they carry " + " and ".join(f"*{m}*'s" for m in sources) + " miss, not one of their own."
                    if sources else ": they carry the error of the steps before them."))
    return text.strip()


helpers.md(read_savings(savings, judged))

# %% [markdown]
# ### The price list: what one call costs the host, ours and the one it replaces
#
# First the original's own modules that ours replace, priced in the original's rounds; then each kind of
# module of ours, as each step calls it from outside another of ours: calls per decoded token, the host time
# of one call on its own (median of the rounds, on the host's clock, with its quartiles), the kernels it
# launches, the original's call it replaces at that one's price, and what the swap adds per token at prices
# alone. A launcher's Python (input checks, allocations, choosing a tile or a number of splits) and the
# kernels behind one call differ from kind to kind, which is why the budget prices each kind on its own
# rather than at one average price per launch. A replayed call starts from the keys its decode step saw:
# where it appends to the KV cache, the cache is put back before every timed loop and before its kernels are
# counted, so a loop's calls add only a few keys, too few at these sizes to split them (see the fused
# layer's launches above). Under the list, the in-situ factor each step's own measurement implies (what
# would put it exactly on its measured wall ms) beside the one fitted on the all-custom model: where they
# agree, one factor fits every step. In CPU mode every price is the interpreter's.

# %%
PRICE_CLOCK = "host" if helpers.HAS_GPU else "interpreter"
ALONE = f"{PRICE_CLOCK} µs per call, alone (median)"
theirs = pd.DataFrame([{"the original's module": kind, "calls per token": m.per_token, ALONE: m.alone_us,
                        "quartiles": m.quartiles, "kernels per call": helpers.fmt(m.kernels, 0)}
                       for kind, m in budget.twins.items()]).set_index("the original's module")
helpers.show(theirs)
price_rows = []
for n in [START, *BUDGET_STEPS]:
    for kind, m in profiles[n].modules.items():
        replaced = budget.twins[m.twin]
        price_rows.append({"step": n, "module": kind, "calls per token": m.per_token, ALONE: m.alone_us,
                           "quartiles": m.quartiles, "kernels per call": helpers.fmt(m.kernels, 0),
                           "replaces": m.twin, f"replaced call, {PRICE_CLOCK} µs alone": replaced.alone_us,
                           f"added {PRICE_CLOCK} ms per token, alone": budget.added_ms(m)})
price_list = pd.DataFrame(price_rows).set_index(["step", "module"])
helpers.show(price_list)
implied = {n: budget.implied_in_situ(profiles[n]) for n in [START, *BUDGET_STEPS]}
print(f"in-situ factor fitted on {START}: {budget.in_situ:.2f}; implied by each step: "
      + ", ".join(f"{n} {f:.2f}" if f is not None else f"{n} - (swaps too small to read)" for n, f in implied.items()))


def factor_off_held(off: dict) -> str:
    """Why a step whose implied in-situ factor is far from the fitted one can still be predicted within the bar: the
    factor multiplies only what the step's swaps add at prices alone, so the fitted factor in place of its own moves
    its host time by the difference of the two factors times those swaps, small where the swaps are small next to the
    step's time. '' where none of ``off`` held."""
    held_off = [n for n in off if judged.loc[n, WITHIN] == "yes"]
    if not held_off:
        return ""
    clock = "wall ms" if helpers.HAS_GPU else "interpreter ms"
    parts = []
    for n in held_off:
        p = profiles[n]
        swapped, shift = budget.swapped_ms(p), budget.host_ms(p) - p.wall_ms_per_token  # = (fitted - own) x swapped
        parts.append(f"*{n}*'s swaps add {swapped:+.2f} {PRICE_CLOCK} ms per token at prices alone, "
                     f"{100 * abs(swapped) / p.wall_ms_per_token:.0f}% of its measured {p.wall_ms_per_token:.2f} "
                     f"{clock}, and its own factor is {off[n]:.2f}: ({budget.in_situ:.2f} - {off[n]:.2f}) x "
                     f"{swapped:+.2f} ms = {shift:+.2f} ms, {helpers.signed_pct(100 * shift / p.wall_ms_per_token)} "
                     "of the measured time")
    subject = ("Its prediction" if len(off) == 1 else "Their predictions" if len(held_off) == len(off) else
               f"The prediction{'s' if len(held_off) > 1 else ''} of " + ", ".join(f"*{n}*" for n in held_off))
    return (f" {subject} held all the same (see *Were the predictions right?* above): the factor multiplies only "
            "what a step's swaps add at prices alone, not the base, so the fitted factor in place of a step's own "
            "moves its host time by the difference of the two factors times those swaps. " + "; ".join(parts) + ".")


def factor_drift(steps: dict) -> str:
    """Whether the in-situ factors implied by ``steps`` ({step: factor}, in the staircase's order) drift along the
    staircase: a trend is most of at least three moves from one step to the next one way, at most one the other
    way, and the last step's factor beyond the first's that way by more than ``helpers.MIN_EFFECT`` of the fitted
    factor. '' without a trend (or with fewer than four steps); otherwise a
    clause saying which way they moved, in how many of the moves, and from what to what."""
    names, values = list(steps), np.array(list(steps.values()), dtype=float)
    moves = np.diff(values)
    falls, rises = int((moves < 0).sum()), int((moves > 0).sum())
    way, count, against = ("fell", falls, rises) if falls > rises else ("rose", rises, falls)
    net = values[-1] - values[0] if len(values) else 0.0
    if (len(moves) < 3 or count <= len(moves) / 2 or against > 1 or (net < 0) != (way == "fell")
            or abs(net) < helpers.MIN_EFFECT * budget.in_situ):  # a trend of 3 moves or more, and more than 5% net
        return ""
    grows = abs(values[-1] - budget.in_situ) > abs(values[0] - budget.in_situ)
    return (f"the implied factors {way} along the staircase, "
            + ("at every move from one step to the next" if count == len(moves) else
               f"in {count} of the {len(moves)} moves from one step to the next")
            + f" (from {values[0]:.2f} at *{names[0]}* to {values[-1]:.2f} at *{names[-1]}*): a drift, not scatter "
            "around one value, so the one fitted factor is an approximation "
            + ("whose error grows along the way" if grows else "that fits some steps better than others"))


def read_prices() -> str:
    """The price list in words: the cheapest and the dearest call, and whether one in-situ factor fits every step."""
    cheap, dear = price_list[ALONE].idxmin(), price_list[ALONE].idxmax()
    kernels = price_list.loc[dear, "kernels per call"]
    text = (f"On its own, the cheapest call of ours was *{cheap[1]}* ({price_list.loc[cheap, ALONE]:,.1f} {PRICE_CLOCK} "
            f"µs, in *{cheap[0]}*) and the dearest *{dear[1]}* ({price_list.loc[dear, ALONE]:,.1f} {PRICE_CLOCK} µs, in "
            f"*{dear[0]}*"
            + (f", {kernels} kernels per call" if helpers.HAS_GPU else "") + "). ")
    cheaper = price_list[price_list[f"added {PRICE_CLOCK} ms per token, alone"] < 0]
    if len(cheaper):
        text += ("Cheaper alone than the call it replaces: " + ", ".join(
            f"*{k}* in *{n}* ({price_list.loc[(n, k), ALONE]:,.1f} against {price_list.loc[(n, k), 'replaces']}'s "
            f"{price_list.loc[(n, k), f'replaced call, {PRICE_CLOCK} µs alone']:,.1f} {PRICE_CLOCK} µs)"
            for n, k in cheaper.index) + ". ")
    steps = {n: f for n, f in implied.items() if n != START and f is not None}
    unread = [n for n, f in implied.items() if n != START and f is None]
    off = {n: f for n, f in steps.items() if abs(f / budget.in_situ - 1) > BAR}
    text += f"The in-situ factor fitted on *{START}* is {budget.in_situ:.2f}"
    text += ("; the steps imply " + ", ".join(f"*{n}* {f:.2f}" for n, f in steps.items()) + ". " if steps else ". ")
    if unread:
        text += ", ".join(f"*{n}*" for n in unread) + f": the swaps {helpers.TOO_LITTLE_SWAPPED}, too little to read a factor from. "
    if steps and off:
        text += (", ".join(f"*{n}*" for n in off) + f" differ{'s' if len(off) == 1 else ''} from it by more than "
                 f"{100 * BAR:.0f}%: there the host's work inside the model is not the prices alone times one factor.")
        text += factor_off_held(off)
        drift = factor_drift(steps)
        text += f" {drift[0].upper()}{drift[1:]}." if drift else ""
    elif steps:
        drift = factor_drift(steps)
        text += (f"Every readable step's lies within {100 * BAR:.0f}% of it"
                 + (f" (from {min(steps.values()):.2f} to {max(steps.values()):.2f})" if len(steps) > 1 else "")
                 + (f"; but {drift}." if drift else
                    ": one factor describes every readable step to within that."))
    return text


helpers.md(read_prices())

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
ax.bar(x, rates, color=colors, width=0.6, zorder=2)


def plain(y: float) -> str:
    """A rate as a reader writes it: 4,031 or 43 or 9.1, never 4.03e+03."""
    return f"{y:,.0f}" if y >= 10 else f"{y:.2g}"


lines = [(f"{ORIGINAL} (eager)", 1e3 / wall[ORIGINAL], "black", "-"),
         (ORIGINAL_GRAPH + ("" if helpers.HAS_GPU else " (step run eagerly)"), 1e3 / wall[ORIGINAL_GRAPH], "gray", "--")]
if COMPILED:
    lines.append((COMPILED, 1e3 / wall[COMPILED], "tab:orange", "-."))
if FLOOR_MS:
    lines.append((f"weight-read floor ({helpers.SLUG}, {reference['nominal_gb_s']} GB/s)", 1e3 / FLOOR_MS, "tab:red", ":"))
for label, y, color, style in lines:
    ax.axhline(y, color=color, linestyle=style, linewidth=1.2, label=f"{label}: {plain(y)}", zorder=1)
ax.set_yscale("log")
values = rates + [y for _, y, _, _ in lines]
bottom = min(values) / 4  # room under the lowest bar and line for the labels
ax.set_ylim(bottom, max(values) * 3)
for i, name in enumerate(STEPS):  # at the foot of each bar, below every line, so no line runs through a label
    words = (vs_before_verdict[name].text if name in vs_before_verdict else "the start")
    ax.annotate(f"{plain(rates[i])}\n{words}", (x[i], bottom), xytext=(0, 3), textcoords="offset points",
                ha="center", va="bottom", fontsize=7, zorder=3,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.9, pad=0.5))
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
ax.set_title("Kernels per token (the host launches them, or one graph)")
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
# last step, wall ms per decoded token) it brought. A fix within noise gets no share, so the shares shown
# need not add up to 100%: a step that lost wall time pushes them above it, and a fix within noise that saved
# time leaves them below.

# %%
def read_fix(name: str, before: str, total_ms: float) -> str:
    """One fix in words: its verdict against the step before, and what moved per decoded token."""
    v, r = vs_before_verdict[name], vs_before[name]
    p, q = profiles[name], profiles[before]
    saved = wall[before] - wall[name]
    text = f"- **{name}**: "
    text += (f"{v.text} than *{before}* per generation (median {r.median_text}x its time, quartiles "
             f"{r.quartiles})" if v.real else
             f"within noise of *{before}* per generation ({r.median_text}x its time; {v.reason})")
    text += (f". Per decoded token: {wall[before]:.2f} -> {wall[name]:.2f} wall ms, {q.launches:.0f} -> "
             f"{p.launches:.0f} kernels")
    if graphed(name):
        text += (" (one graph launch by the host" + ("; more kernels, not fewer: the timeline section below counts "
                                                     "which kinds the graph's step runs more of)"
                                                     if p.launches > q.launches else ")"))
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
           f"wall ms per decoded token ({total_ms:+.2f} wall ms saved).\n\n"
           + "\n".join(read_fix(name, before, total_ms) for name, before in steps_before.items()))

# %% [markdown]
# ## One decode step on a timeline: where the gaps go
#
# The numbers above say that a graph removes the host from the step. Here is the picture: one decode step of
# the fast model traced by `torch.profiler` (`helpers.step_timeline`), the host's launch calls above and the
# GPU's kernels below on one time axis, once as `generate()` runs it (eager, a launch per kernel) and once
# replayed from the CUDA graph. In the eager step every kernel waits for the host to launch it, and the GPU
# sits idle in the gaps between; the replay hands the GPU the whole step at once. (Chapter 6 draws the same
# picture for the original and the all-custom model.)
#
# The traced step is a bare forward pass and argmax, without `generate()`'s own bookkeeping, so its kernel
# count can differ from the kernels per decoded token that the staircase's profile counted over whole
# generations; and the profiler adds host time to every event it records, so a traced span runs longer than
# the same step in the timed rounds (the reading below sets the two side by side): read the picture for its
# shape and its counts, and the rounds above for the wall time. The traced times, *trace µs* (or *trace ms*)
# below, are the trace's timestamps: wall time under the profiler, inflated by it.
#
# The table under the reading lists, by name, the kinds of kernel whose counts differ between the two traced
# steps. The reading groups them by what their names say (cat copies, indexed writes, kernels that write
# each element from its own index, as `torch.arange` does, other elementwise kernels, reductions) and counts
# each group's change; it ties only the cache's writes to a task, and no other group.

# %%
if helpers.HAS_GPU:
    with helpers.patched(model, **helpers.ALL_FAST):  # the fast model, as the staircase's last two steps run it
        timelines = {f"{FAST}, eager": helpers.step_timeline(model, prompt, decoder="generate"),
                     f"{FAST_GRAPH}, graph replay": helpers.step_timeline(model, prompt, decoder="graph")}
    helpers.plot_timelines(timelines, name="faster_timeline")
    plt.show()
    summaries = pd.DataFrame({label: helpers.timeline_summary(df) for label, df in timelines.items()}).T
    helpers.show(summaries)
else:
    timelines = None
    helpers.md("CPU mode: the timeline needs a GPU (there is no GPU lane to trace in the interpreter), so it is left "
               "out here.")

# %%
def kernel_kind(name: str) -> str:
    """A kernel's name without its namespaces and template arguments: 'index_copy_kernel', 'gemv_kernel'."""
    name = re.sub(r"^void\s+", "", name.replace("(anonymous namespace)::", ""))
    return re.split(r"[<(\s]", name)[0].split("::")[-1][:60] or name[:60]


def kernel_family(kind: str) -> str:
    """What a kernel's name says it does, in a few groups (PyTorch's CUDA kernel names): 'CatArrayBatchedCopy' ->
    'cat copies', 'index_elementwise_kernel' -> 'indexed writes', 'elementwise_kernel_with_index' -> 'arange-like
    (each element from its index)', other '*elementwise*' -> 'elementwise', 'reduce_kernel' -> 'reductions'."""
    k = kind.lower()
    if "cat" in k and "copy" in k:
        return "cat copies"
    if "with_index" in k:
        return "arange-like (each element from its index)"
    if re.search(r"^index|index_(copy|put)|scatter", k):
        return "indexed writes"
    if "reduce" in k:
        return "reductions"
    if "elementwise" in k:
        return "elementwise"
    return f"other ({kind})"


def idle_parts(df: pd.DataFrame) -> dict:
    """Where a traced step's GPU sat idle, in µs: before its first kernel (the host's launch calls leading in),
    between its kernels, and after its last kernel to the end of the trace."""
    s = helpers.timeline_summary(df)
    k = df[df["lane"] == helpers.TIMELINE_LANES[1]]
    if not len(k):
        return {"before the first kernel": s[helpers.SPAN_US], "between kernels": 0.0, "after the last kernel": 0.0}
    first, last_end = float(k["start_us"].min()), float((k["start_us"] + k["dur_us"]).max())
    return {"before the first kernel": first, "between kernels": last_end - first - s[helpers.BUSY_US],
            "after the last kernel": s[helpers.SPAN_US] - last_end}


def read_timelines(timelines: dict) -> str:
    """The two timelines in words: each traced span beside the rounds' wall time, where the GPU sat idle, and which
    kernels the graph adds."""
    (eager_label, eager), (graph_label, graph) = timelines.items()
    e, g = helpers.timeline_summary(eager), helpers.timeline_summary(graph)
    ei, gi = idle_parts(eager), idle_parts(graph)
    span = helpers.SPAN_US
    text = (f"Traced under the profiler, the eager step spans {e[span] / 1e3:.2f} trace ms against "
            f"{wall[FAST]:.2f} wall ms per decoded token in the timed rounds, the replayed one {g[span] / 1e3:.2f} "
            f"trace ms against {wall[FAST_GRAPH]:.2f} wall ms. Trace times are the profiler trace's timestamps: wall "
            "time under the profiler, whose own host time is in every span. ")
    traced_vs_profiled = "; ".join(
        f"{k} kernels in the traced {which} step against {profiles[n].launches:.0f} per decoded token in the "
        "staircase's profile"
        for which, k, n in (("eager", e["GPU kernels"], FAST), ("replayed", g["GPU kernels"], FAST_GRAPH))
        if k != round(profiles[n].launches))
    if traced_vs_profiled:
        text += (f"The counts differ from the staircase's ({traced_vs_profiled}): the traced step is a bare forward "
                 "pass and argmax, the profile's tokens come from whole generations with their own bookkeeping. ")
    text += (f"In the eager step the host made {e['host launches']} launch calls for {e['GPU kernels']} kernels, and the "
             f"GPU was idle for {100 * e['GPU idle fraction']:.0f}% of the traced span, "
             f"{ei['between kernels']:.0f} trace µs of it between kernels; replayed from the graph, the host made "
             f"{g['host launches']} launch call{'s' if g['host launches'] != 1 else ''} and the GPU was idle for "
             f"{100 * g['GPU idle fraction']:.0f}% of the span: "
             + ", ".join(f"{us:.0f} trace µs {where}" for where, us in gi.items()) + ". ")
    text += (f"Between kernels the idle time fell from {ei['between kernels']:.0f} to {gi['between kernels']:.0f} "
             "trace µs: the replay closes the gaps the host's launches left. "
             if gi["between kernels"] < ei["between kernels"] / 2 else
             f"Between kernels the idle time went from {ei['between kernels']:.0f} to {gi['between kernels']:.0f} "
             "trace µs: the replay did not halve it here; the figure shows where the gaps sit. ")
    where = max(gi, key=gi.get)
    if where == "before the first kernel" and gi[where] > gi["between kernels"]:
        text += ("Most of what is left idle in the replayed step comes before its first kernel: the host's "
                 "graph-launch call, which the profiler slows like every host event; it is not the GPU's work. ")
    elif where == "between kernels":
        text += "Most of what is left idle in the replayed step lies between its kernels. "
    lane = helpers.TIMELINE_LANES[1]
    kinds = {label: Counter(kernel_kind(n) for n in df.loc[df["lane"] == lane, "name"]) for label, df in timelines.items()}
    more, fewer = kinds[graph_label] - kinds[eager_label], kinds[eager_label] - kinds[graph_label]
    extra = g["GPU kernels"] - e["GPU kernels"]
    text += (f"The graph's step ran {g['GPU kernels']} kernels against the eager step's {e['GPU kernels']} "
             f"({extra:+d}): {sum(more.values())} more of some kinds, {sum(fewer.values())} fewer of others (the "
             "table below). ")
    net = Counter()
    for k in set(more) | set(fewer):
        net[kernel_family(k)] += more[k] - fewer[k]
    writes, cats = net.pop("indexed writes", 0), net.pop("cat copies", 0)
    if writes > 0 and cats < 0:
        layers = config.num_hidden_layers
        kv = 2 * layers  # the cache's writes per step: a key and a value per layer
        text += (f"{-cats} cat copies of the eager step (`torch.cat` appending each new key and value to the growing "
                 f"cache) give way to {writes} indexed writes in the graph's step"
                 + (f", {kv} of them the cache's ({layers} layers x a key and a value, each written into the static "
                    "cache at the step's position)"
                    + (f" and {writes - kv} other{'s' if writes - kv > 1 else ''}, which this reading does not tie "
                       "to a task" if writes > kv else "")
                    if writes >= kv else
                    " (among them the new keys and values written into the static cache at the step's position)")
                 + ". ")
    elif writes or cats:
        text += f"Indexed writes: {writes:+d}; cat copies: {cats:+d}. "
    rest = {f: c for f, c in sorted(net.items(), key=lambda fc: -abs(fc[1])) if c}
    if rest:
        text += ("The rest of the difference, by group: " + ", ".join(f"{c:+d} {f}" for f, c in rest.items())
                 + ", which this reading does not tie to any one task.")
    return text, more, fewer


if timelines:
    reading, more, fewer = read_timelines(timelines)
    helpers.md(reading)
    kinds = sorted(set(more) | set(fewer), key=lambda k: -(more[k] + fewer[k]))
    helpers.show(pd.DataFrame([{"kernel": k, "more in the graph step": more[k], "more in the eager step": fewer[k]}
                               for k in kinds[:12]]).set_index("kernel"))

# %% [markdown]
# ## A roofline of the fast kernels
#
# Where do the fast kernels stand against the machine? A *roofline* (see
# [the three regimes](01_setup.ipynb#Three-regimes) and [chapter 1](01_setup.ipynb#The-GPU-you-are-on) for the
# GPU's numbers) plots each kernel's *arithmetic
# intensity*, the floating-point operations it does per byte it moves to or from the GPU's memory, against
# the operations per second it achieved. Two roofs bound it: the memory bandwidth times the intensity (a
# slanted line), and the peak compute (flat). At batch size 1 a gemv (a projection at decode) does about one
# multiply-add per weight it reads, 1 flop per byte in float16; the other decode kernels (norms, SwiGLU,
# attention) do between a fraction of a flop and a few per byte: all of them far left of where the roofs
# meet, memory-bound, and the best they can do is to move their bytes at the GPU's full bandwidth.
#
# The fast kernels (the gemv projections at Qwen3-0.6B's decode shapes, lm_head included, the fused RMSNorm,
# the residual add + RMSNorm, SwiGLU and the decode attention) stand beside the slow kernels of chapters 2 to 5
# (our add, on one row of `hidden_size` elements as a residual add at decode, the two-pass RMSNorm, the tiled
# matmul at M = 1 and the per-head attention loop), each timed alone in GPU time (CUDA-graph replay,
# `helpers.gpu_ms_per_call`), with its flops and bytes counted from its
# shapes (2 bytes per float16 element; the bytes the work needs at least, read once and written once, so a
# kernel that reads something twice shows it as a lower bandwidth). The reading is the achieved bandwidth,
# bytes / GPU time, against the nominal peak.
#
# In the figure, points that sit close together (the gemvs all near 1 flop per byte, at similar TFLOP/s)
# would stack their labels, so each label is moved up or down, one line at a time, nearest place first,
# until it clears the labels placed before it, and a thin line ties it to its point. A label can therefore
# sit well above or below its point, beside another kernel's marker. Follow the line from a label to its point, and
# check each point against the table under the figure: its flop per byte is the point's x position, and its
# GB/s times its flop per byte, over 1,000, is its height in TFLOP/s.

# %%
def roofline_cases() -> dict:
    """label -> (group, zero-argument call, flops, bytes): the decode-shaped kernels, fast and slow, on random data."""
    H, I, V = config.hidden_size, config.intermediate_size, config.vocab_size
    Hq, Hkv, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    T, e = SIZES.attention_qwen_shape["T"], torch.finfo(helpers.DTYPE).bits // 8
    rand = lambda *shape: torch.randn(*shape, device=helpers.DEVICE, dtype=helpers.DTYPE)
    x, xa, xi = rand(1, H), rand(1, Hq * D), rand(1, I)
    cases = {}
    for label, n_out, act in (("gemv q/k/v", (Hq + 2 * Hkv) * D, x), ("gemv o_proj", H, xa),
                              ("gemv gate/up", 2 * I, x), ("gemv down", H, xi), ("gemv lm_head", V, x)):
        w = rand(n_out, act.shape[1])
        cases[label] = ("fast (chapter 9)", lambda a=act, w=w: slower_kernels.gemv(a, w),
                        2 * n_out * act.shape[1], e * (n_out * act.shape[1] + act.shape[1] + n_out))
    w_norm, res, gate_up = rand(H), rand(1, H), rand(1, 2 * I)
    q, k, v = rand(1, Hq, 1, D), rand(1, Hkv, T, D), rand(1, Hkv, T, D)
    attn_flops, attn_bytes = 4 * Hq * T * D, e * (2 * Hkv * T * D + 2 * Hq * D)  # q.k and p.v; k, v read once
    cases["fused RMSNorm"] = ("fast (chapter 9)", lambda: slower_kernels.rmsnorm_fused(x, w_norm), 4 * H, e * 3 * H)
    cases["add + RMSNorm"] = ("fast (chapter 9)", lambda: slower_kernels.add_rmsnorm(x, res, w_norm), 5 * H, e * 5 * H)
    cases["SwiGLU"] = ("fast (chapter 9)", lambda: slower_kernels.swiglu_packed(gate_up), 4 * I, e * 3 * I)
    cases[f"decode attention, {T} keys"] = ("fast (chapter 9)", lambda: slower_kernels.decode_attention(q, k, v),
                                            attn_flops, attn_bytes)
    n_add, (M, K, N_mm) = H, SIZES.matmul_decode_shape  # the add at a decode step's size: one row of hidden_size
    a, b, xm, wm = rand(n_add), rand(n_add), rand(M, K), rand(N_mm, K)
    scale = D ** -0.5
    cases[f"our add, {n_add} elements"] = ("slow (chapters 2-5)", lambda: slower_kernels.add(a, b), n_add, e * 3 * n_add)
    cases["two-pass RMSNorm"] = ("slow (chapters 2-5)", lambda: slower_kernels.rmsnorm_two_pass(x, w_norm), 4 * H, e * 4 * H)
    cases[f"tiled matmul, M = {M}"] = ("slow (chapters 2-5)", lambda: slower_kernels.linear(xm, wm),
                                      2 * M * N_mm * K, e * (M * K + N_mm * K + M * N_mm))
    cases["per-head attention loop"] = ("slow (chapters 2-5)",
                                        lambda: slower_kernels.attention_slow(q, k, v, scale, causal=False),
                                        attn_flops, attn_bytes)
    return cases


if helpers.HAS_GPU and helpers.SLUG in helpers.NOMINAL_TFLOPS:
    peak_gb_s = helpers.NOMINAL_GB_S[helpers.SLUG]
    roof_rows = []
    for label, (group, call, flops, nbytes) in roofline_cases().items():
        gpu_ms = helpers.gpu_ms_per_call(call)
        kind, why = helpers.regime(None, gpu_ms, flops, nbytes)
        roof_rows.append({"label": label, "group": group, "flops": flops, "bytes": nbytes, "gpu_ms": gpu_ms,
                          "flop per byte": flops / nbytes, "GB/s (bytes / GPU time)": nbytes / (gpu_ms * 1e6),
                          "% of peak bandwidth": 100 * nbytes / (gpu_ms * 1e6) / peak_gb_s, "regime": kind})
    roof = pd.DataFrame(roof_rows)
    helpers.plot_roofline(roof, name="faster_roofline")
    plt.show()
    helpers.show(roof.set_index("label").drop(columns=["flops"])
                 .rename(columns={"gpu_ms": "GPU ms per call (CUDA-graph replay)"}))
else:
    roof = None
    helpers.md("CPU mode: a roofline needs a GPU's clock and its nominal bandwidth and compute "
               "(`helpers.NOMINAL_TFLOPS`), so it is left out here." if not helpers.HAS_GPU else
               f"No nominal bandwidth and compute for {helpers.SLUG!r} in `helpers.NOMINAL_TFLOPS`: no roofline here.")

# %%
def sig2(value: float) -> str:
    """A number to 2 significant digits, whole from 10 up: 0.079, 8.5, 56, 2673 (never a 0 that is not 0)."""
    return f"{value:.2g}" if abs(value) < 10 else f"{value:.0f}"


def read_roofline(roof: pd.DataFrame, peak_gb_s: float) -> str:
    """The roofline in words: each group's best and worst achieved bandwidth against the peak, the kernels that move
    the most and the fewest bytes, and the fast and slow kernels that do the same work (``like_for_like``)."""
    share = "% of peak bandwidth"
    parts = []
    for group, rows in roof.groupby("group", sort=False):
        best, worst = rows.loc[rows[share].idxmax()], rows.loc[rows[share].idxmin()]
        parts.append(f"the {group} kernels reached {sig2(worst[share])}% (*{worst['label']}*, "
                     f"{sig2(worst['GB/s (bytes / GPU time)'])} GB/s) to {sig2(best[share])}% (*{best['label']}*, "
                     f"{sig2(best['GB/s (bytes / GPU time)'])} GB/s)")
    memory = int((roof["regime"] == "memory-bound").sum())
    text = (f"Of the nominal {peak_gb_s:,} GB/s, " + "; ".join(parts) + f". {memory} of the {len(roof)} kernels sit "
            "left of the ridge point, memory-bound by their intensity. ")
    big, small = (roof[roof["bytes"] == roof["bytes"].max()], roof[roof["bytes"] == roof["bytes"].min()])  # ties kept
    text += (f"The {extreme(big, 'most')}, reached " + " and ".join(f"{sig2(v)}%" for v in big[share])
             + " of the peak; "
             f"the {extreme(small, 'fewest')}, reached " + " and ".join(f"{sig2(v)}%" for v in small[share]) + " in "
             + " and ".join(f"{1e3 * ms:.1f}" for ms in small["gpu_ms"]) + " µs of GPU time"
             + (" respectively. " if len(small) > 1 else ". "))
    if small[share].max() < big[share].min():
        text += ("A kernel that moves a few kilobytes is done in about the time any kernel needs to start and end, "
                 "so its achieved bandwidth stays far below the roof however good its code: fusing small kernels "
                 "pays on the GPU's clock too, not only on the host's. ")
    pairs = like_for_like(roof)
    if pairs:
        words = []
        for slow, fast in pairs:
            v = helpers.verdict(fast["gpu_ms"] / slow["gpu_ms"])  # two medians of GPU time: the 5% rule alone
            words.append(f"*{fast['label']}* against *{slow['label']}*, {sig2(fast[share])}% against "
                         f"{sig2(slow[share])}% of the peak, {1e3 * fast['gpu_ms']:.1f} against "
                         f"{1e3 * slow['gpu_ms']:.1f} GPU µs: {v.text}"
                         + ("" if fast["bytes"] == slow["bytes"] else
                            f" (their counted bytes differ: {fast['bytes'] / 1e3:.1f} against "
                            f"{slow['bytes'] / 1e3:.1f} kB)"))
        faster = sum(helpers.verdict(f["gpu_ms"] / s_["gpu_ms"]).text.endswith("faster") for s_, f in pairs)
        text += ("The two groups hold kernels of very different sizes, so they compare fairly only like for like, a "
                 "fast kernel and a slow one that do the same flops: "
                 + "; ".join(words) + f". The fast kernel took less GPU time, by more than the series' "
                 f"{100 * helpers.MIN_EFFECT:.0f}% minimum, in {faster} of the {len(pairs)} pairs.")
    else:
        med = roof.groupby("group", sort=False)[share].median()
        text += ("Median per group: " + ", ".join(f"{sig2(m)}% for the {g} kernels" for g, m in med.items())
                 + "; each group mixes kernels of very different sizes, so these medians say more about the mix than "
                 "about the code.")
    return text


def extreme(rows: pd.DataFrame, which: str) -> str:
    """'kernel that moves the most bytes, *x* (1.2 MB)', or for a tie 'kernels that move the fewest bytes, *x* and
    *y* (6.1 kB each)'."""
    n = rows["bytes"].iloc[0]
    size = f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"
    names = " and ".join(f"*{label}*" for label in rows["label"])
    return (f"kernel that moves the {which} bytes, {names} ({size})" if len(rows) == 1 else
            f"kernels that move the {which} bytes, {names} ({size} each)")


LIKE_FOR_LIKE = (("tiled matmul", "gemv"), ("per-head attention", "decode attention"),
                 ("two-pass RMSNorm", "fused RMSNorm"))  # slow kernel -> the fast kind that does its work


def like_for_like(roof: pd.DataFrame) -> list:
    """(slow row, fast row) pairs of the roofline that do the same work: a slow kernel and a fast one of the kind
    LIKE_FOR_LIKE names beside it, with the same flops (the same shapes; a gemv and the tiled matmul pair only
    where their weights have the same size)."""
    pairs = []
    for slow_kind, fast_kind in LIKE_FOR_LIKE:
        for _, slow in roof[roof["label"].str.startswith(slow_kind)].iterrows():
            same = roof[roof["label"].str.startswith(fast_kind) & (roof["flops"] == slow["flops"])]
            if len(same):
                pairs.append((slow, same.iloc[0]))
    return pairs


if roof is not None:
    helpers.md(read_roofline(roof, peak_gb_s))

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
            f"{r.quartiles}, {len(r.values)} rounds.")


checks = [read_target(comparison.ratios[FAST], comparison.verdict(FAST), f"the eager fast model (*{FAST}*)",
                      "the original eager", "the eager fast model is faster than the original eager")]
if COMPILED:
    graph_vs_compiled = step_ratio(FAST_GRAPH, COMPILED)
    graph_vs_compiled_verdict = helpers.verdict(graph_vs_compiled, floor)
    checks.append(read_target(graph_vs_compiled, graph_vs_compiled_verdict, f"the graph fast model (*{FAST_GRAPH}*)",
                              f"*{COMPILED}*", "the graph fast model is at least as fast as transformers' compiled path"))
    fast_rate = 1e3 / wall[FAST_GRAPH]
    # the rounds' quartiles, read as wall[] is: the original's median x the per-round ratio to it
    slow_q, fast_q = (1e3 / (comparison.decode_ms(ORIGINAL).median * q) for q in
                      (comparison.decode_ratio(FAST_GRAPH).high, comparison.decode_ratio(FAST_GRAPH).low))
    spread_words = f"quartiles of the rounds {slow_q:.0f}-{fast_q:.0f} tokens/s"
    checks.append(f"- *Moonshot, 1,000 tokens/s*: the graph fast model decoded {fast_rate:.0f} tokens/s "
                  f"(1000 / {wall[FAST_GRAPH]:.2f} wall ms per decoded token, {spread_words}; "
                  f"{comparison.tokens_per_s[FAST_GRAPH]:.0f} tokens/s with the prefill included): "
                  + ("reached: both quartiles of the rounds are at or above it." if slow_q >= 1000 else
                     "reached by the median, with the slower quartile below it." if fast_rate >= 1000 else
                     "within the rounds' spread of it." if fast_q >= 1000 else f"{fast_rate / 1000:.0%} of the way."))
else:
    checks.append("- *The graph fast model against transformers' compiled path*: not judged here; transformers' "
                  "compiled generation needs a GPU.")
if not helpers.HAS_GPU:
    checks.append("CPU mode: these verdicts compare interpreter times on a tiny model, not a GPU's.")
helpers.md("\n".join(checks))

# %% [markdown]
# ## What should a T4 reader expect?
#
# An **estimate**, not a measurement, built on the tokens/s at which the blog's T4 ran the original (the
# blog's figure, recorded in the catalogue as `full.tps_original` and printed with the estimate below).
# Two rules turn ratios measured on a faster GPU into T4 numbers:
#
# - an eager step is bound by the host launching kernels, on a T4 as here: its T4 tokens/s is the blog's
#   original tokens/s divided by the step's time ratio to the original, never above the T4's floor;
# - a graph-replayed step is bound by the GPU's work, so it gets a range: at worst its GPU-busy time scaled
#   by the two GPUs' bandwidth ratio (the T4's kernels reaching no larger a share of its bandwidth than this
#   GPU's reached), at best the T4's weight-read floor: Qwen3-0.6B's bytes in float16 over the T4's 320 GB/s.
#   The low end is pessimistic: a small kernel's fixed start-up GPU time is about the same on both GPUs, while
#   moving its bytes takes far longer at a T4's bandwidth, so the fixed part is a smaller share of a T4
#   kernel's GPU time and its kernels come closer to their roof than a large GPU's do.
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
    t4_source, t4_gb_s = f"this run's ratios ({helpers.SLUG})", helpers.NOMINAL_GB_S.get(helpers.SLUG)
    t4_points = {n: (comparison.ratios[n].median, profiles[n].gpu_busy_ms_per_token, graphed(n)) for n in t4_names}
else:  # the interpreter's ratios say nothing about a GPU: the committed H200 run's, where recorded
    h200 = helpers.results(helpers.COMMITTED_DIR / "h200" / "results.csv")
    h200_values = dict(zip(h200["id"], h200["value"]))
    t4_source, t4_gb_s = "the committed H200 run's ratios", helpers.NOMINAL_GB_S["h200"]
    t4_points = {n: (h200_values[f"faster.{tag(n)}.vs_original"], h200_values.get(f"faster.{tag(n)}.gpu_busy_ms_per_token"),
                     decoder_of(n) == "graph")
                 for n in t4_names if f"faster.{tag(n)}.vs_original" in h200_values}
text = (f"The T4's weight-read floor: {T4_BYTES / 1e9:.2f} GB of Qwen3-0.6B weights (float16) / "
        f"{helpers.NOMINAL_GB_S['t4']} GB/s = {1e3 / T4_FLOOR_TPS:.2f} floor ms per token (a bound), at most "
        f"**{T4_FLOOR_TPS:.0f} tokens/s**. The blog's T4 original: {BLOG_TPS:.2f} tokens/s. ")
if t4_points:
    t4 = t4_estimate(t4_points, t4_gb_s, BLOG_TPS, T4_BYTES)
    helpers.show(t4)
    low, high = "T4 tokens/s (estimate, low)", "T4 tokens/s (estimate, high)"
    expected = [f"about {t4.loc[FAST, low]:.0f} tokens/s from the eager fast model"] if FAST in t4.index else []
    if FAST_GRAPH in t4.index:
        g_low, g_high = t4.loc[FAST_GRAPH, low], t4.loc[FAST_GRAPH, high]
        expected.append(f"{g_low:.0f} to {g_high:.0f} tokens/s from the graph fast model" if g_high > g_low else
                        f"about {g_low:.0f} tokens/s from the graph fast model")
    text += f"From {t4_source}, a T4 reader should expect, as an estimate, " + " and ".join(expected) + "."
    blog_custom = helpers.blog("full.tps_custom")
    if START in t4.index and isinstance(blog_custom, float):  # the one step the blog measured on its T4
        est = t4.loc[START, low]
        off = est / blog_custom - 1
        text += (f" A check of the host-bound rule on a number the blog did measure: it estimates the all-custom "
                 f"model at {est:.1f} tokens/s on a T4, and the blog measured {blog_custom:.2f}: the estimate is "
                 f"{helpers.signed_pct(abs(100 * off), sign='')} {'low' if off < 0 else 'high'}, "
                 + (f"within the series' {100 * helpers.PREDICTION_BAR:.0f}% bar for a prediction."
                    if abs(off) <= helpers.PREDICTION_BAR else
                    f"outside the series' {100 * helpers.PREDICTION_BAR:.0f}% bar for a prediction: read every "
                    "host-bound row as that rough."))
    below = [n for n in t4.index if t4.loc[n, high] > t4.loc[n, low] and t4.loc[n, low] < BLOG_TPS]
    if below:
        text += (" The low end of a graph row's range is a pessimistic bound, not a prediction: for "
                 + ", ".join(f"*{n}* ({t4.loc[n, low]:.0f} tokens/s)" for n in below)
                 + f" it lies below the blog's eager original ({BLOG_TPS:.2f} tokens/s), where a step that launches "
                 "less than the eager original is not expected to fall.")
    text += (" A T4's host (Colab's) is not this run's: read these as the order of magnitude, and measure.")
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
# transformers' compiled path) get their own ids for the README's results table. The table below shows them
# and the fast model's wall ms per decoded token, eager and replayed, beside the H200 results committed with
# the repository (`figures/h200/results.csv`) and the blog's T4 figure where there is one.

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
                       f"{role(name, FITTED)}; " + (graph_note(name) if graphed(name) else price_source))
    if name != ORIGINAL:
        comparison.record(name, f"faster.{t}.vs_original", "wall time per generation / original's, round by round")
aa_note = (f"median of {len(comparison.orders)} shuffled rounds, A/A floor {floor.median:.3f} "
           f"(quartiles {floor.quartiles})")
for name, before in steps_before.items():
    r = vs_before[name]
    helpers.record(f"faster.{tag(name)}.vs_previous", r.median, "x slower",
                   f"wall time per generation / {before}'s, round by round; {aa_note}", spread=r,
                   verdict=vs_before_verdict[name].text)
comparison.record(FAST, "faster.fast_eager_vs_original", f"{FAST} / original, wall time per generation, round by round")
helpers.record("faster.fast_graph_tps", comparison.tokens_per_s[FAST_GRAPH], "tokens/s",
               f"{FAST_GRAPH}: {how_it_decodes(FAST_GRAPH)}; {tps_note}")
if COMPILED:
    helpers.record("faster.fast_graph_vs_compiled", graph_vs_compiled.median, "x slower",
                   f"{FAST_GRAPH} / {COMPILED}, wall time per generation, round by round; {aa_note}", spread=graph_vs_compiled,
                   verdict=graph_vs_compiled_verdict.text)
if FLOOR_MS:
    helpers.record("faster.floor_ms_per_token", FLOOR_MS, "ms",
                   f"model bytes / nominal bandwidth ({reference['nominal_gb_s']} GB/s, {helpers.SLUG})")
headline = helpers.compare(["faster.fast_eager_vs_original", "faster.fast_graph_tps", "faster.fast_graph_vs_compiled",
                             f"faster.{tag(FAST)}.wall_ms_per_token", f"faster.{tag(FAST_GRAPH)}.wall_ms_per_token"])
helpers.show(headline)
if helpers.RESULTS_DIR.resolve() == (helpers.COMMITTED_DIR / "h200").resolve():
    helpers.md("This run writes the committed H200 results file itself (`figures/h200/results.csv`), so the columns "
               "*yours* and *h200* hold the same numbers.")

# %% [markdown]
# ## Takeaway

# %%
fast_v = comparison.verdict(FAST)
lines = [f"- From the all-custom model to the last step of the staircase, the wall time per decoded token went from "
         f"{wall[START]:.2f} to {wall[STEPS[-1]]:.2f} wall ms and the kernels per token from {profiles[START].launches:.0f} "
         f"to {profiles[STEPS[-1]].launches:.0f}" + (" (one graph launch by the host)" if graphed(STEPS[-1]) else "")
         + f"; the original eager model takes {wall[ORIGINAL]:.2f} wall ms per decoded token.",
         "- The eager fast model against the original eager: "
         + (f"{fast_v.text}." if fast_v.real else f"within noise ({fast_v.reason}).")]
real_fixes = [n for n, v in vs_before_verdict.items() if v.real and v.text.endswith("faster")]
if real_fixes:
    top = max(real_fixes, key=lambda n: wall[steps_before[n]] - wall[n])
    lines.append(f"- The fix that won back the most wall time per decoded token: *{top}* "
                 f"({wall[steps_before[top]] - wall[top]:.2f} wall ms, {vs_before_verdict[top].text} than the step "
                 "before per generation).")
lines.append(f"- Predictions that held: {prediction_count(judged)}"
             + (f"; judged each by its own error (a share of the step's wall ms), "
                f"{int((savings[f'own {WITHIN}'] == 'yes').sum())} of {len(savings)} launch-budget steps held; "
                f"{savings_compared(savings)}." if len(savings) else "."))
if not helpers.HAS_GPU:
    lines.append("- CPU mode: all of this is interpreter time on a tiny model; the method is the point, the numbers "
                 "are not a GPU's.")
helpers.md("\n".join(lines))

# %% [markdown]
# The lessons of the slow chapters hold in reverse. At batch size 1 the host's launches set most of a token's
# wall time, so the fixes that remove launches (the attention loop first, then the CUDA graph that leaves one
# launch per token, then the fusions) are the ones to expect to win back the most; the staircase's table says
# which did here. The launch budget is a first estimate, not a law: it prices each of our calls, and each of
# the original's that it replaces, by what it costs on its own, times one in-situ factor fitted on the
# all-custom model, and it lets the token take the longer of host and GPU, so a fix that cuts GPU work while
# the host still sets the pace, as the matrix-vector projections do, is credited only with what it changes on
# the host's side (the tables of each step's own saving and of the price list above say how well that held).
# Once the host launches one graph per token, what remains is the GPU's own work, and only better kernels
# bring it down towards the weight-read floor. Every number above is your own run's: rerun the chapter, on
# another GPU, and read it again.

# %% [markdown]
# ## Try it yourself
#
# Three small experiments on the fast kernels, each changing one thing at Qwen3-0.6B's decode shapes (in CPU
# mode, the tiny model's), timed by `helpers.compare_calls` against the kernel as the fast model runs it, in
# shuffled rounds with the reference against itself as the noise floor: GPU time (CUDA-graph replay) on a
# GPU, interpreter wall time in CPU mode. Guess first, set `answer`, then run the cell. The hints after each
# question are for a GPU: the interpreter runs a kernel's programs one after another in numpy, so in CPU mode
# the answers can come out otherwise.
#
# **1. A gemv tile with few programs.** `slower_kernels.gemv_config` picks the tile so that there are at least
# `MIN_PROGRAMS` programs (`slower_kernels/gemv.py`), enough to keep every streaming multiprocessor (SM: one of the
# GPU's independent processors, see [chapter 1](01_setup.ipynb#The-GPU-you-are-on)) pulling weights from
# memory. Here the same product runs with wide tiles, so that only a handful of programs share the work
# (the result line says how many). A tile is named by its `slower_kernels.GemvConfig`: `m1_n4_k1024_w4` means each
# program computes BLOCK_M = 1 row of x times BLOCK_N = 4 rows of the weight (4 outputs), reading K in chunks
# of BLOCK_K = 1024, with `num_warps` = 4 warps (4 x 32 threads) per program. A memory-bound kernel needs many
# SMs loading at once to reach the bandwidth, and a program runs on one SM: with fewer programs than the GPU
# has SMs, most SMs sit idle (an H200 has 132, a T4 40). Faster, slower or the same?
#
# *Hint:* expect clearly slower on any GPU: a dozen programs means a dozen SMs pulling the weights, and one SM
# can pull only a small part of a GPU's bandwidth. By how much depends on that part: far more on an H200,
# whose bandwidth needs nearly all of its SMs, than on a T4, whose bandwidth is about fifteen times lower.

# %%
H_, I_ = config.hidden_size, config.intermediate_size
x_ex = torch.randn(1, H_, device=helpers.DEVICE, dtype=helpers.DTYPE)
w_ex = torch.randn(2 * I_, H_, device=helpers.DEVICE, dtype=helpers.DTYPE)  # the fused gate/up projection
default = slower_kernels.gemv_config(1, 2 * I_, H_, MIN_PROGRAMS if helpers.HAS_GPU else INTERPRETER_MIN_PROGRAMS)
wide = min(512, 1 << (max(1, 2 * I_ // 8) - 1).bit_length())  # a power of two, at most 512 outputs per program:
# 2 * I_ / wide programs, a handful (12 for Qwen3-0.6B's 6144 gate/up outputs)
few = slower_kernels.GemvConfig(block_m=1, block_n=wide, block_k=64, num_warps=4)
programs = lambda c: -(-2 * I_ // c.block_n)  # one program per block_n outputs
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({f"gemv, tile {few.name}": lambda: slower_kernels.gemv(x_ex, w_ex, config=few)},
                            reference=lambda: slower_kernels.gemv(x_ex, w_ex))
result = helpers.check_answer(answer, cmp.ratios[f"gemv, tile {few.name}"], cmp.floor,
                     change=f"gemv [1, {H_}] x [{2 * I_}, {H_}] in {programs(few)} programs (tile {few.name}) "
                            f"instead of {programs(default)} (the default tile, {default.name})", clock=cmp.clock)

# %% [markdown]
# **2. Decode attention without splitting the keys.** With 8 key/value heads, one program per head would
# leave most SMs idle, so `decode_attention` splits the keys into chunks handled by separate programs and
# combines them in a second, small launch (flash-decoding). Here it runs with `num_splits=1`: one launch
# instead of two, but 8 programs. Faster, slower or the same?
#
# *Hint:* on an H200 expect slower: 8 SMs of 132 read every key and value, one SM's share of the bandwidth
# each, and the combine launch it saves costs only a small kernel's fixed few microseconds of GPU time. On a
# T4 (40 SMs, a fifteenth of the bandwidth) 8 busy SMs pull a larger part of what the GPU can move and the
# saved launch weighs more, so the result may come out much closer to 1, even near the 5% threshold.

# %%
shape = SIZES.attention_qwen_shape
q_ex = torch.randn(1, shape["Hq"], 1, shape["D"], device=helpers.DEVICE, dtype=helpers.DTYPE)
k_ex, v_ex = (torch.randn(1, shape["Hkv"], shape["T"], shape["D"], device=helpers.DEVICE, dtype=helpers.DTYPE)
              for _ in range(2))
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"one split": lambda: slower_kernels.decode_attention(q_ex, k_ex, v_ex, num_splits=1)},
                            reference=lambda: slower_kernels.decode_attention(q_ex, k_ex, v_ex))
result = helpers.check_answer(answer, cmp.ratios["one split"], cmp.floor,
                     change=f"decode attention over {shape['T']} keys in one split instead of the default",
                     clock=cmp.clock)

# %% [markdown]
# **3. Un-fuse the residual add.** The fast layer adds the residual and normalises in one launch
# (`slower_kernels.add_rmsnorm`). Here the add is PyTorch's and the norm is the fused RMSNorm: two launches, and the
# sum written to memory and read back. Faster, slower or the same?
#
# *Hint:* expect slower, on a T4 as on an H200. At one row the extra bytes are a few kilobytes, nothing next
# to the bandwidth; but this exercise times GPU time, and every kernel costs the GPU a fixed start-up and
# drain, one to a few microseconds whatever it moves (the roofline above: the smallest kernels took about that
# long for a few kilobytes). The fused call is mostly such fixed cost, and un-fusing adds a second one.

# %%
rows = SIZES.rmsnorm_decode_rows
h_ex, r_ex = (torch.randn(rows, H_, device=helpers.DEVICE, dtype=helpers.DTYPE) for _ in range(2))
g_ex = torch.randn(H_, device=helpers.DEVICE, dtype=helpers.DTYPE)
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"add, then RMSNorm": lambda: slower_kernels.rmsnorm_fused(h_ex + r_ex, g_ex)},
                            reference=lambda: slower_kernels.add_rmsnorm(h_ex, r_ex, g_ex))
result = helpers.check_answer(answer, cmp.ratios["add, then RMSNorm"], cmp.floor,
                     change=f"the residual add un-fused from the RMSNorm ({rows} row of {H_})", clock=cmp.clock)
