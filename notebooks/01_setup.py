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
# # Chapter 1: The question, and a baseline to beat (downwards)
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/01_setup.ipynb)
#
# In this chapter you will learn:
# - why slowing a model down on purpose is a good way to learn how a GPU spends its time;
# - what a *kernel*, a *kernel launch* and *memory traffic* are, in plain words;
# - how to load Qwen3-0.6B, count the modules we will later replace, and generate text reproducibly;
# - how to measure tokens per second, with and without the KV cache;
# - where the time of one generated token actually goes: launches, GPU-busy time, wall time, and the
#   weight-read floor that no implementation can beat.

# %% [markdown]
# ## The idea
#
# Making a model faster needs a lot of knowledge before the first result. Making it *slower* needs very
# little: almost any change you make to a well-tuned program costs speed. The interesting part is to
# understand **why** each change costs what it costs. Every slowdown in this series is a measurement of
# something the GPU cares about, and the model stays mathematically the same throughout: it computes the
# same function, only worse.
#
# Three words will carry the whole series.
#
# - A **kernel** is one function that runs on the GPU, executed by thousands of threads at once. Adding
#   two tensors is a kernel; one matrix multiplication is a kernel; a whole transformer layer is dozens.
# - A **launch** is the act of asking the GPU to run a kernel. Python (through PyTorch) does it from the
#   CPU: it prepares the arguments, and hands the request to the driver. That host work costs several
#   microseconds *per launch*, whether the kernel then runs for one microsecond or one second.
# - **Memory traffic** is the bytes a kernel reads from and writes to the GPU's main memory. For most of
#   what a language model does at batch size 1, moving bytes, not arithmetic, sets the kernel's speed.
#
# A model that generates one token at a time launches many small kernels per token. So before we write
# a single kernel, we measure the baseline: how fast is the unmodified model, and where does its time go?

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
import pandas as pd

import helpers

helpers.show_env()

# %% [markdown]
# ## The model
#
# `helpers.load_model` loads Qwen3-0.6B in fp16 on a GPU (a T4 has no bf16). Where the Hugging Face hub
# cannot be reached it builds the same architecture with seeded random weights: speed depends on shapes,
# not on the values of the weights, so the timings stay meaningful even if the text does not. In CPU mode
# it builds a tiny Qwen3 with the same structure and far fewer, smaller layers, so the interpreter can
# keep up. The description below says which of these you got.

# %%
model, tokenizer, description = helpers.load_model()
print(description)

# %% [markdown]
# ### A census of the modules
#
# Later chapters swap PyTorch modules for our own Triton kernels, so we first count them. Each of the
# decoder layers holds four RMSNorms (before attention, before the MLP, and two small ones that
# normalise each query and key head), seven linear projections (q, k, v, o in attention; gate, up, down
# in the MLP) and one attention block. One more RMSNorm sits after the last layer, and one more linear
# layer, `lm_head`, turns the final hidden state into scores over the vocabulary.
#
# So with $L$ layers we expect $4L + 1$ RMSNorms, $7L + 1$ linear layers and $L$ attention blocks. The
# cell below checks the census against that rule, for whatever configuration was loaded.

# %%
census = helpers.module_census(model)
n_layers = model.config.num_hidden_layers
expected = {"rmsnorm": 4 * n_layers + 1, "linear": 7 * n_layers + 1, "attention": n_layers}
census_table = pd.DataFrame(
    [{"module": k, "counted": census[k], "expected (L = %d)" % n_layers: v} for k, v in expected.items()]
)
helpers.show(census_table)
print(f"parameters: {census['parameters']:,}   weights: {census['bytes'] / 1e6:,.1f} MB")
ok = all(census[k] == v for k, v in expected.items())
print("census check:", "PASS" if ok else "FAIL")
assert ok, f"census {census} does not match the per-layer rule {expected}"

# %%
on_real_config = n_layers == 28
helpers.md(
    f"This model has **{n_layers} layers**, hence {census['rmsnorm']} RMSNorms, {census['linear']} linear "
    f"layers and {census['attention']} attention blocks, {census['bytes'] / 1e6:,.1f} MB of weights. "
    + ("These are the counts of the real Qwen3-0.6B (113, 197 and 28), the modules later chapters replace."
       if on_real_config else
       "The real Qwen3-0.6B has 28 layers, so 113, 197 and 28; the same rule gives both.")
)

# %% [markdown]
# ## Generating text the same way every time
#
# A speed comparison only means something if every run does the same work. So generation here is
# **greedy** (always the most likely next token, no sampling) and always produces exactly the same
# number of new tokens: `helpers.measure_tps` sets `min_new_tokens == max_new_tokens`, so an early
# end-of-text token cannot shorten a run. The prompt is fixed and seeded too.
#
# `measure_tps` first runs one untimed warm-up generation of the same length (the first pass over each
# sequence length pays for memory allocation and, for Triton, compilation, and that one-off cost must not
# land in a timed run) and then times a few repeats, synchronising with the GPU around each one. It
# reports the median, the spread between repeats, and the time of the *prefill*: the single forward pass
# over the whole prompt that comes before the first new token.
#
# One caution before any number: at batch size 1 the speed depends on the host CPU as much as on the GPU,
# so the same model on the same GPU can run at quite different speeds from one machine, or one minute, to
# the next. So the series compares configurations measured in the same run, as ratios, and shows the
# spread between repeats.

# %%
sizes = helpers.SIZES
print(f"prompt: {sizes.prompt_len} tokens, new tokens per run: {sizes.new_tokens}, repeats: {sizes.repeats}")
with helpers.generation_progress(model, helpers.forwards_per_tps(sizes.new_tokens), "with KV cache"):
    with_cache = helpers.measure_tps(model, sizes.prompt_len, sizes.new_tokens, tokenizer=tokenizer,
                                     use_cache=True)
assert len(with_cache.ids) == sizes.new_tokens, "generation must produce a fixed number of tokens"
if tokenizer is not None:
    print("generated text:", repr(tokenizer.decode(with_cache.ids)))
else:
    print("generated token ids (random weights, no tokenizer):", with_cache.ids[:16].tolist(), "...")
print(f"{with_cache.tokens_per_s:.2f} tokens/s (spread {with_cache.spread_pct:.1f}%), "
      f"prefill {with_cache.prefill_ms:.1f} ms")

# %% [markdown]
# ## The KV cache: what it saves, and what we expect
#
# Attention lets every new token look at all the tokens before it, through their *keys* and *values*.
# With the **KV cache**, the model keeps the keys and values of earlier tokens, so each step only pushes
# the one new token through the network. Without it, each step feeds the whole sequence again: the prompt
# plus everything generated so far.
#
# Count the token positions processed. With a prompt of $P$ tokens and $n$ new tokens, the cached run
# processes $P$ positions once and then one per step; the uncached run processes $P + i$ positions at
# step $i$. The next cell prints both totals for our sizes.
#
# Two stories predict different outcomes. If the GPU were busy doing arithmetic the whole time, the
# uncached run would be slower roughly in proportion to those totals. But at batch size 1 each step is
# made of hundreds of small kernels or more, and if launching them is what takes the time, a step over 100
# positions costs little more than a step over one. We measure to find out which story your hardware
# tells.

# %%
P, n = sizes.prompt_len, sizes.new_tokens
positions_cached = P + (n - 1)
positions_uncached = sum(P + i for i in range(n))
print(f"positions processed with the cache:    {positions_cached:,}")
print(f"positions processed without the cache: {positions_uncached:,}  "
      f"({positions_uncached / positions_cached:.0f}x as many)")

# %%
with helpers.generation_progress(model, helpers.forwards_per_tps(sizes.new_tokens), "without KV cache"):
    without_cache = helpers.measure_tps(model, sizes.prompt_len, sizes.new_tokens, tokenizer=tokenizer,
                                        use_cache=False)
helpers.record("baseline.tps_kv", with_cache.tokens_per_s, "tokens/s", f"greedy, prompt {P}, {n} new tokens")
helpers.record("baseline.tps_no_kv", without_cache.tokens_per_s, "tokens/s",
               f"use_cache=False, prompt {P}, {n} new tokens")
helpers.record("baseline.prefill_ms", with_cache.prefill_ms, "ms", f"one forward pass over {P} prompt tokens")

same = int((without_cache.ids == with_cache.ids).sum())
print(f"with KV cache:    {with_cache.tokens_per_s:8.2f} tokens/s")
print(f"without KV cache: {without_cache.tokens_per_s:8.2f} tokens/s")
print(f"same greedy tokens in both runs: {same} of {n}")

# %%
kv_ratio = with_cache.tokens_per_s / without_cache.tokens_per_s  # above 1: the cache helped
work_ratio = positions_uncached / positions_cached
noise = max(with_cache.spread_pct, without_cache.spread_pct) / 100  # run-to-run spread of the repeats
within_noise = max(kv_ratio, 1 / kv_ratio) < 1 + noise
if within_noise:
    story = (f"the two are within the {100 * noise:.0f}% spread between repeats, too close for this run to tell "
             "apart" + (f": whatever {work_ratio:.0f}x the positions cost is lost in the noise, which itself says "
                        "that most of each step's time does not grow with the sequence length"
                        if work_ratio > 2 * (1 + noise) else
                        "; with this much noise the run says nothing about what the extra positions cost"))
elif kv_ratio >= 2:
    story = ("recomputing the whole history at every step is a cost this hardware clearly feels"
             + (f", though still far less than the {work_ratio:.0f}x in positions: part of each step's time "
                "does not grow with the sequence" if kv_ratio < work_ratio / 2 else
                f", roughly in line with the {work_ratio:.0f}x in positions: here the arithmetic sets the pace"))
elif kv_ratio > 1.1:
    story = ("the uncached run is slower, but by far less than the extra positions suggest: most of each "
             "step's time does not grow with the sequence length")
elif kv_ratio >= 0.9:
    story = ("the two runs take about the same time: a step costs the same whether it processes one "
             "position or many, so the time goes into something other than the arithmetic")
else:
    story = ("the cache did not pay for itself here: with a short sequence, managing the cache cost more "
             "than the positions it saves")
helpers.md(
    f"Without the cache the model processed {work_ratio:.0f} times as many positions and ran at "
    f"{without_cache.tokens_per_s:.1f} tokens/s against {with_cache.tokens_per_s:.1f} with it: "
    + (f"**{kv_ratio:.2f}x slower**" if kv_ratio > 1 else f"**{1 / kv_ratio:.2f}x faster**")
    + f". So {story}. "
    f"{same} of the {n} greedy tokens agree between the two runs (the two paths add numbers in a different "
    "order, so in low precision an occasional divergence would not be a bug). "
    "For comparison, the blog reports that on its T4 turning the cache off cut tokens/s by about half or "
    "more; its baseline table itself is missing from the text."
    + (f" Careful: the repeats of one measurement differed by up to {100 * noise:.0f}% on this machine, so "
       "differences smaller than that are noise." if noise > 0.2 and not within_noise else "")
)

# %% [markdown]
# ## Where does the time of one token go?
#
# The blog stops at tokens per second. We go one step further, because the rest of the series only makes
# sense once you see this. `helpers.profile_decode` generates a few tokens under PyTorch's profiler and
# keeps only the decode steps (it subtracts a one-token run, so the prefill drops out):
#
# - **launches per token**: how many GPU kernels the model starts for one token;
# - **GPU-busy time per token**: how long those kernels actually ran on the GPU, added up;
# - **wall time per token**: how long the token took by the clock (timed without the profiler).
#
# If the GPU-busy time is much smaller than the wall time, the GPU sits idle most of the time, waiting
# for the CPU to launch the next kernel. That is what we expect at batch size 1: each layer is dozens of
# kernels, every launch costs several microseconds of host work, and most kernels move at most a few
# megabytes, which a modern GPU does in a few microseconds. (The exception is `lm_head`, which reads its
# whole 151,936 x 1,024 weight, about 311 MB in fp16, once per token.)

# %%
with helpers.generation_progress(model, helpers.forwards_per_profile(sizes.new_tokens), "profile"):
    prof = helpers.profile_decode(model, sizes.prompt_len, sizes.new_tokens, tokenizer=tokenizer)


helpers.record("baseline.launches_per_token", prof.launches_per_token, "launches",
               "CUDA kernels per decoded token (torch.profiler); empty in CPU mode")
helpers.record("baseline.gpu_busy_ms_per_token", prof.gpu_busy_ms_per_token, "ms",
               "summed kernel time per decoded token; empty in CPU mode")
helpers.record("baseline.wall_ms_per_token", prof.wall_ms_per_token, "ms",
               "wall-clock per decoded token, prefill excluded")

print(f"decode steps profiled:     {prof.tokens_profiled - 1}")
print(f"kernel launches per token: {helpers.fmt(prof.launches_per_token, 0, 'launches')}")
print(f"GPU-busy time per token:   {helpers.fmt(prof.gpu_busy_ms_per_token, 3, 'ms')}")
print(f"wall time per token:       {helpers.fmt(prof.wall_ms_per_token, 3, 'ms')}")
if prof.note:
    print("note:", prof.note)

# %%
if prof.gpu_busy_ms_per_token is None:
    helpers.md(
        f"Each decoded token took **{prof.wall_ms_per_token:.1f} ms** of wall time here. Without a GPU there "
        "are no GPU kernels to count and no GPU-busy time to measure, so the split between work and waiting "
        "is left to a GPU run. On the GPU this cell shows the number that drives the rest of the series: "
        "how many kernels one token launches."
    )
else:
    busy, wall, launches = prof.gpu_busy_ms_per_token, prof.wall_ms_per_token, prof.launches_per_token
    idle = prof.gpu_idle_fraction  # 1 - busy / wall, floored at 0 (the two come from separate runs)
    helpers.md(
        f"Each token took **{wall:.2f} ms** of wall time, during which the GPU was busy for "
        f"{'only ' if idle > 0.5 else ''}**{busy:.2f} ms**: it sat idle **{100 * idle:.0f}%** of the time. "
        f"The model launched "
        f"**{launches:.0f} kernels** per token: one every {1000 * wall / launches:.1f} µs of wall time, while "
        f"the average kernel ran for {1000 * busy / launches:.1f} µs. "
        + ("So the token's time is set by how fast Python and PyTorch can launch kernels, not by the GPU's "
           "arithmetic or memory: every launch we add later should show up almost in full."
           if idle > 0.5 else
           "So on this machine the GPU is busy most of the time: the kernels themselves, not launching "
           "them, set the pace, and extra bytes should cost more than extra launches.")
    )

# %% [markdown]
# ### The weight-read floor
#
# To produce one token, every weight of the model has to be read from GPU memory at least once: the
# matrix multiplications at batch size 1 use each weight exactly once. So the bytes of the weights divided
# by the GPU's memory bandwidth is a hard floor on the time per token. An H200 reads about 4.8 TB/s, a T4
# about 320 GB/s. `helpers.bandwidth` compares that floor with the measured time per token: the
# *floor fraction* is the share of the hardware's best that the run achieved.

# %%
bw = helpers.bandwidth(model, with_cache.tokens_per_s)
ms_per_token = 1000 / with_cache.tokens_per_s
helpers.record("baseline.floor_fraction", bw["floor_fraction"], "fraction",
               "achieved weight bandwidth / nominal bandwidth (= floor time / measured time per token)")

print(f"weights read per token:    {bw['model_bytes'] / 1e6:,.1f} MB")
print(f"measured time per token:   {ms_per_token:.2f} ms")
print(f"achieved weight bandwidth: {bw['achieved_gb_s']:.2f} GB/s")
if bw["nominal_gb_s"]:
    print(f"nominal memory bandwidth:  {bw['nominal_gb_s']:.0f} GB/s")
    print(f"floor time per token:      {bw['floor_ms_per_token']:.3f} ms")
    print(f"floor fraction:            {100 * bw['floor_fraction']:.2f}% of the hardware's best")
else:
    print("floor:", bw["note"])

# %%
if bw["floor_fraction"] is None:
    helpers.md(
        f"Reading {bw['model_bytes'] / 1e6:.1f} MB of weights per token at {with_cache.tokens_per_s:.1f} "
        f"tokens/s is an effective {bw['achieved_gb_s']:.2f} GB/s. There is no GPU here, hence no memory "
        "bandwidth to set a floor: on a GPU this cell shows how far the model runs from it."
    )
else:
    helpers.md(
        f"The floor is **{bw['floor_ms_per_token']:.2f} ms** per token; the model took "
        f"**{ms_per_token:.1f} ms**, {ms_per_token / bw['floor_ms_per_token']:.0f} times the floor, reading "
        f"its weights at an effective {bw['achieved_gb_s']:.0f} GB/s out of a nominal "
        f"{bw['nominal_gb_s']:.0f} GB/s ({100 * bw['floor_fraction']:.1f}%). "
        "The memory system is far from the limit: the time per token is spent elsewhere, and the profile "
        "above says where. That gap is the room in which this series makes the model slower."
        if bw["floor_fraction"] < 0.5 else
        f"The floor is **{bw['floor_ms_per_token']:.2f} ms** per token and the model took "
        f"**{ms_per_token:.2f} ms**: it reads its weights at {100 * bw['floor_fraction']:.0f}% of the nominal "
        "bandwidth, so on this machine memory traffic, not launching, is what sets the pace."
    )

# %% [markdown]
# ## Your numbers beside the blog's
#
# `helpers.compare` lines up your run, the committed H200 run of this series, and the blog's T4 figures.
# The blog's baseline table did not survive in its text, so its column is mostly empty here; its later
# chapters quote originals between 22.6 and 23.7 tokens/s on a T4.

# %%
helpers.show(helpers.compare("baseline"))

# %% [markdown]
# ## Takeaway
#
# - The model is a stack of identical layers: 4 RMSNorms, 7 linear layers and 1 attention block each,
#   plus a final norm and `lm_head`. Those are the modules the next chapters replace.
# - tokens/s is only comparable with greedy decoding, a fixed prompt and a fixed number of new tokens,
#   after a warm-up.
# - At batch size 1, a token is a long chain of small kernel launches (the profile above counted them).
#   Compare launches, GPU-busy time and wall time before reading anything into tokens/s: they say whether
#   a change will cost through extra bytes or through extra launches.
#
# Next, in chapter 2, we write our first Triton kernel and time it against PyTorch's own.
