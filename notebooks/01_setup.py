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
# - what the GPU you are on is made of (SMs, warps, registers, shared memory, L2, device memory, tensor
#   cores, occupancy), beside a T4 and an H200, and the three regimes every time falls into:
#   overhead-bound, memory-bound, compute-bound;
# - how to load Qwen3-0.6B, count the modules we will later replace, and generate text reproducibly;
# - how to measure tokens per second, with and without the KV cache, so that noise cannot fool you:
#   interleaved rounds, and the original model measured against itself (the *A/A floor*);
# - where the time of one generated token actually goes: launches, GPU-busy time, wall time, and the
#   weight-read floor that no implementation can beat; which regime that puts a decode step in, and what
#   one decode step looks like on a time axis (on a GPU);
# - how to check your own guesses about the three regimes with three small experiments.

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
#   CPU: it prepares the arguments, and hands the request to the driver. That host work costs microseconds
#   to tens of microseconds *per launch* (chapter 2 measures it), whether the kernel then runs for one
#   microsecond or one second.
# - **Memory traffic** is the bytes a kernel reads from and writes to the GPU's main memory. For most of
#   what a language model does at batch size 1, moving bytes, not arithmetic, sets the kernel's speed.
#   That main memory is DRAM outside the GPU's chip: **HBM** (high-bandwidth memory, stacks of DRAM placed
#   right beside the chip in one package) on an H200, **GDDR6** (graphics DRAM chips on the card around
#   it) on a T4. HBM's much wider connection to the chip lets an H200 read about 15 times as many bytes
#   per second as a T4 (the weight-read floor below gives both figures).
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
import pandas as pd

import helpers

helpers.show_env()

# %% [markdown]
# The line ends with `pinned`. At batch size 1 the host CPU sets the pace, so setting `SLOWER_PIN_CPUS`
# before `helpers` is imported (cores as `taskset -c` writes them: `3`, `2-5`) keeps this process on those
# cores, which steadies the timings on some hosts and not on others; `no` means the operating system
# moves it freely. Pinned or not, every tokens/s comparison in this series also times the original model
# against itself, and how far that *A/A* pair strays from 1 (the *A/A floor*) is the noise any real
# difference has to beat.

# %% [markdown]
# ## The GPU you are on
#
# Every later chapter talks about the machine underneath: SMs, warps, registers, the L2 cache, tensor
# cores. Here is a short model of it, with the figures of your GPU (from `torch.cuda.get_device_properties`)
# beside those of a T4 (the blog's GPU) and an H200 (the GPU of this series' committed run). The T4's and
# the H200's columns are data-sheet figures, except the H200's L2, which is the size the H200 itself reports
# (the figure chapter 2 reads from your GPU), and the T4's memory, which is what `torch` reports on a T4 (its
# data sheet says 16 GB); your own memory row is what `torch` reports, in GiB. A data sheet's "GB" is not
# always decimal (the H200's 141 GB are about what the H200 reports in GiB, 140), so compare memory rows
# loosely. The bandwidth and compute rows are the vendors' nominal peaks
# (`helpers.NOMINAL_GB_S`, `helpers.NOMINAL_TFLOPS`), which real kernels approach but do not reach.
#
# Three rows need a word before the table. The **compute capability** (7.5 for a T4, 9.0 for an H200) is
# NVIDIA's number for a GPU generation and the instructions it has; a compiler targets it by name, `sm_75`
# and `sm_90` (chapters 2 and 4 compile for both). **TFLOP/s** is trillions of floating-point operations
# (flop) per second, an addition or a multiplication each. The **ridge point** is the compute row over the
# bandwidth row, flop per byte: [Three regimes](#Three-regimes), below, says what it decides.

# %%
import matplotlib.pyplot as plt

gpus = helpers.gpu_table()  # one column per GPU: yours (GPU mode only), a T4, an H200
helpers.show(gpus.apply(lambda column: column.map(lambda v: f"{v:g}" if isinstance(v, float) else v)))  # 8.1, not 8.100

# %% [markdown]
# The figure puts the places where data can live on one axis of bytes, from the registers, closest to the
# arithmetic, down to device memory. The further down, the slower to reach; the three on-chip rows hold
# megabytes, device memory holds gigabytes. A kernel that reads every byte once, as most kernels of a
# model at batch size 1 do, is paced by the last row's bandwidth.

# %%
fig = helpers.plot_memory_hierarchy(name="memory_hierarchy")
plt.show()

# %%
import numbers

who = {c: "your GPU" if c.startswith("yours") else "a T4" if "T4" in c else "an H200" for c in gpus.columns}
specs = {who[c]: {k: (None if v == "" else v) for k, v in gpus[c].items()} for c in gpus.columns}


def across(figure, unit=""):
    """``figure(spec)`` for each GPU of the table in words: "your GPU 132, a T4 40, an H200 132" (a GPU
    whose properties lack a figure is left out)."""
    parts = []
    for name, spec in specs.items():
        try:
            value = figure(spec)
        except TypeError:  # a figure torch did not report for this GPU
            continue
        if value is not None:
            if isinstance(value, numbers.Number):
                value = f"{value:,.0f}" if value == int(value) else f"{value:.3g}"
            parts.append(f"{name} {value}{unit}")
    return ", ".join(parts)


WARPS, REGS = 4, 64  # an example program: Triton's default num_warps, 64 registers per thread
program_regs_kib = WARPS * 32 * REGS * 4 / 1024  # 4-byte registers
helpers.md("\n".join([
    ("There is no GPU in this run (CPU mode), so only the T4's and the H200's figures appear below. "
     if not helpers.HAS_GPU else "") + "The terms, once each:",
    "",
    ("- A **streaming multiprocessor (SM)** is one of the GPU's identical processors, each with its own "
     "arithmetic units, registers and shared memory; a kernel's work is cut into pieces spread over all "
     f"of them. SMs: {across(lambda s: s['SMs'])}."),
    ("- A **thread** runs the kernel's code on its own data. 32 threads form a **warp**, which executes one "
     "instruction at a time for all 32 together. A Triton **program** (CUDA calls it a *thread block*) is "
     "`num_warps` warps (Triton's default is 4, so 128 threads) working on one block of the data; it runs on "
     "one SM from start to end. Most warps resident on one SM: "
     f"{across(lambda s: s['warps per SM (most resident)'])}. Threads resident on the whole GPU at once, at "
     f"most: {across(lambda s: s['SMs'] * s['warps per SM (most resident)'] * 32)}."),
    ("- **Registers** are each thread's private variables, the fastest storage there is, shared out among "
     "the threads resident on an SM: the more registers a thread needs, the fewer threads fit. Per SM: "
     f"{across(lambda s: s['registers per SM (KiB)'], ' KiB')}."),
    ("- **Shared memory** is a small on-chip memory of each SM that the threads of one program share: a "
     "matmul keeps tiles of its inputs there, several tiles in flight with Triton's `num_stages`. Per SM: "
     f"{across(lambda s: s['shared memory per SM (KiB)'], ' KiB')}."),
    ("- The **L2 cache** sits between all the SMs and device memory: bytes read or written recently come "
     f"from there while they still fit. Its size: {across(lambda s: s['L2 (MiB)'], ' MiB')}."),
    ("- **Device memory** is the GPU's main memory (HBM or GDDR6, above): "
     f"{across(lambda s: s['memory (GiB)'], ' GiB')}. Its **bandwidth** is the rate at which kernels can "
     f"read and write it: {across(lambda s: s['memory bandwidth (GB/s, nominal)'], ' GB/s')} (nominal). "
     "The least time to read one gigabyte is therefore, in GPU time (a bound from the nominal bandwidth): "
     f"{across(lambda s: 1e3 / s['memory bandwidth (GB/s, nominal)'], ' ms')}."),
    ("- **Tensor cores** are units in each SM that multiply small matrices in one instruction (`mma`), fp16 "
     f"in and fp32 accumulated: {across(lambda s: s['fp16 tensor-core TFLOP/s (nominal)'], ' TFLOP/s')} "
     "(nominal). A matmul that does not use them computes with ordinary **FMA** instructions (one fused "
     "multiply-add per thread per instruction), accumulating in fp32: "
     f"{across(lambda s: s['fp32 FMA TFLOP/s (nominal)'], ' TFLOP/s')}. Tensor-core peak over FMA peak: "
     f"{across(lambda s: round(s['fp16 tensor-core TFLOP/s (nominal)'] / s['fp32 FMA TFLOP/s (nominal)']), 'x')}. "
     "Chapters 2 to 4 show which of the two Triton's compiler uses on each GPU."),
    ("- **Occupancy** is, in NVIDIA's definition, the warps resident on an SM over the most it can hold. A "
     "program's warps arrive and leave together, so this series counts it in programs resident per SM, set by "
     f"whichever runs out first: warps, registers or shared memory. A program of {WARPS} warps whose threads need "
     f"{REGS} registers each holds {program_regs_kib:.0f} KiB of registers. Such programs per SM, as the warps "
     f"allow: {across(lambda s: s['warps per SM (most resident)'] // WARPS)}; as the registers allow: "
     f"{across(lambda s: int(s['registers per SM (KiB)'] // program_regs_kib))}."),
    ("- One launch starts a **grid** of programs, as many as the data needs ([chapter 2]"
     "(02_add_kernel.ipynb#Programs,-blocks-and-masks) builds one). A grid of more programs than the SMs can "
     "hold at once runs in **waves**, one batch of programs after another, and a grid of fewer leaves SMs idle."),
]))

# %% [markdown]
# ### Three regimes
#
# Horace He's essay "Making Deep Learning Go Brrrr From First Principles" sorts the time of any GPU program
# into three regimes, and every number in this series falls into one of them:
#
# - **overhead-bound**: the GPU waits for the host. Python, PyTorch's *dispatcher* (the C++ layer that
#   picks, for each call of an op, the kernel that fits its tensors' device and dtype) and the launch itself
#   take longer to issue a kernel than the GPU takes to run it, so the GPU sits idle between kernels. Doing
#   more work per kernel costs (almost) nothing; doing it in more kernels costs a launch each.
# - **memory-bound**: the GPU is busy, but its SMs mostly wait for bytes from device memory. The time grows
#   with the bytes moved, not with the arithmetic.
# - **compute-bound**: the arithmetic units are the limit; the time grows with the floating-point
#   operations (flop).
#
# Which of the last two a kernel is in depends on its **arithmetic intensity**: flop per byte moved
# between device memory and the SMs. A GPU's **ridge point** is its peak flop/s over its bandwidth: below
# it, a kernel cannot use all the arithmetic before the bytes run out (memory-bound); above it, it can
# (compute-bound). A **roofline** plot (chapter 4) draws exactly that line. `helpers.regime(host_ms, gpu_ms,
# flops, bytes)` applies the rule to one call: overhead-bound when the host's time per call exceeds the GPU's
# by more than the series' smallest real effect (5%), otherwise intensity against the ridge point.

# %%
helpers.md(
    f"Ridge points (fp16 tensor-core flop/s over bandwidth): "
    f"{across(lambda s: s['ridge point (flop per byte)'], ' flop per byte')}. Without the tensor cores, "
    f"the FMA peak gives a ridge point of "
    f"{across(lambda s: s['fp32 FMA TFLOP/s (nominal)'] * 1e3 / s['memory bandwidth (GB/s, nominal)'], ' flop per byte')}."
    " Adding two fp16 vectors does 1 flop per 6 bytes (read two numbers, write one); a matrix-vector "
    "product reads each 2-byte weight for one multiply and one add, 1 flop per byte: both far below any "
    "ridge point."
)

# %% [markdown]
# Where the series' experiments are expected to live. These are expectations, not results: each chapter
# measures its own and says whether the expectation held on your GPU.
#
# | chapter: experiment | expected regime | why |
# |---|---|---|
# | 2: vector add | overhead-bound when small, memory-bound when large | 1 flop per 6 bytes; a small vector moves its bytes faster than the host can launch the kernel |
# | 3: RMSNorm (and its un-fused split) | overhead-bound at the decode shape (one row), memory-bound at many rows | a few flop per element read; the split adds a launch and a second read of the data |
# | 4: matmul at the decode shape (one row) | memory-bound on the GPU clock, overhead-bound on the host's | every weight is read for one multiply-add: about 1 flop per byte |
# | 4: matmul at the prefill shape (many rows) | towards compute-bound | each weight read now serves every row, so the intensity grows with the rows; without tensor cores (Triton on a T4) the ridge point is much lower |
# | 5: attention of one new token | overhead-bound in the per-head loop, memory-bound in one fused kernel | the loop launches kernels per head; a fused kernel reads the whole KV cache for a few flop per byte |
# | 6: the all-custom model at batch size 1 | overhead-bound | thousands of launches per token, each kernel tiny |
# | 7: the context sweep | overhead-bound, with a memory-bound part that grows with the context | attention reads a KV cache that grows with every token of the context |
# | 9: the fixes (fused kernels, a CUDA graph) | from overhead-bound towards memory-bound | fewer launches, then one graph launch per token, until the weight reads set the pace |
#
# A **CUDA graph**, in the last row, is a recorded sequence of kernels that the GPU replays from a single
# launch: the host issues one launch where it issued hundreds. The series also uses one as a clock: replaying
# a call recorded into a graph times the GPU's work with the host out of the loop (*GPU time*, chapter 2).
#
# This chapter checks its own decode step below, from the measurements it is about to make.

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
# A speed comparison only means something if every run does the same work. So every generation in this
# series is **greedy** (always the most likely next token, no sampling) and produces exactly the same
# number of new tokens: the harness sets `min_new_tokens == max_new_tokens`, so an early end-of-text
# token cannot shorten a run. The prompt is fixed too (real text with the tokenizer, seeded random ids
# without one). Here is one such generation, untimed, to see that the model runs; where the description
# above says *random weights*, the tokens themselves are meaningless.

# %%
sizes = helpers.SIZES
P, n = sizes.prompt_len, sizes.new_tokens
prompt = helpers.make_prompt(P, tokenizer, model.config.vocab_size)
sample, _ = helpers._generate(model, prompt, n, use_cache=True)  # (new token ids, seconds): untimed here
assert len(sample) == n, "generation must produce a fixed number of tokens"
print(f"prompt: {P} tokens, new tokens per generation: {n}")
if tokenizer is not None:
    print("generated text:", repr(tokenizer.decode(sample)))
else:
    print("generated token ids (no tokenizer):", sample[:16].tolist(), "...")
if "random weights" in description:  # helpers.load_model's description says which weights these are
    print("the model runs; with random weights the tokens themselves are meaningless")

# %% [markdown]
# ## How this series compares two configurations
#
# At batch size 1 the speed depends on the host CPU as much as on the GPU, so the same model on the same
# GPU runs at different speeds from one machine, or one minute, to the next. Timing configuration A
# for a while and then configuration B would mix the difference between A and B with whatever the host
# did in between. `helpers.compare_configs` measures them together instead:
#
# 1. **warm-up**: every configuration generates once, untimed, so that one-off costs (memory allocation,
#    Triton compilation for the first pass over each sequence length) never land in a timed run;
# 2. **rounds**: in each round every configuration generates once, in a shuffled order, synchronised
#    with the GPU before and after, and its time is divided by the original model's time *in the same
#    round*. A slow minute on the host slows both runs of a round alike, and the ratio cancels it. The
#    orders are fixed by a seed (every run sees the same ones) and come in pairs: one round runs an order
#    forwards, the next runs it backwards, so over a pair no configuration sits earlier than another;
# 3. **the A/A floor**: the original model takes part twice, as `original` and `original (again)`. Their
#    ratio should be 1; how far it strays is the noise of this very run;
# 4. **the verdict**: the result is the median of the per-round ratios, with the quartiles (the middle half
#    of the rounds). `helpers.verdict` calls it "slower" or "faster" only when the median lies further from
#    1 than twice the A/A floor's distance from 1 (and at least `helpers.MIN_EFFECT`, 5%), and the middle
#    half of the rounds agree on the direction; otherwise it says **within noise**, and so do we.
#
# Every "N x slower" in tokens/s in this series comes from such a comparison. tokens/s itself is the new
# tokens divided by the whole generation time, the prefill (the forward pass over the prompt) included.
# Right after each generation, in the same round, the same configuration also generates a single token:
# that run is one forward pass over the prompt, the prefill alone. From the pair the harness gets, round
# by round, the time of the prefill and the wall ms per decoded token (the rest of the generation divided
# by the tokens decoded after the first), the series' one time per token.

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
# made of hundreds of small kernels or more, and if launching them is what takes the time, a step over a few
# dozen positions costs little more than a step over one. We measure to find out which story your hardware
# tells.

# %%
positions_cached = P + (n - 1)
positions_uncached = sum(P + i for i in range(n))
work_ratio = positions_uncached / positions_cached
print(f"positions processed with the cache:    {positions_cached:,}")
print(f"positions processed without the cache: {positions_uncached:,}  ({work_ratio:.0f}x as many)")

# %% [markdown]
# First, correctness: without the cache the model must compute the same thing. One more untimed
# generation, and the two token sequences side by side.

# %%
sample_no_kv, _ = helpers._generate(model, prompt, n, use_cache=False)
same = int((sample_no_kv == sample).sum())
print(f"same greedy tokens with and without the cache: {same} of {n}")

# %% [markdown]
# Now the measurement: the model with its cache (`original`, twice) and without it, in
# `helpers.SIZES.rounds` shuffled rounds. Every time in the table is **wall time** of whole generations
# (prefill included), taken in those shuffled rounds: tokens/s is the new tokens over a generation's wall
# time, and the time ratio is a generation's wall time over the original's in the same round.
# `profile=[helpers.ORIGINAL]` also asks for the original's launches and GPU-busy time per decoded token,
# counted after the rounds: we read them in the next section.

# %%
comparison = helpers.compare_configs(model, {"no KV cache": {"use_cache": False}}, tokenizer=tokenizer,
                                     profile=[helpers.ORIGINAL])
tps_kv = comparison.tokens_per_s[helpers.ORIGINAL]
tps_no_kv = comparison.tokens_per_s["no KV cache"]
setting = f"greedy, prompt {P}, {n} new tokens, median of {len(comparison.orders)} shuffled rounds"
helpers.record("baseline.tps_kv", tps_kv, "tokens/s", setting + "; prefill included")
helpers.record("baseline.tps_no_kv", tps_no_kv, "tokens/s", "use_cache=False, " + setting + "; prefill included")
no_kv = comparison.record("no KV cache", "baseline.no_kv_slowdown", f"prompt {P}, {n} new tokens")

helpers.show(comparison.table())
floor, r = comparison.floor, comparison.ratios["no KV cache"]
# how far the very same model strayed from 1: the middle half of the A/A rounds, and the farthest single round
floor_spread = max(abs(floor.low - 1), abs(floor.high - 1))
floor_farthest = max(abs(v - 1) for v in floor.values)
print(f"A/A floor (the original against itself): median {floor.median:.3f}, middle half of the rounds "
      f"{floor.quartiles}, up to {100 * floor_spread:.0f}% from 1")
print(f"the verdict's rule: a median above {1 + no_kv.noise:.3f} or below {1 / (1 + no_kv.noise):.3f} (twice the "
      f"floor median's distance from 1, never under {100 * helpers.MIN_EFFECT:.0f}%), AND the middle half of the "
      "rounds on one side of 1")
# the median to 3 decimals, more where it would print as the verdict's bar itself (0.9518 must not read 0.952)
r_digits = helpers.places_apart(r.median, no_kv.bars, places=3, most=6)
print(f"no KV cache: median {r.median:.{r_digits}f}, middle half of the rounds {r.quartiles}: {no_kv.text}"
      + ("" if no_kv.real else f" ({no_kv.reason})"))

# %%
tps_again = comparison.tokens_per_s[helpers.ORIGINAL_AGAIN]
floor_verdict = comparison.verdict(helpers.ORIGINAL_AGAIN)  # the floor against the 5% minimum alone
text = (
    f"With the cache the model generated **{tps_kv:.1f} tokens/s**, without it **{tps_no_kv:.1f} tokens/s** "
    f"(medians; prefill included); the original's copy, the same model timed in the same rounds, ran at "
    f"{tps_again:.1f} tokens/s, "
    + (f"{abs(100 * (tps_again / tps_kv - 1)):.1f}% {'above' if tps_again > tps_kv else 'below'} the original, "
       "which is how far two medians of identical models fell apart here. "
       if round(100 * (tps_again / tps_kv - 1), 1) else
       "level with the original: two medians of identical models agreed here. ")
    + "Medians of tokens/s set side by side decide nothing; the rounds do. Round by round, a "
    f"generation without the cache took a median **{r.median_text}x** the wall time of one with it (middle half of the "
    f"rounds {r.quartiles}), while the original against itself gave {floor.median_text} (middle half "
    f"{floor.quartiles}): the middle half of the rounds of the very same model reached {100 * floor_spread:.0f}% "
    f"from 1, single rounds up to {100 * floor_farthest:.0f}%. "
    + (f"The A/A pair's own median, {100 * abs(floor.median - 1):.1f}% off 1, stood out beyond the series' "
       f"smallest real effect ({100 * helpers.MIN_EFFECT:.0f}%): the host was noisy in this run (the table "
       "marks the pair as the A/A floor, not as a verdict), and the bar for a real difference rose with it, to "
       f"{100 * no_kv.noise:.0f}%. "
       if floor_verdict.real else
       f"The A/A pair's own median, {100 * abs(floor.median - 1):.1f}% off 1, did not stand out of the "
       f"noise ({floor_verdict.reason}). ")
    + f"Verdict: **{no_kv.text}**"
    + (f", because the median is {no_kv.reason}. " if not no_kv.real and no_kv.reason.startswith("closer") else
       f", because {no_kv.reason}. " if not no_kv.real else ". ")
)
# near the verdict's threshold (the rule helpers.check_answer applies to the exercises): a median just past the
# bar, or just short of it, says so
if no_kv.near_threshold:
    text += (f"The median, {r.median:.{r_digits}f}, lies near {no_kv.threshold_text}: another run may call it the "
             "other way. ")
if not no_kv.real:
    text += (f"So this run cannot tell the two apart, although the uncached run processed {work_ratio:.0f}x as "
             "many positions"
             + (f": even the slow end of the middle half of the rounds, {r.high:.2f}x, is far from the "
                f"{work_ratio:.0f}x that a cost in proportion to the positions would give, so most of a step's "
                "time does not grow with the number of positions it processes. "
                if work_ratio > 2 * max(r.high, 1 + no_kv.noise) else
                "; with this much noise the run says nothing about what the extra positions cost. "))
elif no_kv.ratio > 1:
    text += (f"The uncached run processed {work_ratio:.0f}x as many positions for {r.median:.2f}x the time: "
             + ("far less than in proportion, so most of each step's time does not grow with the sequence "
                "length. " if r.median < work_ratio / 2 else
                "roughly in proportion, so here the arithmetic sets the pace. "))
else:
    text += ("The cache did not pay for itself in this run. A likely explanation, which this run does not measure: "
             "with a sequence this short, managing the cache may cost as much as the positions it saves, or more. ")
bandwidth_x = helpers.NOMINAL_GB_S["h200"] / helpers.NOMINAL_GB_S["t4"]
tensor_x = helpers.NOMINAL_TFLOPS["h200"][0] / helpers.NOMINAL_TFLOPS["t4"][0]
text += (f"{same} of the {n} greedy tokens agree between the two paths (they add numbers in a different order, "
         "so in low precision an occasional divergence would not be a bug). For comparison, the blog reports "
         "that on its T4 turning the cache off cut tokens/s by about half or more, a time ratio of 2 or more; "
         "its baseline table itself is missing from the text."
         + (" The two GPUs need not agree: a T4 has about "
            f"{bandwidth_x:.0f}x less memory bandwidth and {tensor_x:.0f}x less tensor-core compute than an H200, so "
            "the GPU's own work fills a far larger share of each step there, and that share is what grows with the "
            f"{work_ratio:.0f}x positions; where the host paces each step and the GPU mostly waits (the next "
            "section measures how idle it is on yours), the extra positions hardly show." if helpers.HAS_GPU else ""))
helpers.md(text)

# %% [markdown]
# ## Where does the time of one token go?
#
# The blog stops at tokens per second. We go one step further, because the rest of the series only makes
# sense once you see this. Everything below comes from the comparison above, so nothing is timed twice:
#
# - **wall ms per decoded token**: in each round, the original's generation of $n$ tokens minus its
#   one-token generation right after it, divided by the $n - 1$ tokens decoded after the first; the median
#   over the rounds. The prefill drops out. This is the series' one time per token;
# - **prefill**: the one-token generations themselves, one forward pass over the prompt each (median);
# - **launches per token**: how many GPU kernels the model starts for one decoded token, counted by
#   PyTorch's profiler on a short generation after the rounds (a 1-token generation subtracted again);
# - **GPU-busy ms per token**: how long those kernels actually ran on the GPU, added up, from the same
#   profile.
#
# If the GPU-busy time is much smaller than the wall time, the GPU sits idle most of the time, waiting
# for the CPU to launch the next kernel. That is what we expect at batch size 1: each layer is dozens of
# kernels, every launch costs microseconds to tens of microseconds of host work (chapter 2 measures it),
# and most kernels move at most a few megabytes, which a modern GPU does in a few microseconds. (The
# exception is `lm_head`, which reads its whole 151,936 x 1,024 weight, about 311 MB in fp16, once per
# token.)

# %%
prof = comparison.profile(helpers.ORIGINAL)  # launches and GPU-busy from the profiler, wall from the rounds
decode = comparison.decode_ms(helpers.ORIGINAL)  # per-round wall ms per decoded token
prefill_ms = comparison.prefill_ms(helpers.ORIGINAL)
prefill_rounds = helpers.Ratio.of([s * 1e3 for s in comparison.first_seconds[helpers.ORIGINAL]])  # ms, per round
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
helpers.record("baseline.prefill_ms", prefill_ms, "ms",
               f"wall ms of a one-token generation: one forward pass over {P} prompt tokens; median of "
               f"{rounds} shuffled rounds", spread=prefill_rounds)

print(f"from the {rounds} rounds above (wall clock of the host):")
print(f"  wall ms per decoded token:     {prof.wall_ms_per_token:.3f} ms "
      f"(middle half of the rounds {decode.low:.3f}-{decode.high:.3f})")
print(f"  prefill ({P}-token prompt), wall: {prefill_ms:.3f} ms "
      f"(middle half of the rounds {prefill_rounds.low:.3f}-{prefill_rounds.high:.3f})")
print("from the profile after the rounds (a short generation under torch.profiler):")
launches_text = (helpers.fmt(None) if prof.launches_per_token is None else f"{prof.launches_per_token:,.0f} launches")
print(f"  kernel launches per token:     {launches_text}")
print(f"  GPU-busy ms per token:         {helpers.fmt(prof.gpu_busy_ms_per_token, 3, 'ms')}")
if not isolated:
    print("note:", prof.note)

# %%
wall = prof.wall_ms_per_token
if prof.gpu_busy_ms_per_token is None:
    text = (
        f"Each decoded token took **{wall:.1f} wall ms** here (CPU mode: PyTorch on the CPU, no Triton kernel in "
        "the original). Without a GPU there are no GPU kernels to count and no GPU-busy time to measure, so the "
        "split between work and waiting is left to a GPU run. On the GPU this cell shows the number that drives "
        "the rest of the series: how many kernels one token launches."
    )
else:
    busy, launches = prof.gpu_busy_ms_per_token, prof.launches_per_token
    idle = prof.gpu_idle_fraction  # 1 - busy / wall, floored at 0 (busy from the profile, wall from the rounds)
    text = (
        f"Each decoded token took **{wall:.2f} wall ms**, during which the GPU was busy for "
        f"{'only ' if idle > 0.5 else ''}**{busy:.2f} GPU ms**: it sat idle **{100 * idle:.0f}%** of the time. "
        f"The model launched "
        f"**{launches:,.0f} kernels** per token: one every {1000 * wall / launches:.1f} µs of wall time, while "
        f"the average kernel ran for {1000 * busy / launches:.1f} µs of GPU time. "
        + ("So the token's time is set mostly by how fast Python and PyTorch can launch kernels, not by the "
           "GPU's arithmetic or memory: launches we add or remove should show up in the wall time, at a price "
           "per launch that later chapters measure, alone and inside `generate()`, where it need not be the "
           "same."
           if idle > 0.5 else
           "So on this machine the GPU is busy most of the time: the kernels themselves, not launching "
           "them, set the pace, and extra bytes should cost more than extra launches.")
    )
# tokens/s and wall ms per decoded token are two views of the same rounds, not two measurements:
generation_ms = 1000 * n / tps_kv  # the median n-token generation, prefill included
rebuilt_ms = prefill_ms + (n - 1) * wall  # the same generation, rebuilt from its two parts
rebuilt_off = round(100 * (rebuilt_ms / generation_ms - 1), 1) + 0.0  # + 0.0: never "-0.0"
text += (
    f" The prefill, one pass over all {P} prompt tokens, took {prefill_ms:.1f} wall ms."
    + (f" Round by round, the wall ms per decoded token ranged over {decode.low:.2f}-{decode.high:.2f} (middle "
       f"half of the rounds), {100 * (decode.high / decode.low - 1):.0f}% from one end to the other: the host's "
       "speed varies between rounds, which is why every comparison in this series is read round by round, "
       "against the original of the same round." if isolated and decode.low > 0 else "")
    + "\n\n"
    f"**One time per token.** The {tps_kv:.1f} tokens/s of the comparison above is not a second time per "
    f"token: 1000 / {tps_kv:.1f} = {1000 / tps_kv:.2f} wall ms is the median {n}-token generation, "
    f"{generation_ms:.1f} wall ms, spread over its {n} tokens, the prefill included. Rebuilt from the two parts "
    f"above, {prefill_ms:.1f} wall ms of prefill + {n - 1} x {wall:.2f} wall ms of decoding = {rebuilt_ms:.1f} "
    f"wall ms, "
    f"{rebuilt_off:+.1f}% from that median (a median of sums is not the sum of "
    f"medians, so the two need not match exactly). Leaving the prefill out, 1000 / {wall:.2f} = "
    f"{1000 / wall:.1f} decoded tokens/s: the rate the weight-read floor below is set against."
)
helpers.md(text)

# %% [markdown]
# ### The weight-read floor
#
# To produce one token, every weight of the model has to be read from GPU memory at least once: the
# matrix multiplications at batch size 1 use each weight exactly once. So the bytes of the weights divided
# by the GPU's memory bandwidth is a hard floor on the time per token. An H200 reads about 4.8 TB/s from
# its HBM, a T4 about 320 GB/s from its GDDR6 (the vendors' figures, `helpers.NOMINAL_GB_S`). `helpers.bandwidth` compares that floor with the measured decode rate: we give it the
# decoded tokens/s from above, 1000 / (wall ms per decoded token), prefill excluded,
# so that the floor (per decoded token) is set against the time of a decoded token. The *floor fraction*
# is the share of the hardware's best that the run achieved.

# %%
decode_tps = 1000 / prof.wall_ms_per_token  # decoded tokens per second, prefill excluded
bw = helpers.bandwidth(model, decode_tps)
helpers.record("baseline.floor_fraction", bw["floor_fraction"], "fraction",
               "weight bytes x decode rate (1000 / wall ms per decoded token) / nominal bandwidth "
               "(= floor time / wall ms per decoded token)")

print(f"weights read per token:    {bw['model_bytes'] / 1e6:,.1f} MB")
print(f"wall ms per decoded token: {prof.wall_ms_per_token:.2f} ms (decode rate {decode_tps:.1f} tokens/s)")
print(f"achieved weight bandwidth: {bw['achieved_gb_s']:.2f} GB/s")
if bw["nominal_gb_s"]:
    print(f"nominal memory bandwidth:  {bw['nominal_gb_s']:.0f} GB/s")
    print(f"floor per token:           {bw['floor_ms_per_token']:.3f} GPU ms (weight bytes / nominal bandwidth)")
    print(f"floor fraction:            {100 * bw['floor_fraction']:.2f}% of the hardware's best")
else:
    print("floor:", bw["note"])

# %%
wall = prof.wall_ms_per_token
busy_vs_floor = ""  # the GPU-busy time against the floor: where the kernels themselves stand
if bw["floor_ms_per_token"] and prof.gpu_busy_ms_per_token:
    busy, floor_ms = prof.gpu_busy_ms_per_token, bw["floor_ms_per_token"]
    busy_vs_floor = (
        f"Even the GPU-busy time alone, {busy:.2f} GPU ms, is {busy / floor_ms:.1f} times the floor"
        + (f": {prof.launches_per_token:,.0f} kernels of {1000 * busy / prof.launches_per_token:.1f} µs on "
           "average, each paying a fixed cost to start and to spread over the SMs whatever it moves (chapter 2 "
           "measures it), so the kernels themselves stay well short of the memory's full rate. "
           if helpers.verdict(busy / floor_ms).real else
           ": the kernels themselves run at the memory's rate, and the rest of the time is waiting. ")
    )
if bw["floor_fraction"] is None:
    helpers.md(
        f"Reading {bw['model_bytes'] / 1e6:.1f} MB of weights per decoded token at {decode_tps:.1f} decoded "
        f"tokens/s is an effective {bw['achieved_gb_s']:.2f} GB/s. There is no GPU here, hence no memory "
        "bandwidth to set a floor: on a GPU this cell shows how far the model runs from it."
    )
else:
    helpers.md(
        f"The floor is **{bw['floor_ms_per_token']:.2f} GPU ms** per token (weight bytes / nominal bandwidth)"
        f"; a decoded token took "
        f"**{wall:.1f} wall ms**, {wall / bw['floor_ms_per_token']:.0f} times the floor, reading "
        f"its weights at an effective {bw['achieved_gb_s']:.0f} GB/s out of a nominal "
        f"{bw['nominal_gb_s']:.0f} GB/s ({100 * bw['floor_fraction']:.1f}%). "
        "The memory system is far from the limit: the time per token is spent elsewhere, and the profile "
        "above says where. " + busy_vs_floor + "That gap is the room in which this series makes the model slower."
        if bw["floor_fraction"] < 0.5 else
        f"The floor is **{bw['floor_ms_per_token']:.2f} GPU ms** per token (weight bytes / nominal bandwidth)"
        f" and a decoded token took "
        f"**{wall:.2f} wall ms**: the model reads its weights at {100 * bw['floor_fraction']:.0f}% of the "
        "nominal bandwidth, so on this machine memory traffic, not launching, is what sets the pace."
    )

# %% [markdown]
# ### Which regime is a decode step in?
#
# Now [the three regimes](#Three-regimes) can be told apart with this chapter's own numbers. One decoded
# token multiplies every weight once and adds the product once: about 2 flop per parameter, while it
# reads every weight once (2 bytes each in fp16). `helpers.regime` takes the step's two clocks and those
# flop and bytes. The host's clock is the wall ms per decoded token; it can never fall below the GPU-busy
# ms, because the host waits for the GPU whenever the GPU is the slower of the two. So `helpers.regime` only
# reads the wall time as the host's own time when it lies beyond the GPU-busy time by more than the
# series' smallest real effect (`helpers.verdict`): then the GPU waited for the host. With the host left
# out, the kernels' regime is read from their work alone: below the GPU's ridge point the bytes, not the
# arithmetic, bound them. That names the limit they approach, not how close they come: the floor above says
# that, and how far the GPU-busy time lies above it.

# %%
step_flops = 2 * census["parameters"]  # a multiply and an add per weight (attention at this context: negligible)
step_bytes = census["bytes"]  # every weight read once
step_regime, why = helpers.regime(prof.wall_ms_per_token, prof.gpu_busy_ms_per_token, step_flops, step_bytes,
                                  per="decoded token", clocks=helpers.TOKEN_CLOCKS)
print(f"one decode step: {step_flops / 1e9:.3g} GFLOP over {step_bytes / 1e6:,.1f} MB of weights, "
      f"{step_flops / step_bytes:.2f} flop per byte")
print(f"regime: {step_regime} ({why})")
if prof.gpu_busy_ms_per_token is not None:
    print("  wall time = wall ms per decoded token (the rounds), the host's time to issue a token; GPU-busy time = "
          "GPU-busy ms per decoded token (the profile)")
    kernels_regime, kernels_why = helpers.regime(None, prof.gpu_busy_ms_per_token, step_flops, step_bytes,
                                                 per="decoded token")
    print(f"the step's kernels alone, the host left out: {kernels_regime} ({kernels_why})")

# %%
if prof.gpu_busy_ms_per_token is None:
    helpers.md(f"In CPU mode the regime stays **{step_regime}**: {why}. A GPU run puts a word here.")
else:
    helpers.md(
        f"This decode step is **{step_regime}** on this GPU ({why}), and "
        f"the GPU was idle {100 * prof.gpu_idle_fraction:.0f}% of the step. Were the host's time to vanish (chapter 9 "
        "goes a long way towards that with a CUDA graph), the kernels alone would be "
        f"**{kernels_regime}**: {kernels_why}. "
        "A decode step at batch size 1 can never be better than memory-bound, whatever the kernels: each "
        "weight serves one multiply-add, and that is the weight-read floor above."
    )

# %% [markdown]
# ### One decode step on a time axis
#
# The numbers above are sums over a token. The profiler can also show one decode step as a picture: every
# launch call on the host (top lane, orange) and every kernel on the GPU (bottom lane, blue) on one time
# axis, traced by `torch.profiler` with `helpers.step_timeline`. The gaps in the bottom lane are the GPU
# waiting for the host. Tracing every host call adds bookkeeping, so a traced step can run slower than an
# untraced one can: read the picture's shape and its counts, not its length.

# %%
if helpers.HAS_GPU:
    timeline = helpers.step_timeline(model, prompt)  # one eager decode step after the prompt, as generate() makes it
    fig = helpers.plot_timelines({"original": timeline}, name="timeline_original")
    plt.show()
    seen = helpers.timeline_summary(timeline)
    span_ms, busy_ms = seen[helpers.SPAN_US] / 1e3, seen[helpers.BUSY_US] / 1e3  # both on the profiler's clock
    fewer = prof.launches_per_token - seen["GPU kernels"]  # the profile counted inside generate()
    helpers.md(
        f"Traced, the step issued **{seen['host launches']:,} host launches** and ran **{seen['GPU kernels']:,} GPU "
        f"kernels**; the profile above counted {prof.launches_per_token:,.0f} kernels per decoded token"
        + (f", {fewer:,.0f} more: it counted inside `generate()`, which launches kernels of its own per token "
           "(preparing the next step's inputs, picking and appending the token, checking whether to stop), while the "
           "traced step is the model's forward pass and an argmax alone"
           if fewer >= 1 else "")
        + f". Its **traced span** (profiler clock), from its first event to its last, was {span_ms:.2f} ms, against "
        f"{prof.wall_ms_per_token:.2f} wall ms per decoded token untraced ({span_ms / prof.wall_ms_per_token:.1f}x "
        f"the untraced time). The GPU was busy for {busy_ms:.2f} ms of the span (profiler "
        f"clock, the union of its kernels' intervals) and idle **{100 * seen['GPU idle fraction']:.0f}%** of it"
        + (": in the picture, the blue lane is mostly gaps, each one a wait for the host's next launch."
           if seen["GPU idle fraction"] > 0.5 else
           ": in the picture, the blue lane is mostly filled, and the host stays ahead of the GPU.")
    )
else:
    helpers.md("The timeline needs a GPU: in CPU mode there are no GPU kernels to trace.")

# %% [markdown]
# ## Your numbers beside the blog's
#
# `helpers.compare` lines up your run, the committed H200 run of this series, and the blog's T4 figures,
# with the verdict your run recorded for each ratio. The blog's baseline table did not survive in its
# text, so its column is empty here; its later chapters quote originals between 22.6 and 23.7 tokens/s
# on a T4. The clocks: the tokens/s rows and the time ratio without the KV cache over with it are wall
# time of whole generations (prefill included) in the shuffled rounds above; the wall ms per decoded token
# and the prefill come from the same rounds; the GPU-busy ms and the kernel count from the profile after
# them.

# %%
beside = helpers.compare("baseline")
recorded = helpers.results().set_index("id")["verdict"]  # "within noise", "1.80x slower", ... ("" for non-ratios)
beside["verdict (yours)"] = beside["id"].map(recorded).fillna("")
helpers.show(beside)

# %% [markdown]
# ## Takeaway
#
# - The model is a stack of identical layers: 4 RMSNorms, 7 linear layers and 1 attention block each,
#   plus a final norm and `lm_head`. Those are the modules the next chapters replace.
# - tokens/s is only comparable with greedy decoding, a fixed prompt and a fixed number of new tokens,
#   after a warm-up; and two configurations only when they are measured in the same run, in interleaved
#   rounds, against an A/A floor (the original against itself) that says how large the noise is.
# - tokens/s includes the prefill; the time per token is the wall ms per decoded token, taken from the
#   same rounds (each generation minus the one-token generation after it), prefill excluded.
# - At batch size 1, a token is a long chain of small kernel launches (the profile above counted them).
#   Compare launches, GPU-busy time and wall time before reading anything into tokens/s: they say whether
#   a change will cost through extra bytes or through extra launches.
# - Every time falls into one of [three regimes](#Three-regimes): overhead-bound (the GPU waits for the
#   host), memory-bound (bytes set the pace) or compute-bound (arithmetic does). A decode step at batch
#   size 1 is at best memory-bound, and the regime above says where this run's step sits.

# %% [markdown]
# ## Try it yourself
#
# Three small changes, one regime each. Make your guess first: set `answer` to `"faster"`, `"slower"` or
# `"same"` and run the cell; with `answer = None` it only shows the measurement. Each change is timed
# against the unchanged call in shuffled rounds, with the unchanged call also timed against itself (its
# A/A floor), and judged by the series' one rule (`helpers.verdict`). In CPU mode the calls are PyTorch's
# own CPU operations, timed by the wall clock: the CPU has regimes of its own, so expect other answers
# there.

# %%
import torch

DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES
CPU_CLOCK = "wall time of PyTorch on the CPU (CPU mode)"  # no Triton kernel here, so no interpreter


# %% [markdown]
# **1. Half the work, the same launch.** Add two vectors of `SIZES.add_n` elements, then only their first
# halves, and time each call on the **host clock**, calls back to back. Half the bytes, half the arithmetic,
# but still one launch, whose host price is microseconds to tens of microseconds (chapter 2 measures it on
# yours). Which regime that puts the call in depends on the GPU, and the cell below gives the other side:
# how long the bytes of this add take at each GPU's nominal bandwidth.
#
# - Where the bytes take far less than a launch, as on an H200 (whose L2 cache even holds these vectors),
#   the GPU is done long before the host issues the next call: the call is **overhead-bound**, and you
#   should expect **the same** time per call for half the work, and at least not a faster one.
# - Where the bytes take longer than a launch, as on a T4 (these vectors outgrow its 4 MiB L2), the host
#   waits for the GPU at every call: expect it **faster**, towards half the time.
#
# On an overhead-bound GPU the GPU's share of the ratio is 1, and the measured one can still land near the
# series' threshold (5% at least), or past it: single host readings of one call move by several percent, on
# some hosts by tens of percent, from one loop to the next (chapter 2 shows how far), so a few percent either
# way can come from host work that differs between the two calls, not from the GPU's work; the A/A floor says
# whether it is noise. That is why this exercise runs twice `SIZES.rounds_kernel` shuffled rounds, an even
# number, so that every order runs as often forwards as backwards, and why the printout gives the A/A floor
# and the quartiles, and says when a result lies near the threshold.
#
# One more thing sets this exercise apart: it times the host *after* this chapter has profiled. A profile
# leaves NVIDIA's profiling interface (CUPTI) attached to the process, and it adds host time to every later
# launch, so the helpers refuse a host-clock timing once a process has profiled, and the series times first
# and profiles after. Here both calls are one launch each and pay that extra alike, so the exercise asks for it
# (`after_profile=True`), and on a GPU its clock label says so. An extra paid alike still pulls the ratio
# towards 1, the answer an overhead-bound GPU predicts: here a "same" is weaker evidence than it looks, and a
# "faster" stronger.

# %%
add_bytes = 3 * SIZES.add_n * 2  # read x and y, write the sum, 2 bytes per fp16 number (the GPUs' dtype)
helpers.md(f"This add moves {add_bytes / 1e6:.3g} MB ({SIZES.add_n:,} elements, in fp16). At nominal bandwidth "
           "that takes, in GPU time (a bound, not a measurement), "
           f"{across(lambda s: add_bytes / (s['memory bandwidth (GB/s, nominal)'] * 1e9) * 1e6, ' µs')}; half the "
           "vectors, half of that. The L2 caches hold "
           f"{across(lambda s: s['L2 (MiB)'], ' MiB')}.")

# %%
x, y = (torch.randn(SIZES.add_n, device=DEVICE, dtype=DTYPE) for _ in range(2))
x_half, y_half = x[:SIZES.add_n // 2], y[:SIZES.add_n // 2]  # views, sliced once: slicing costs host time too

answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"half the elements": lambda: x_half + y_half}, reference=lambda: x + y, clock="host",
                            rounds=2 * SIZES.rounds_kernel,  # even: each order as often forwards as backwards
                            after_profile=True)  # this chapter has profiled: both calls pay CUPTI's extra alike
measured = helpers.check_answer(answer, cmp.ratios["half the elements"], cmp.floor, change="half the elements",
                                clock=cmp.clock if helpers.HAS_GPU else CPU_CLOCK)

# %% [markdown]
# How to read your printout on an overhead-bound GPU: "faster" would mean the bytes showed through after
# all; anything else says that halving the work did not make the call faster, the overhead-bound
# signature. The words are the series' one rule (`helpers.verdict`): "slower" or "faster" only where the
# median lies more than 5% from 1 and beyond twice the A/A floor's distance from 1, with the middle half of
# the rounds on that side of 1; anything else is "within noise", which here means "the same", even where
# the quartiles lie clear of the floor. Only a "slower" says the half call cost the host more per call.
# Where the GPU's work is far shorter than either call, that extra is host work, somewhere in PyTorch's
# path for these two calls; this exercise does not measure where. Read such a "slower" as "not faster".
# The cell below gives your run's two times per call.

# %%
half_r, half_v = cmp.ratios["half the elements"], cmp.verdict("half the elements")
# the median to 3 decimals, more where it would print as the verdict's bar itself (1.045 must not read 1.05)
digits = helpers.places_apart(half_r.median, half_v.bars, places=3, most=6)
helpers.md(f"By {cmp.clock if helpers.HAS_GPU else CPU_CLOCK}, medians over {cmp.rounds} rounds: the whole add "
           f"took {1e3 * cmp.ms[helpers.REFERENCE]:.2f} µs per call and the half add "
           f"{1e3 * cmp.ms['half the elements']:.2f} µs. Round by round the half add took {half_r.median:.{digits}f}x "
           f"the whole one's time (quartiles {half_r.quartiles}): **{half_v.text}** by the series' rule"
           + ("." if half_v.real else f" ({half_v.reason})."))

# %% [markdown]
# **2. Memory-bound: half the bytes, on the GPU's clock.** The same change on the largest vector of
# chapter 2's sweep, `max(SIZES.add_sweep)` elements (at full size far larger than any L2 cache), timed on
# the **GPU clock** (`helpers.compare_calls`: CUDA-graph replay, the host out of the loop). An add does 1
# flop per 6 bytes, far below any ridge point, so the bytes set its time. Expect it faster, by how much is
# the question: a kernel also pays a small fixed cost to start, whatever it moves.

# %%
big = max(SIZES.add_sweep)
a, b, out = (torch.randn(big, device=DEVICE, dtype=DTYPE) for _ in range(3))
a_half, b_half, out_half = a[:big // 2], b[:big // 2], out[:big // 2]

answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"half the elements": lambda: torch.add(a_half, b_half, out=out_half)},
                            reference=lambda: torch.add(a, b, out=out))
measured = helpers.check_answer(answer, cmp.ratios["half the elements"], cmp.floor, change="half the elements",
                                clock=cmp.clock if helpers.HAS_GPU else CPU_CLOCK)

# %% [markdown]
# **3. Compute-bound: twice the rows of a square matmul.** Multiply an $n \times n$ matrix by an $n \times n$
# weight, with $n$ the MLP's width (`SIZES.matmul_shape[2]`), then a matrix of twice the rows by the same
# weight, on the GPU clock. A square matmul does about $2n^3$ flop on $3n^2$ numbers moved, an intensity
# that grows with $n$ and at the full-size $n$ lies well above the ridge point of a GPU with tensor cores.
# Doubling the rows doubles the flop, while the numbers moved grow from $3n^2$ to $5n^2$ (the weight is
# read once either way). Expect it slower. Then read the measured ratio: nearer 2 says the flop set the
# time (compute-bound), nearer 5/3 says the bytes did (memory-bound). At the decode shape, one row, the same
# weight serves a single row, and chapter 4 finds the other regime.

# %%
n = SIZES.matmul_shape[2]
w = torch.randn(n, n, device=DEVICE, dtype=DTYPE) / n**0.5
rows, rows2 = (torch.randn(k, n, device=DEVICE, dtype=DTYPE) for k in (n, 2 * n))

answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"twice the rows": lambda: rows2 @ w.T}, reference=lambda: rows @ w.T)
measured = helpers.check_answer(answer, cmp.ratios["twice the rows"], cmp.floor, change="twice the rows",
                                clock=cmp.clock if helpers.HAS_GPU else CPU_CLOCK)

# %% [markdown]
# Next, in chapter 2, we write our first Triton kernel and time it against PyTorch's own.
