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
# - what a kernel, a launch and memory traffic are, what a GPU is made of, and the three regimes every time
#   falls into: overhead-bound, memory-bound, compute-bound;
# - how this series measures: two clocks, interleaved shuffled rounds, the A/A floor and one verdict rule;
# - where the time of one token of Qwen3-0.6B goes (kernel launches, GPU-busy time, wall time, the weight-read
#   floor), and where the KV cache pays.
#
# ## What you will see
#
# At batch size 1, a decode step of Qwen3-0.6B is **overhead-bound**: the GPU spends most of each step waiting
# for the host (Python, PyTorch and the driver) to launch its next kernel. On the committed H200 run one decoded
# token launched 1,655 kernels and took 20.0 ms of wall time, and the GPU was busy for 3.40 ms of it: idle 83%
# of the time. Reading every weight once, the least work a token needs, takes a quarter of a millisecond at the
# H200's nominal bandwidth; the token took about 81 times that floor.
#
# The strongest evidence that the host sets the pace: an H200 reads its memory about 15 times as fast as the
# blog's T4, and has about 15 times its tensor-core compute. On the committed H200 run the original model made
# 49.2 tokens/s. The blog's T4 made 22.58 to 23.67 tokens/s with the same model: fifteen times the GPU bought
# little more than twice the speed.
#
# The KV cache tells the same story. The blog found that turning it off cut its T4's tokens/s by about half; on
# the committed H200 run it changed nothing measurable at 8 new tokens. [The KV-cache
# section](#Where-the-KV-cache-pays) times one step out to 512 tokens: without the cache it cost no more there
# either. The cache saves GPU arithmetic, and the H200 is not short of arithmetic.
#
# (The H200 could not reach the model hub, so it ran Qwen3-0.6B's exact architecture with seeded random
# weights. Timings depend on the shapes, not on the weights' values; the generated text is meaningless.)
#
# ## The blog's claim (T4)
#
# The blog ran Qwen3-0.6B in fp16 on a Colab T4 (about 14.56 GiB of memory, compute capability 7.5, CUDA 12.8,
# PyTorch 2.11.0, Triton 3.2.0), with deterministic decoding and a fixed number of new tokens. Its table of
# baseline numbers did not survive in the text; its later chapters quote the original at 23.38, 23.67 and 22.58
# tokens/s, the last over 512 new tokens. It reports that turning the KV cache off cut tokens/s by about half or
# more, without saying at which lengths, and it names no timing method. These are the blog's T4 figures; the
# series measures its own beside them.
#
# ## The idea
#
# Making a model faster takes a lot of knowledge before the first result; making it slower takes very little,
# since almost any change to a well-tuned program costs speed. The lesson lies in **why** each change costs what
# it costs. The model keeps computing the same function throughout, only worse. Three words carry the series:
#
# - A **kernel** is one function that runs on the GPU, executed by thousands of threads at once. Adding two
#   tensors is a kernel; a transformer layer is dozens of them.
# - A **launch** is the host asking the GPU to run a kernel: Python, through PyTorch, prepares the arguments
#   and hands the request to the driver. That costs microseconds to tens of microseconds of host work per launch
#   (chapter 2 measures it), whether the kernel then runs for a microsecond or a second.
# - **Memory traffic** is the bytes a kernel reads from and writes to the GPU's main memory. At batch size 1,
#   moving bytes, not arithmetic, paces most of a language model's kernels.
#
# A model that generates one token at a time launches many small kernels per token. So before writing a kernel
# we measure the baseline: how fast is the unmodified model, and where does its time go?
#
# ## How we measure
#
# Every number in this series comes from one method, explained here once.
#
# - **Two clocks.** *GPU time* is how long the GPU works: a call replayed from a CUDA graph
#   (`triton.testing.do_bench_cudagraph`, the host out of the loop), or the kernels' durations summed by
#   `torch.profiler` (*GPU-busy time*). *Wall time* is the host's clock, synchronised with the GPU, around whole
#   calls or generations: Python, PyTorch and every launch included. At batch size 1 the two can differ
#   several-fold, so every number names its clock.
# - **Prefill and decode apart.** A generation is a *prefill* (one forward pass over the prompt) and then
#   *decode* steps, one token each. Right after each N-token generation the same configuration generates one
#   token: the prefill alone. Wall ms per decoded token is (N-token time - 1-token time) / (N - 1). Tokens/s
#   counts the whole generation, prefill included.
# - **Interleaved, shuffled rounds.** Configurations are never timed one after another. In each round every
#   configuration runs once, in an order shuffled with a fixed seed, each pair of rounds running one order
#   forwards and then backwards; each time is divided by the original's time in the same round. A slow moment of
#   the host slows the whole round, and the ratio cancels it.
# - **The A/A floor.** The original takes part twice. Its ratio to itself should be 1; how far it lands from 1
#   is this run's noise.
# - **Median and quartiles.** A result is the median of the per-round ratios, with its quartiles: the middle half
#   of the rounds.
# - **One verdict rule.** `helpers.verdict` says "1.66x slower" (or faster) only when the median lies above
#   1 + t or below 1 / (1 + t), where t is twice the A/A floor's distance from 1 and never under 5%, and the
#   quartiles lie on the same side of 1. Anything else is "within noise".
# - **Time first, profile after.** A profile leaves NVIDIA's CUPTI attached, which slows every later launch, so
#   each chapter times before it profiles.
#
# METHODS.md at the repository root has the details.

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
import torch

import helpers

helpers.show_env()
SIZES, ORIGINAL, AGAIN, NO_KV = helpers.SIZES, helpers.ORIGINAL, helpers.ORIGINAL_AGAIN, "no KV cache"
P, N = SIZES.prompt_len, SIZES.new_tokens  # the baseline: a 32-token prompt and 8 new tokens at full size
KV_LENGTHS, KV_ROUNDS = SIZES.kv_lengths, SIZES.rounds_kv  # one decode step after n generated tokens, for each n

# %% [markdown]
# The line says where this run happens; `pinned` says whether `SLOWER_PIN_CPUS` holds the process on some CPU
# cores, which steadies the host's timings on some machines (METHODS.md).
#
# ## The GPU you are on
#
# The table puts your GPU (on a GPU only) beside a T4, the blog's GPU, and an H200, the GPU of this series'
# committed run. Their columns are data-sheet figures, except the H200's L2 and the T4's memory, which are what
# those GPUs report. Bandwidth and compute are nominal peaks (`helpers.NOMINAL_GB_S`, `helpers.NOMINAL_TFLOPS`):
# real kernels approach them but do not reach them.

# %%
gpus = helpers.gpu_table()  # one column per GPU: yours (GPU mode only), a T4, an H200
helpers.show(gpus.apply(lambda column: column.map(lambda v: f"{v:g}" if isinstance(v, float) else v)))  # 8.1, not 8.100

# %% [markdown]
# The terms, once each (the T4's figure, then the H200's):
#
# - A **streaming multiprocessor (SM)** is one of the GPU's identical processors, with its own arithmetic units,
#   registers and shared memory; a kernel's work is spread over all of them: 40 and 132 SMs.
# - A **warp** is 32 threads executing one instruction at a time together. A Triton **program** (CUDA's *thread
#   block*) is `num_warps` warps (4 by default) working on one block of the data, on one SM from start to end.
# - **Registers** are each thread's private variables, the fastest storage: 256 KiB per SM on both, so the more
#   a thread needs, the fewer threads fit. **Shared memory** is on-chip memory that the threads of one program
#   share (a matmul keeps tiles there): 64 and 228 KiB per SM. The **L2 cache**, between the SMs and device
#   memory, holds recently used bytes: 4 and 60 MiB.
# - **Device memory** is the main memory, DRAM outside the chip (GDDR6 on the T4's card, HBM stacks in the
#   H200's package). Its **bandwidth**, 320 and 4,800 GB/s, bounds every kernel that reads its data once: a
#   gigabyte takes at least 3.1 ms and 0.21 ms.
# - **Tensor cores** multiply small matrices in one instruction, fp16 in and fp32 accumulated: 65 and 989
#   TFLOP/s (10^12 floating-point operations, *flop*, per second). Without them a matmul runs on ordinary
#   fused multiply-add (**FMA**) instructions: 8.1 and 67 TFLOP/s.
# - **Occupancy** is the warps resident on an SM over the most it can hold, set by whichever runs out first:
#   warps, registers or shared memory. A **grid** is the programs one launch starts; a grid larger than the SMs
#   hold at once runs in **waves** ([chapter 2](02_add_kernel.ipynb#Programs,-blocks-and-masks) builds one).
#
# The **compute capability** (7.5 and 9.0) names a GPU generation; compilers target it as `sm_75` and `sm_90`.
# The figure puts these memories on one axis of bytes, from the registers down to device memory, the largest and
# slowest to reach, whose bandwidth paces a kernel that reads each byte once.

# %%
fig = helpers.plot_memory_hierarchy(name="memory_hierarchy")
plt.show()

# %% [markdown]
# ### Three regimes
#
# Horace He's essay "Making Deep Learning Go Brrrr From First Principles" sorts GPU time into three regimes:
#
# - **overhead-bound**: the GPU waits for the host. Python, PyTorch's dispatcher and the launch take longer to
#   issue a kernel than the GPU takes to run it. More work per kernel costs almost nothing; more kernels cost a
#   launch each.
# - **memory-bound**: the SMs mostly wait for bytes from device memory. The time grows with the bytes moved.
# - **compute-bound**: the arithmetic units are the limit. The time grows with the flop.
#
# Between the last two, the **arithmetic intensity** decides: flop per byte moved. A GPU's **ridge point** is
# its peak flop/s over its bandwidth, the table's last row: 203 flop per byte on a T4's tensor cores, 206 on an
# H200's. Below it a kernel is memory-bound, above it compute-bound. Adding two fp16 vectors does 1 flop per 6
# bytes; a matrix-vector product, a multiply and an add per 2-byte weight, 1 flop per byte: both far below any
# ridge point. A **roofline** plot (chapter 4) draws that line. Where the series' experiments should land:
#
# | chapter: experiment | expected regime |
# |---|---|
# | 2: vector add | overhead-bound when small, memory-bound when large |
# | 3: RMSNorm, fused and un-fused | overhead-bound at one row, memory-bound at many |
# | 4: matmul at one row / many rows | memory-bound / towards compute-bound |
# | 5: attention of one new token | overhead-bound as a per-head loop, memory-bound fused |
# | 6 and 7: the all-custom model | overhead-bound: thousands of tiny kernels per token |
# | 9: fused kernels, then a CUDA graph | from overhead-bound towards memory-bound |
#
# A **CUDA graph**, in the last row, is a recorded sequence of kernels that the GPU replays from one launch.
# Replaying a call from a graph is also the series' GPU clock.
#
# ## The model
#
# `helpers.load_model` loads Qwen3-0.6B in fp16 on a GPU. Where the Hugging Face hub cannot be reached it builds
# the same architecture with seeded random weights (speed depends on shapes, not values); in CPU mode, a tiny
# Qwen3 of the same structure that the interpreter can keep up with. Then a census of the modules later chapters
# replace: each decoder layer holds four RMSNorms (before attention, before the MLP, one on each query and key
# head), seven linear projections (q, k, v, o; gate, up, down) and one attention block, and one more RMSNorm and
# the `lm_head` close the model. With $L$ layers: $4L + 1$ RMSNorms, $7L + 1$ linear layers and $L$ attention
# blocks, so 113, 197 and 28 for the real model's 28 layers.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
L = model.config.num_hidden_layers
expected = {"rmsnorm": 4 * L + 1, "linear": 7 * L + 1, "attention": L}
helpers.show(pd.DataFrame({"counted": {k: census[k] for k in expected}, f"expected (L = {L})": expected}))
print(f"parameters: {census['parameters']:,}   weights: {census['bytes'] / 1e6:,.1f} MB")
ok = all(census[k] == v for k, v in expected.items())
print("census check:", "PASS" if ok else "FAIL")
assert ok, f"census {census} does not match the per-layer rule {expected}"

# %% [markdown]
# ## Generating the same way every time
#
# Every generation in this series is **greedy** (always the most likely token, no sampling) and makes exactly
# the same number of new tokens (`min_new_tokens == max_new_tokens`, so an early end-of-text token cannot
# shorten a run), from a fixed prompt. One untimed generation with the KV cache and one without it: the two must
# pick the same tokens.

# %%
prompt = helpers.make_prompt(P, tokenizer, model.config.vocab_size)
sample, _ = helpers.generate(model, prompt, N, use_cache=True)  # (new token ids, seconds): untimed here
sample_no_kv, _ = helpers.generate(model, prompt, N, use_cache=False)
assert len(sample) == N, "generation must produce a fixed number of tokens"
print("new tokens:", repr(tokenizer.decode(sample)) if tokenizer is not None else sample.tolist())
print(f"same tokens with and without the cache: {int((sample == sample_no_kv).sum())} of {N}")

# %% [markdown]
# ## Where the KV cache pays
#
# With the **KV cache** the model keeps the keys and values of earlier tokens, which attention needs, so each
# decode step pushes only the new token through the network. Without it, each step feeds the whole sequence
# again: after a prompt of $P$ tokens and $n$ generated ones, $P + n$ positions instead of one.
#
# **Predict.** Each position goes through the 0.44 billion weights of the 28 decoder layers, a multiply and an
# add per weight; attention adds a part that grows with the square of the positions. Cache or not, the step also
# reads every weight once, 1.19 GB in fp16. `step_work` counts both; the flop at a GPU's tensor-core peak or the
# bytes at its bandwidth, whichever takes longer, is the least GPU time of the step.

# %%
def step_work(positions, cached, cfg=helpers.QWEN3_0_6B):
    """(FLOP, weight bytes) of one decode step of Qwen3-0.6B in fp16, with ``positions`` tokens in the sequence.

    Without the cache the step is a forward pass over every position: 2 FLOP (a multiply and an add) per weight
    of the decoder layers per position, plus causal attention's q.k^T and p.v, 2 x head_dim FLOP each per
    (query, key) pair and query head, over about positions^2 / 2 pairs per layer. With the cache it is one
    position: the weights once, one query against ``positions`` keys. Both add the lm_head for the last position
    (generate() asks for no other logits). Every weight is read once either way, 2 bytes each (the tied
    embedding and lm_head once; the norms' few thousand weights left out)."""
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    q, kv = cfg["num_attention_heads"] * cfg["head_dim"], cfg["num_key_value_heads"] * cfg["head_dim"]
    weights = layers * (2 * h * q + 2 * h * kv + 3 * h * i)  # q and o, k and v, gate, up and down: 0.44 B
    pairs = positions if cached else positions ** 2 / 2  # (query, key) pairs per head and layer
    flop = 2 * weights * (1 if cached else positions) + 4 * layers * q * pairs + 2 * cfg["vocab_size"] * h
    return flop, 2 * (weights + cfg["vocab_size"] * h)


def least_ms(work, slug):
    """The least GPU ms of ``work`` (FLOP, bytes) on GPU ``slug``: the FLOP at the fp16 tensor-core peak or the
    bytes at the nominal bandwidth, whichever takes longer (the two overlap, so not their sum)."""
    flop, moved = work
    return max(flop / helpers.NOMINAL_TFLOPS[slug][0] / 1e9, moved / helpers.NOMINAL_GB_S[slug] / 1e6)  # ms


full_prompt = helpers.SIZES_BY_MODE["full"].prompt_len  # the prediction is for Qwen3-0.6B at full size
helpers.show(pd.DataFrame([{
    "tokens in the sequence": full_prompt + n,
    "GFLOP, cache": step_work(full_prompt + n, True)[0] / 1e9,
    "GFLOP, no cache": step_work(full_prompt + n, False)[0] / 1e9,
    **{f"{gpu} least ms, {kind}": least_ms(step_work(full_prompt + n, kind == "cache"), gpu.lower())
       for gpu in ("T4", "H200") for kind in ("cache", "no cache")},
} for n in helpers.SIZES_BY_MODE["full"].kv_lengths]))

# %% [markdown]
# With the cache a step does about 1 flop per byte of weights: memory-bound, its least time the weight-read
# floor. Without it every position adds about three quarters of a flop per byte, so past the ridge point (a
# few hundred positions) the step turns compute-bound and costs more than the floor: at 544 positions, 512
# generated after the 32-token prompt, at least 8 ms on a T4 and half a millisecond on an H200.
#
# Set that beside a decode step's wall time: about 20 ms on the H200
# ([measured below](#Where-the-time-of-one-token-goes)), about 40 ms on the blog's T4 (1000 / 23 tokens/s). GPU
# work shorter than the host's time per step hides behind the launches. Predict: on an H200 a step costs the
# same with and without the cache at every length here (at peak, its arithmetic would fill a 20 ms step only at
# about 10,000 positions); on a T4 the missing cache can start to show towards 512 tokens, where its matmuls,
# well below their peak at these shapes, come nearer the host's time.
#
# **Measure one step, not whole generations.** A 512-token generation takes about 10 s on the H200 without
# CUDA graphs, cache or not, and without the cache the steps grow with the sequence, quadratically in the
# work: whole generations in rounds, with and without the cache, would take minutes. The cache's difference sits
# in one step, so this section times that step at each length $n$ of `KV_LENGTHS` (32, 128 and 512 at full
# size). `helpers.compare_configs` takes a prompt of $P + n$ tokens, standing in for the $P$-token prompt and $n$
# generated tokens, and `new_tokens=2`: each round generates two tokens and then one, with the cache (the
# original, twice: the A/A floor) and without it. Both run the same prefill over the same prompt, so two tokens
# minus one leaves one decode step with $P + n$ tokens in the sequence, round by round. With $n = 32$: a 64-token
# prompt; the 2-token generation is its prefill plus one step, the 1-token one the prefill alone; their
# difference, one step at 64 tokens, took 21.29 ms with the cache on the committed H200 run. `KV_ROUNDS` rounds
# per length (4 at full size) keep the section to a few seconds on an H200, at the price of a wider noise threshold.

# %%
kv = {n: helpers.compare_configs(model, {NO_KV: {"use_cache": False}}, prompt_len=P + n, new_tokens=2,
                                 rounds=KV_ROUNDS, tokenizer=tokenizer) for n in KV_LENGTHS}
steps = pd.DataFrame([{
    "tokens in the sequence": P + n,
    "wall ms per step, cache": c.decode_ms(ORIGINAL).median,
    "wall ms per step, no cache": c.decode_ms(NO_KV).median,
    "no cache / cache": c.decode_ratio(NO_KV).median, "quartiles": c.decode_ratio(NO_KV).quartiles,
    "A/A floor": c.decode_ratio(AGAIN).median,
    "verdict": helpers.verdict(c.decode_ratio(NO_KV), c.decode_ratio(AGAIN)).text,
} for n, c in kv.items()])
helpers.show(steps)
helpers.save_sweep(steps, "kv_cache_steps")
longest = kv[KV_LENGTHS[-1]]
r, floor = longest.decode_ratio(NO_KV), longest.decode_ratio(AGAIN)
print(helpers.verdict_line(f"step at {P + KV_LENGTHS[-1]} tokens, no cache / cache", r, floor))

# %%
fig, ax = plt.subplots(figsize=(7, 4))
x = [P + n for n in KV_LENGTHS]
for name, marker in ((ORIGINAL, "o"), (NO_KV, "s")):
    ms = [c.decode_ms(name) for c in kv.values()]  # per round, each length
    ax.errorbar(x, [m.median for m in ms], yerr=[[max(0.0, m.median - m.low) for m in ms],
                                                 [max(0.0, m.high - m.median) for m in ms]],
                marker=marker, capsize=4, label="with the KV cache" if name == ORIGINAL else "without it")
ax.set_xscale("log", base=2)
helpers.plain_log_ticks(ax, "x", x)
ax.set(xlabel="tokens in the sequence at the step", ylabel="wall ms per decode step", ylim=(0, None),
       title="Does a decode step cost more without the KV cache?")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
helpers.save_figure(fig, "kv_cache_steps")
plt.show()

# %% [markdown]
# **What it shows.** With the cache a step should cost the same at every length (the cache adds 4 KB per token
# and layer to read: at 544 tokens, 62 MB, about 13 µs on an H200); on the committed H200 run it stayed between
# about 20 and 21 ms. The line without it can rise only where the GPU's own work shows through the host's time,
# and on the committed H200 run it never rose: within noise at 64 and 160 tokens, and at 544 a miss the other
# way, 1.07x faster without the cache (quartiles 0.926-0.944). The GPU's work cannot explain that; the cache's
# host bookkeeping (appending keys and values in every layer) or the host's drift over only 4 rounds could, and
# this run cannot tell which. Chapter 7 shows the extra work hiding from another side on the committed H200 run:
# a prefill over 1,024 tokens, which is what a step without the cache is, cost about as much wall time as one
# decoded token. The blog's "about half" on its T4 needs about 40 ms more per
# step: sequences far longer than these, or a host quick enough for the GPU's work to set the pace.
#
# ## The baseline, in rounds
#
# Now the baseline every later chapter compares against: the original generating `SIZES.new_tokens` tokens (8)
# after a `SIZES.prompt_len`-token prompt (32), in `SIZES.rounds` shuffled rounds (24), beside its A/A copy and
# the model without its cache. Short generations in many rounds, because the closer in time two configurations
# run, the more of the host's drift their ratio cancels (METHODS.md has the measurements). After the rounds,
# `helpers.profile_configs` counts the original's kernels and GPU-busy time per decoded token.

# %%
comparison = helpers.compare_configs(model, {NO_KV: {"use_cache": False}}, tokenizer=tokenizer)
helpers.profile_configs(comparison, model, [ORIGINAL])  # after the timed rounds
setting = f"greedy, prompt {P}, {N} new tokens, median of {len(comparison.orders)} shuffled rounds"
helpers.record("baseline.tps_kv", comparison.tokens_per_s[ORIGINAL], "tokens/s", setting + "; prefill included")
helpers.record("baseline.tps_no_kv", comparison.tokens_per_s[NO_KV], "tokens/s",
               "use_cache=False, " + setting + "; prefill included")
no_kv = comparison.record(NO_KV, "baseline.no_kv_slowdown", f"prompt {P}, {N} new tokens")
helpers.show(comparison.table())
print(helpers.verdict_line("no cache / cache, per generation", comparison.ratios[NO_KV], comparison.floor))

# %% [markdown]
# On the committed H200 run the original made 49.18 tokens/s and its A/A copy 49.71, and the A/A floor's median
# was 0.990 with quartiles 0.967-1.010. Two medians of the very same model fell about 1% apart, so medians set
# side by side decide nothing; the rounds do. Without the cache a generation took a median 0.988 times as long,
# quartiles 0.96-1.04: within noise. At 8 new tokens the sequence never passes 40 positions, so this cannot show
# where the cache pays (the section above does); it stays as the series' recorded baseline.
#
# ## Where the time of one token goes
#
# The blog stops at tokens/s. The rest of the series needs one step more, and the comparison above has it all:
# the wall ms per decoded token and the prefill from its rounds ([how we measure](#How-we-measure)), the kernels
# and GPU-busy ms per decoded token from its profile. One more number needs no measuring: every weight is read
# once per token, so weight bytes over the nominal bandwidth (`helpers.bandwidth`) is the **weight-read floor**,
# the least GPU time of a decoded token at batch size 1.
#
# **Predict.** A layer is dozens of kernels, most of them microseconds of GPU work, each costing microseconds to
# tens of microseconds of host work to launch. If launching is slower than running, the GPU-busy time lies far
# below the wall time.

# %%
prof = comparison.profile(ORIGINAL)  # kernels and GPU-busy from the profiler, wall from the rounds
decode = comparison.decode_ms(ORIGINAL)  # wall ms per decoded token, per round
prefill = helpers.Ratio.of([s * 1e3 for s in comparison.first_seconds[ORIGINAL]])  # ms, per round
rounds = len(comparison.orders)
helpers.record("baseline.launches_per_token", prof.launches_per_token, "launches",
               "CUDA kernels per decoded token (torch.profiler, after the rounds); empty in CPU mode")
helpers.record("baseline.gpu_busy_ms_per_token", prof.gpu_busy_ms_per_token, "ms",
               "summed kernel time per decoded token (GPU clock, torch.profiler); empty in CPU mode")
isolated = decode.median > 0  # else the decode steps drowned in timing noise: profile() averaged over all steps
helpers.record("baseline.wall_ms_per_token", prof.wall_ms_per_token, "ms",
               f"wall ms per decoded token (host clock{'' if helpers.HAS_GPU else '; interpreter time'}), "
               f"prefill excluded; median of {rounds} shuffled rounds" + ("" if isolated else f"; {prof.note}"),
               spread=decode if isolated else None)
helpers.record("baseline.prefill_ms", comparison.prefill_ms(ORIGINAL), "ms",
               f"wall ms of a one-token generation: one forward pass over {P} prompt tokens; median of "
               f"{rounds} shuffled rounds", spread=prefill)
bw = helpers.bandwidth(model, 1000 / prof.wall_ms_per_token)  # decoded tokens/s, prefill excluded
helpers.record("baseline.floor_fraction", bw["floor_fraction"], "fraction",
               "weight bytes x decode rate (1000 / wall ms per decoded token) / nominal bandwidth "
               "(= floor time / wall ms per decoded token)")

wall, busy, kernels, floor_ms = (prof.wall_ms_per_token, prof.gpu_busy_ms_per_token, prof.launches_per_token,
                                 bw["floor_ms_per_token"])
gpu = busy is not None  # CPU mode: no GPU kernels to count, no bandwidth to set a floor
nan = float("nan")
helpers.show(pd.DataFrame([
    ("wall ms", wall, decode.quartiles, "host clock, the rounds"),
    (f"prefill wall ms ({P}-token prompt, once)", comparison.prefill_ms(ORIGINAL), prefill.quartiles,
     "host clock, the rounds"),
    ("kernels", kernels if gpu else nan, "", "torch.profiler"),
    ("GPU-busy ms", busy if gpu else nan, "", "torch.profiler kernel time"),
    ("GPU idle, % of the wall time", 100 * prof.gpu_idle_fraction if gpu else nan, "", "1 - busy / wall"),
    ("wall µs per kernel", 1e3 * wall / kernels if gpu else nan, "", ""),
    ("GPU µs per kernel", 1e3 * busy / kernels if gpu else nan, "", ""),
    ("weights read, MB", bw["model_bytes"] / 1e6, "", "helpers.module_census"),
    ("flop per byte of weights", 2 * census["parameters"] / census["bytes"], "", "2 flop per weight read"),
    ("weight-read floor, GPU ms", floor_ms or nan, "", "weight bytes / nominal bandwidth"),
    ("wall / floor", wall / floor_ms if floor_ms else nan, "", ""),
    ("GPU-busy / floor", busy / floor_ms if floor_ms and gpu else nan, "", ""),
    ("weight GB/s achieved", bw["achieved_gb_s"], "", "weight bytes x decoded tokens/s"),
], columns=["per decoded token", "value", "quartiles", "clock or source"]))

# %% [markdown]
# **What it shows.** On the committed H200 run a decoded token took 20.02 wall ms (quartiles 19.4-20.6 over the
# rounds), and the GPU was busy for 3.40 ms of it: idle 83% of the time. It launched 1,655 kernels, one every
# 12.1 µs of wall time, while the average kernel ran for 2.1 µs of GPU time. The host cannot issue kernels as
# fast as the GPU finishes them, so the host sets the token's time: launches added or removed show up in the wall
# time.
#
# **One time per token.** Tokens/s and wall ms per decoded token are two views of the same rounds. On the
# committed H200 run, 49.2 tokens/s is 8 tokens over a whole generation: 22.2 ms of prefill plus 7 steps of
# 20.0 ms, about 162 ms. Without the prefill, 1000 / 20.0 gives 50 decoded tokens/s.
#
# **The weight-read floor.** On the committed H200 run the floor was 0.25 GPU ms per token: the token took about
# 81 times the floor, reading its weights at an effective 60 GB/s out of a nominal 4,800. Even the GPU-busy time
# alone was 13.7 times the floor: each of its small kernels pays a fixed cost to start, whatever it moves. That
# gap is the room in which this series makes the model slower.
#
# **The regime.** A decoded token does 2 flop per 2-byte weight, 1 flop per byte, far below the ridge point (206
# on an H200): the kernels alone, the host left out, are **memory-bound**, and a decode step at batch size 1 can
# never do better. With the host in, the wall time lies far beyond the GPU-busy time: the step is
# **overhead-bound**, [the first regime](#Three-regimes). Chapter 9 removes most of the host's time with a CUDA
# graph and moves the step towards the memory-bound one.
#
# ### One decode step on a time axis
#
# `helpers.step_timeline` traces one decode step with `torch.profiler`: every launch call on the host (top lane)
# and every kernel on the GPU (bottom lane) on one time axis. Gaps in the bottom lane are the GPU waiting for the
# host. Tracing adds host bookkeeping, so read the picture's shape and counts, not its length (GPU only).

# %%
if helpers.HAS_GPU:
    fig = helpers.plot_timelines({"original": helpers.step_timeline(model, prompt)}, name="timeline_original")
    plt.show()
else:
    print("CPU mode: no GPU timeline")

# %% [markdown]
# On the committed H200 run the traced step issued 1,619 host launches and ran 1,619 kernels, and the GPU was idle
# 90% of the traced span. At the full step's scale every kernel is drawn at least a pixel wide, so both lanes look
# solid; the zoom on the right shows one layer at its true widths, mostly gaps. The profile counted 36 kernels
# more per token because `generate()` adds its own each step (the next inputs, picking the token, checking
# whether to stop).
#
# ## Your numbers beside the blog's
#
# `helpers.compare` lines up your run, the committed H200 run and the blog's T4 figures, with the verdict your
# run recorded for each ratio. The blog's baseline table did not survive, so its column is empty here.

# %%
beside = helpers.compare("baseline")
beside["verdict (yours)"] = beside["id"].map(helpers.results().set_index("id")["verdict"]).fillna("")
helpers.show(beside)

# %% [markdown]
# ## Try it yourself
#
# Three small changes, one regime each. Guess first: set `answer` to `"faster"`, `"slower"` or `"same"` and run
# the cell (with `answer = None` it only measures). Each change is timed against the unchanged call in shuffled
# rounds, with an A/A floor, and judged by `helpers.verdict`. In CPU mode these are PyTorch's CPU operations on
# the wall clock: expect other answers there.
#
# **1. Half the work, the same launch.** Add two vectors of `SIZES.add_n` elements ($2^{20}$ at full size,
# 6.3 MB moved in fp16), then only their first halves, on the **host clock**. At nominal bandwidth those bytes
# take about 1.3 µs on an H200 and 20 µs on a T4, against microseconds to tens of microseconds per launch. Where
# the bytes take far less than a launch, expect **the same** time: overhead-bound. This exercise times the host
# *after* the chapter's profile (`after_profile=True`): CUPTI's extra host time per launch hits both calls alike
# and pulls the ratio towards 1, so here a "same" is weaker evidence than it looks.

# %%
DEVICE, DTYPE = helpers.DEVICE, helpers.DTYPE
CPU_CLOCK = "wall time of PyTorch on the CPU (CPU mode)"  # no Triton kernel here, so no interpreter
x, y = (torch.randn(SIZES.add_n, device=DEVICE, dtype=DTYPE) for _ in range(2))
x_half, y_half = x[:SIZES.add_n // 2], y[:SIZES.add_n // 2]  # views, sliced once: slicing costs host time too

answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({"half the elements": lambda: x_half + y_half}, reference=lambda: x + y, clock="host",
                            rounds=2 * SIZES.rounds_kernel,  # even: each order as often forwards as backwards
                            after_profile=True)  # this chapter has profiled: both calls pay CUPTI's extra alike
measured = helpers.check_answer(answer, cmp.ratios["half the elements"], cmp.floor, change="half the elements",
                                clock=cmp.clock if helpers.HAS_GPU else CPU_CLOCK)

# %% [markdown]
# **2. Half the bytes, on the GPU clock.** The same change on `max(SIZES.add_sweep)` elements ($2^{26}$ at full
# size, far larger than any L2), timed by CUDA-graph replay, the host out of the loop. At 1 flop per 6 bytes the
# bytes set the time: expect faster, close to 2x, less a small fixed cost per kernel.

# %%
big = max(SIZES.add_sweep)
a, b, out = (torch.randn(big, device=DEVICE, dtype=DTYPE) for _ in range(3))
a_half, b_half, out_half = a[:big // 2], b[:big // 2], out[:big // 2]

answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({"half the elements": lambda: torch.add(a_half, b_half, out=out_half)},
                            reference=lambda: torch.add(a, b, out=out))
measured = helpers.check_answer(answer, cmp.ratios["half the elements"], cmp.floor, change="half the elements",
                                clock=cmp.clock if helpers.HAS_GPU else CPU_CLOCK)

# %% [markdown]
# **3. Twice the rows of a square matmul.** An $n \times n$ matrix times an $n \times n$ weight, $n$ being the
# MLP's width (`SIZES.matmul_shape[2]`, 3,072 at full size), then twice the rows, on the GPU clock. The flop
# count doubles while the numbers moved grow from $3n^2$ to $5n^2$. Expect slower: nearer 2x says the flop set
# the time (compute-bound), nearer 5/3 says the bytes did (memory-bound).

# %%
n = SIZES.matmul_shape[2]
w = torch.randn(n, n, device=DEVICE, dtype=DTYPE) / n**0.5
rows, rows2 = (torch.randn(k, n, device=DEVICE, dtype=DTYPE) for k in (n, 2 * n))

answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
cmp = helpers.compare_calls({"twice the rows": lambda: rows2 @ w.T}, reference=lambda: rows @ w.T)
measured = helpers.check_answer(answer, cmp.ratios["twice the rows"], cmp.floor, change="twice the rows",
                                clock=cmp.clock if helpers.HAS_GPU else CPU_CLOCK)

# %% [markdown]
# The answers, to read after your own: on the committed H200 run the half add took 1.08x the whole one's host
# time (quartiles 1.03-1.12), a "slower" near its threshold where the prediction said "same"; half the bytes on
# the GPU clock ran 1.94x faster; twice the rows took 2.02x as long. The second and third follow the work; the
# first does not: half the bytes bought no time at all.
#
# ## Takeaway
#
# - At batch size 1 a decoded token is about 1,650 small kernels, and the host launching them, not the GPU, sets
#   its time.
# - Compare two configurations only within one run: interleaved rounds, an A/A floor, one verdict rule.
# - The KV cache saves GPU work; it pays on the wall clock only where that work outgrows the host's time.
#
# Next, in chapter 2, we write our first Triton kernel and time it against PyTorch's own.
