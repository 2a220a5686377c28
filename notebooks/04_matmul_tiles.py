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
# # Chapter 4: A tiled matmul, and the model's projections
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/04_matmul_tiles.ipynb)
#
# In this chapter you will learn:
# - how a matrix multiplication is cut into output *tiles*, one program each, and what the *K loop* and the
#   fp32 *accumulator* inside each program do;
# - why, with a single row (decoding one token), the time of a tiled matmul follows the number of steps of its K
#   loop and the number of programs in its grid, not its arithmetic or its bytes;
# - why a kernel timed on its own can cost a third of what it costs inside the model: the cache that holds the
#   weight between repeated calls, and the memory the model reads it from.
#
# ## What you will see
#
# Our matmul is correct and slower than PyTorch's (cuBLAS) everywhere. On the committed H200 run, at one row,
# $(M, K, N) = (1, 1024, 3072)$ as in the MLP's up projection, it took 11.08 µs of GPU time against cuBLAS's
# 3.728 µs: 2.97x slower. At that shape the tile decides the time, and it decides it through the K loop: on the
# committed H200 run the one tile that walks $K$ in 16 steps was the fastest of nine (8.940 µs), the one that
# walks it in 64 steps the slowest (16.30 µs), and the seven tiles with 32 steps lay between.
#
# In the model, the 112 attention projections on our matmul made each generation 1.30x slower on the committed
# H200 run (quartiles 1.26-1.40, A/A floor 0.971), close to the blog's 23 to 17 tokens/s. The GPU-busy time per
# decoded token grew from 3.412 to 5.731 ms on the committed H200 run, about 21 µs per projection, nearly three
# times the extra that the kernel costs on its own (11.08 minus 3.728, about 7.4 µs). The two agree once you ask
# where the weight comes from: timed on its own, the same 6.3 MB weight is read over and over and stays in the
# H200's 60 MiB L2 cache; in the model, each projection reads a different weight from main memory (HBM), and
# every step of the K loop waits longer for it. Replaying the model's own attention weights both ways bears this
# out: on the committed H200 run our extra over cuBLAS was 6.868 µs per projection warm, 22.20 µs cold. The
# wall time grew more still, about 1.5 times the host's and the GPU's extra prices together ("What the model
# shows").
#
# ## The blog's claim (T4)
#
# The blog wrote a tiled matmul, each program computing one 64 x 64 tile of the output and walking the shared
# dimension $K$ in blocks of 32. It matched PyTorch's output with a maximum fp16 error of 0.03125. At a
# "model-shaped input", shape not given, PyTorch took 0.106 ms and the Triton kernel 0.229 ms (2.16x). Sweeping
# `BLOCK_M` on a decode-shaped workload with one output row, it found that the tile mattered more than expected
# (the post's table is missing). In the model, the 112 attention projections on its matmul took its T4 from 23
# to 17 tokens/s; adding the 84 MLP projections made it 1.41x slower than the original; all 197 projections
# (`lm_head` included) together with chapter 3's two-pass RMSNorm took it from 23.67 to 17.84 tokens/s (1.33x).
# The post does not say how it timed.
#
# ## The idea: tiles and the K loop
#
# A linear layer computes $C = A B$: $A$ is the input, $M$ rows (one per token) of $K$ numbers; $B$ is the
# weight, $K \times N$; each output is a dot product of length $K$, $C_{mn} = \sum_k A_{mk} B_{kn}$. The output
# is cut into tiles of `BLOCK_M` x `BLOCK_N`, one **program** per tile. A program needs a strip of `BLOCK_M` rows
# of $A$ and `BLOCK_N` columns of $B$, both $K$ long, too much to hold at once, so it walks along $K$ in chunks of
# `BLOCK_K`, the **K loop**:
#
# 1. load a `BLOCK_M x BLOCK_K` block of $A$ and a `BLOCK_K x BLOCK_N` block of $B$;
# 2. multiply them with `tl.dot` and add the product to the **accumulator**, a `BLOCK_M x BLOCK_N` tile kept in
#    fp32 in registers;
# 3. move on by `BLOCK_K`, until $K$ is used up; then cast the accumulator to fp16 and write the tile once.
#
# With many rows, bigger tiles mean more reuse: each element of $A$ a program loads serves `BLOCK_N` outputs,
# each element of $B$ serves `BLOCK_M`. **With one row** (decoding, $M = 1$) there is nothing to reuse. The
# weight, $K \times N$ numbers of 2 bytes, is almost all the bytes, each used for one multiply-add: about one
# flop per byte, so the call can at best be memory-bound. The grid is `cdiv(N, BLOCK_N)` programs, a few dozen to
# a couple of hundred, few enough that all of them fit on an H200's 132 streaming multiprocessors (SMs) at once,
# so the call lasts as long as one program. One program does its `cdiv(K, BLOCK_K)` steps **one after another**, and each step waits
# for its block of the weight to arrive from memory. So the prediction for one row:
#
# $$t \approx \text{K steps} \times \text{(one step: a trip to memory and back, plus the multiply)} + \text{fixed cost}$$
#
# Fewer, larger steps should be faster, up to the point where one step's load grows large enough to take longer
# itself; and fewer programs mean fewer SMs pulling the weight, each pulling more per step. Where the weight sits
# sets the length of a trip: the L2 cache (on-chip, tens of MB) answers faster than HBM, the GPU's main memory.

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
import inspect

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import display
from matplotlib.colors import LogNorm

import helpers  # first: in CPU mode it sets TRITON_INTERPRET=1, which must happen before Triton loads
import slower_kernels
import triton

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES
E = torch.tensor([], dtype=DTYPE).element_size()  # bytes per element
CLOCK = "GPU" if helpers.HAS_GPU else "interpreter"  # the clock of every kernel ratio below
TILES, DEFAULT = slower_kernels.TILE_CONFIGS, slower_kernels.DEFAULT_TILE  # the project's one list; the blog's tile
REF = helpers.REFERENCE  # the reference call of a compare_calls: PyTorch's, here
NAN = float("nan")  # a cell with no value in this mode: shown as "-"
model_shape, decode_shape = SIZES.matmul_shape, SIZES.matmul_decode_shape  # (M, K, N): x[M, K] @ W[N, K]^T


# %% [markdown]
# ## The kernel
#
# The kernel, then its launcher. The launcher checks its inputs, allocates the output and launches a grid of
# `cdiv(M, BLOCK_M) x cdiv(N, BLOCK_N)` programs; masks make rows, columns and the last K chunk that fall outside
# the matrices load zeros. The model stores a weight as $N \times K$ (`nn.Linear`'s layout), so the launcher
# reads $B$ through its strides and gets `weight.t()` as a view, never a copy. `num_warps` gives each program its
# warps (4 warps of 32 threads for the default tile); `num_stages = 2` lets the K loop copy the next chunk into
# shared memory while it multiplies the current one (on sm_80 and newer; the interpreter ignores both).

# %%
matmul_src = inspect.getmodule(slower_kernels.matmul)
display({"text/plain": inspect.getsource(matmul_src.matmul_kernel.fn) + "\n\n"
                       + inspect.getsource(slower_kernels.matmul)}, raw=True)


def grid_of(tile, shape):
    """(programs, K steps) of one launch: a program per BLOCK_M x BLOCK_N output tile, each walking K in BLOCK_K
    chunks, one after another."""
    M, K, N = shape
    return triton.cdiv(M, tile.block_m) * triton.cdiv(N, tile.block_n), triton.cdiv(K, tile.block_k)


def work(shape):
    """(flops, minimum bytes) of x[M, K] @ W[N, K]^T: 2MNK flops; x and W read once, the [M, N] output written
    once. At M = 1 the weight, N x K, is almost all of it: about one flop per byte."""
    M, K, N = shape
    return 2 * M * N * K, (M * K + N * K + M * N) * E


# %% [markdown]
# ## Is it correct?
#
# Fresh random inputs and weights, never ones, at this mode's two shapes and at three odd ones, where no size is
# a multiple of any block and every mask has work to do. Every tile of the list is checked against the same
# product in float64, with a tolerance relative to the largest output (`helpers.TOLERANCE["kernel"]`, per
# dtype): both sides accumulate in fp32 or better, but fp16 keeps about three significant digits and rounds the
# output once. The recorded error (`matmul.max_err`, the blog's measure, in the table at the end) is against
# PyTorch's own matmul in the same dtype.

# %%
def make_operands(shape, seed=0):
    """Fresh random input x [M, K] and weight w [N, K], stored as nn.Linear stores it."""
    M, K, N = shape
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, K, generator=g).to(DEVICE, DTYPE), torch.randn(N, K, generator=g).to(DEVICE, DTYPE)


def reference(x, w):
    """x @ w.T in float64: exact products, sums rounded far below fp16's step."""
    return x.double() @ w.double().t()


ODD = [(5, 123, 123), (3, 77, 301), (1, 200, 129)]  # ragged in M, K and N
checks = []
for seed, shape in enumerate([model_shape, decode_shape, *ODD]):
    x, w = make_operands(shape, seed)
    expected = reference(x, w)
    errors = {t: (slower_kernels.matmul(x, w.t(), **t.kwargs()).double() - expected).abs().max().item()
              for t in TILES.values()}
    worst = max(errors, key=errors.get)
    tol = helpers.TOLERANCE["kernel"][DTYPE] * expected.abs().max().item()
    checks.append({"M x K x N": " x ".join(map(str, shape)), "max |error|": errors[worst], "worst tile": worst.name,
                   "tolerance": tol, "check": "PASS" if errors[worst] <= tol else "FAIL"})
helpers.show(pd.DataFrame(checks).set_index("M x K x N"))
assert all(c["check"] == "PASS" for c in checks), "a tile is outside the tolerance"
x, w = make_operands(model_shape, seed=0)
max_err = (slower_kernels.matmul(x, w.t()).double() - (x @ w.t()).double()).abs().max().item()
helpers.record("matmul.max_err", max_err, "abs", f"max |Triton - torch|, {model_shape}, {str(DTYPE)[6:]}")

# %% [markdown]
# On the committed H200 run, at the model shape, our result and PyTorch's were identical bit for bit, and every
# tile was within 0.06151 of the float64 product (tolerance 0.3146). Both accumulate in fp32 and round once at the
# end; the blog's 0.03125 is one fp16 step for outputs between 32 and 64, a difference in the order of the sums.
#
# ## One row against cuBLAS
#
# PyTorch hands `x @ w.t()` to cuBLAS, NVIDIA's library, tuned for each GPU. We time two shapes: the model shape
# (at full size 128 tokens through the MLP's up projection) and the **decode shape**, the same weight with one
# row, which is what every projection sees while the model generates. Each shape gets one `helpers.compare_calls`
# on the GPU clock (CUDA-graph replay), PyTorch's call as the reference and against itself for the A/A floor, in
# shuffled rounds ([how we measure](01_setup.ipynb#How-we-measure)). At the decode shape the same rounds time every
# tile of the list, for the sweep below. One host reading per call at the decode shape (`helpers.host_ms_per_call`)
# gives what a call costs the program that issues it. In CPU mode there is one clock, the interpreter's: read the
# method, not the numbers.
#
# **Predict first.** At one row the weight is 6.3 MB at full size. If both kernels streamed it at an H200's
# nominal 4.8 TB/s, a call would take about 1.3 µs; a kernel's fixed cost (launching its programs, draining
# them) is of the order of a microsecond or two. A replayed graph reads the same weight again and again, so from
# the second replay on it comes from the 60 MiB L2, faster still. Our kernel has its 32 serial K steps to walk, so
# expect it above cuBLAS, at several microseconds.

# %%
xm, wm = make_operands(model_shape, seed=10)
xd, wd = make_operands(decode_shape, seed=11)
at = {"model shape": helpers.compare_calls({DEFAULT.name: lambda: slower_kernels.matmul(xm, wm.t())},
                                           reference=lambda: xm @ wm.t()),
      "decode shape": helpers.compare_calls(  # every tile, in the same rounds: the sweep below reads them
          {t.name: (lambda t=t: slower_kernels.matmul(xd, wd.t(), **t.kwargs())) for t in TILES.values()},
          reference=lambda: xd @ wd.t())}
decode_calls = {"torch": (lambda: xd @ wd.t(), REF),  # name -> (call, its name in the rounds)
                "triton": (lambda: slower_kernels.matmul(xd, wd.t()), DEFAULT.name)}
host_ms = {who: helpers.host_ms_per_call(fn) if helpers.HAS_GPU else at["decode shape"].ms[key]  # CPU: one clock
           for who, (fn, key) in decode_calls.items()}
launches = {who: helpers.launches_per_call(fn) for who, (fn, _) in decode_calls.items()}
rows = []
for label, shape in (("model shape", model_shape), ("decode shape", decode_shape)):
    cc, nbytes = at[label], work(shape)[1]
    rows.append({"shape": label, "M x K x N": " x ".join(map(str, shape)),
                 f"PyTorch {CLOCK} µs": 1e3 * cc.ms[REF], f"ours {CLOCK} µs": 1e3 * cc.ms[DEFAULT.name],
                 "ours / PyTorch": cc.ratios[DEFAULT.name].median, "verdict": cc.verdict(DEFAULT.name).text,
                 "PyTorch GB/s": nbytes / cc.ms[REF] / 1e6 if helpers.HAS_GPU else NAN,  # bytes / (ms 1e-3) / 1e9
                 "ours GB/s": nbytes / cc.ms[DEFAULT.name] / 1e6 if helpers.HAS_GPU else NAN,
                 "PyTorch host µs": 1e3 * host_ms["torch"] if shape == decode_shape else NAN,  # one row only
                 "ours host µs": 1e3 * host_ms["triton"] if shape == decode_shape else NAN,
                 "kernels per call (PyTorch, ours)": "-" if shape != decode_shape else  # CPU mode counts ours only
                 f"{helpers.fmt(launches['torch'] if helpers.HAS_GPU else None, 0)}, {launches['triton']:.0f}"})
helpers.show(pd.DataFrame(rows).set_index("shape"))
for label, cc in at.items():
    print(helpers.verdict_line(f"{label}, ours / PyTorch, {CLOCK}", cc.ratios[DEFAULT.name], cc.floor))

how = f"{at['model shape'].clock}, median of {at['model shape'].rounds} shuffled rounds (compare_calls)"
for prefix, label, shape in (("", "model shape", model_shape), ("decode_", "decode shape", decode_shape)):
    helpers.record(f"matmul.{prefix}torch_ms", at[label].ms[REF], "ms", f"torch a @ w.t(), {shape}; {how}")
    helpers.record(f"matmul.{prefix}triton_ms", at[label].ms[DEFAULT.name], "ms",
                   f"Triton matmul, {shape}, tile {DEFAULT.name}; {how}; same rounds as matmul.{prefix}torch_ms")
host_note = helpers.CLOCK_LABELS["host"] if helpers.HAS_GPU else f"{how}: CPU mode has one clock"
for who, label in (("torch", "torch a @ w.t()"), ("triton", f"Triton matmul, tile {DEFAULT.name}")):
    helpers.record(f"matmul.host_decode_{who}_ms", host_ms[who], "ms", f"{label}, {decode_shape}; {host_note}")

# %% [markdown]
# On the committed H200 run our kernel took 11.33 µs of GPU time at the model shape against PyTorch's 4.257 µs
# (2.66x slower), and 11.08 against 3.728 µs at the decode shape (2.97x slower). The model shape has 128 times the
# arithmetic and cost each kernel little more time: neither call pays much for its flops. At one row, on the
# committed H200 run, our kernel read the weight at 569 GB/s and cuBLAS at 1,690 GB/s, from the L2 and still far
# below the memory's nominal 4,800 GB/s. On the host, one call at one row cost 30.67 µs through our Python
# launcher against 13.89 µs for PyTorch's on the committed H200 run, one kernel each: a call costs the host
# roughly three times what it costs the GPU, a point the model section returns to.
#
# The blog's 0.229 against 0.106 ms (2.16x) is of the same kind; its times are about twenty times ours. A T4 has
# a fifteenth of an H200's memory bandwidth, and the post gives neither its shape nor its clock, so the two pairs
# can be set side by side as ratios, not number for number.
#
# ## Sweeping the tiles at one row
#
# The blog swept `BLOCK_M` at one row and found the tile mattered. Every tile of `slower_kernels.TILE_CONFIGS`
# (the project's one list) was timed against cuBLAS in the decode-shape rounds above. The table reads them the
# way "The idea" predicts: how many **programs** the grid has, how many **K steps** each program walks, the GPU
# time, that time divided by the steps, and how many KiB of the weight one program loads per step
# (`BLOCK_K x BLOCK_N x 2` bytes in fp16). Each tile is compared with the default tile round by round (both
# against the same cuBLAS call in the same round), and held against the A/A floor.

# %%
sweep = at["decode shape"]
rows = []
for t in TILES.values():
    programs, steps = grid_of(t, decode_shape)
    vs = sweep.between(t.name, DEFAULT.name)
    rows.append({"tile": t.name, "warps": t.num_warps, "programs": programs, "K steps": steps,
                 f"{CLOCK} µs": 1e3 * sweep.ms[t.name], "µs per K step": 1e3 * sweep.ms[t.name] / steps,
                 "KiB per program per step": t.block_k * t.block_n * E / 1024,
                 "vs default": vs.median,
                 "verdict": "reference" if t == DEFAULT else helpers.verdict(vs, sweep.floor).text})
tiles = pd.DataFrame(rows).set_index("tile")
helpers.save_sweep(tiles.reset_index(), "matmul_tile_sweep")
helpers.show(tiles)  # each tile's verdict against the default tile is in its row

# %%
fig, ax = plt.subplots(figsize=(9, 4.8))
dots = ax.scatter(tiles["K steps"], tiles[f"{CLOCK} µs"], c=tiles["programs"], cmap="viridis", norm=LogNorm(),
                  s=70, edgecolor="black", zorder=3)
for i, (name, r) in enumerate(tiles.sort_values(f"{CLOCK} µs").iterrows()):  # labels left and right, in turn
    ax.annotate(name, (r["K steps"], r[f"{CLOCK} µs"]), xytext=(9 if i % 2 else -9, -3), textcoords="offset points",
                ha="left" if i % 2 else "right", fontsize=8)
ax.axhline(1e3 * sweep.ms[REF], color="crimson", ls="--", label=f"PyTorch: {1e3 * sweep.ms[REF]:.3g} µs")
bar = fig.colorbar(dots, ax=ax, label="programs in the grid")
bar.minorticks_off()
bar.set_ticks(sorted(set(tiles["programs"])), labels=[str(p) for p in sorted(set(tiles["programs"]))])
M, K, N = decode_shape
ax.set(xscale="log", xlabel="K steps per program (K / BLOCK_K)", ylabel=f"{CLOCK} µs per call (median of rounds)",
       title=f"One row: does the time follow the K loop? x[{M}, {K}] @ W[{N}, {K}]$^T$")
helpers.plain_log_ticks(ax, "x", sorted(set(tiles["K steps"])))
ax.set_xlim(tiles["K steps"].min() / 1.6, tiles["K steps"].max() * 1.6)
ax.set_ylim(bottom=0)
ax.grid(True, alpha=0.3)
ax.legend(loc="upper left")
fig.suptitle(f"Tiled matmul, {helpers.env_info()['gpu']} ({helpers.MODE} mode)", fontsize=9)
fig.tight_layout()
helpers.save_figure(fig, "matmul_tile_sweep")
plt.show()

# %% [markdown]
# ### What the sweep shows
#
# Read the `K steps` column first. On the committed H200 run the steps ordered the nine tiles: the one with 16 steps
# (m16_n128_k64) was the fastest at 8.940 µs, 1.24x faster than the default tile; the one with 64 steps
# (m16_n16_k16) the slowest at 16.30 µs, 1.47x slower than the default; the seven with 32 steps lay between, 10.43
# to 15.45 µs. Divided by its steps, the default tile spends about 0.35 µs per step: the time of one trip for a
# block of the weight, from L2 here, plus the multiply and the loop's own work. That is what "latency-bound" means
# for a K loop: one program has only its next block or two in flight, so it cannot pull the weight any faster than
# one block per round trip.
#
# The `µs per K step` column is not constant: it grows with the KiB each program loads per step, from about
# 0.25 µs for the 16 x 16 tile's half KiB to about 0.56 µs for the 16 KiB of m16_n128_k64. A larger block takes
# longer to arrive, but less than proportionally: halving the steps by doubling the block still wins. That is
# the second column to read, **programs**: at 32 steps each, fewer programs (wider tiles) each carry more of the
# weight per step. On the committed H200 run m64_n128_k32, the default tile with twice the columns and half the
# programs (24 against 48), was 1.17x slower than the default; with 24 programs, more than a hundred of the
# H200's 132 SMs have nothing to do while the weight is read. Taller tiles cost a little too: m128_n64_k32,
# which differs from the default in `BLOCK_M` alone, was 1.15x slower on the committed H200 run, the padding
# rows riding along in the tensor cores and the accumulator.
#
# No tile came near cuBLAS: on the committed H200 run even the fastest was about 2.4x slower. cuBLAS has a kernel made
# for one row (a matrix-vector product) that spreads the weight over all the SMs and keeps many loads in flight
# per SM; [chapter 9](09_faster_on_purpose.ipynb) writes one.

# %% [markdown]
# ## From the L2 or from HBM: one kernel, two prices
#
# A CUDA-graph replay runs the same call on the same weight over and over. At full size that weight is 6.3 MB,
# as large as a layer's projections get (gate, up and down are 6.3 MB each), and an H200's L2 cache holds 60 MiB
# (about 63 MB), so from the second replay on the weight never leaves the chip. The model is different: its
# weights come to about 1.2 GB, and each decoded token reads every projection's weight once, a different one
# each time, from HBM. Here are the model's projections at one row, with the grid of the default tile:

# %%
model, tokenizer, description = helpers.load_model()
linears = pd.DataFrame([{"projection": name.rsplit(".", 1)[-1], "K": m.in_features, "N": m.out_features}
                        for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)])
kinds = linears.groupby("projection", sort=False).agg(count=("K", "size"), K=("K", "first"), N=("N", "first"))
kinds["programs"], kinds["K steps"] = zip(*[grid_of(DEFAULT, (1, k, n)) for k, n in zip(kinds["K"], kinds["N"])])
kinds["weight MB"] = kinds["K"] * kinds["N"] * E / 1e6  # read once per decoded token
kinds["% of all weights"] = 100 * kinds["count"] * kinds["weight MB"] / (helpers.module_census(model)["bytes"] / 1e6)
helpers.show(kinds)


# %% [markdown]
# At full size each attention projection walks 32 or 64 K steps (`o_proj` reads $K = 2048$), the MLP's
# `down_proj` 96. The
# experiment: the model's own 112 attention weights (at full size), called one after another at one row as a
# decode step calls them, **cold**, each weight once (352 MB at full size, six times the L2), and **warm**, the
# first layer's four weights repeated 28 times (12.6 MB, inside the L2). Same shapes, same order within each
# layer, same number of launches; only the home of the bytes differs. Both ways with cuBLAS and with ours, in
# shuffled rounds on the GPU clock, PyTorch warm as the reference.
#
# **Predict first.** cuBLAS keeps many loads in flight on every SM, so a longer trip costs it little: a few
# microseconds per projection either way. Our kernel waits for each of its 32 to 64 trips in turn, so every
# extra bit of latency is paid 32 to 64 times. Expect our extra time over cuBLAS per projection to grow from
# warm to cold by two to three times, towards the 21 µs that the model's GPU-busy time showed per attention
# projection on the committed H200 run. (In CPU mode there is no cache to miss: expect nothing.)

# %%
attn = [[getattr(layer.self_attn, p).weight.detach() for p in ("q_proj", "k_proj", "v_proj", "o_proj")]
        for layer in model.model.layers]
PASSES = {"warm": attn[0] * len(attn), "cold": [w for ws in attn for w in ws]}  # same shapes and count
xs = {w.shape[1]: torch.randn(1, w.shape[1], device=DEVICE, dtype=DTYPE) for w in PASSES["cold"]}  # x [1, K]
FNS = {"PyTorch": lambda x, w: x @ w.t(), "ours": lambda x, w: slower_kernels.matmul(x, w.t())}
calls = {f"{who}, {where}": (lambda f=f, ws=ws: [f(xs[w.shape[1]], w) for w in ws])
         for where, ws in PASSES.items() for who, f in FNS.items()}
WARM_REF = "PyTorch, warm"
l2 = helpers.compare_calls({k: c for k, c in calls.items() if k != WARM_REF}, reference=calls[WARM_REF],
                           reference_name=WARM_REF)
n_pass = len(PASSES["cold"])
per_proj = {k: 1e3 * l2.ms[k] / n_pass for k in calls}  # µs per projection
helpers.show(pd.DataFrame([{
    "weights": where, "distinct MB": sum(w.numel() for w in {id(w): w for w in ws}.values()) * E / 1e6,
    f"PyTorch {CLOCK} µs": per_proj[f"PyTorch, {where}"], f"ours {CLOCK} µs": per_proj[f"ours, {where}"],
    "ours - PyTorch, µs": per_proj[f"ours, {where}"] - per_proj[f"PyTorch, {where}"]}
    for where, ws in PASSES.items()]).set_index("weights"))
print("L2 MB:", helpers.fmt(torch.cuda.get_device_properties(0).L2_cache_size / 1e6 if helpers.HAS_GPU else None, 3))
print(helpers.verdict_line(f"PyTorch, cold / warm, {CLOCK}", l2.ratios["PyTorch, cold"], l2.floor))
print(helpers.verdict_line(f"ours, cold / warm, {CLOCK}", l2.between("ours, cold", "ours, warm"), l2.floor))

# %% [markdown]
# The table gives the two prices of one projection of ours on the GPU: warm, what a microbenchmark sees, and cold,
# what the model pays. On the committed H200 run our extra over cuBLAS was 6.868 µs warm, near the decode
# shape's (about 7.4), and 22.20 µs cold, about 3.2 times as much, a little beyond the prediction; cuBLAS slowed
# only 1.08x from warm to cold, ours 2.18x: the kernel did not change, its trips got longer.
#
# ## The projections of the model
#
# Now the kernel goes into the model, as the blog did, in three steps: the **attention projections** (q, k, v, o:
# 112 at full size), then the **MLP projections** as well (gate, up, down: 84), then **`lm_head`** and all the
# **RMSNorms** (113, chapter 3's two-pass kernel) on top. All use the default tile. `helpers.compare_configs`
# generates with the original, the original again (the A/A floor) and the three steps in shuffled rounds, and
# `torch.profiler` counts kernels and GPU-busy time per decoded token afterwards.
#
# **Predict first**, per projection swapped, from the prices measured above. Each swap keeps one launch per
# projection, so the count of kernels should not move. (At the MLP step it fell by 28, one per layer: cuBLAS
# ran one of each layer's three MLP products as two kernels, where ours is one.) What moves is each launch's
# price: on the host, our call minus cuBLAS's (one reading each, above); on the GPU, our cold projection minus
# cuBLAS's. If the host sets the pace (chapter 1: at batch size 1 the GPU is idle most of the time), the host's
# extra is the floor of the cost per projection; if the GPU's extra time does not hide behind the host's, the sum is the ceiling.

# %%
host_extra = 1e3 * (host_ms["triton"] - host_ms["torch"])  # µs per call, at one row
gpu_extra = per_proj["ours, cold"] - per_proj["PyTorch, cold"]  # µs per projection, weights from HBM
helpers.show(pd.DataFrame({"predicted µs per projection": {
    "host: ours - PyTorch (floor)": host_extra, "GPU, cold: ours - PyTorch": gpu_extra,
    "host + GPU (ceiling)": host_extra + gpu_extra}}))

# %%
STEPS = {"attention proj": dict(projections={"attention"}),
         "attention + MLP proj": dict(projections={"attention", "mlp"}),
         "all proj + RMSNorm": dict(rmsnorm="two_pass", projections=set(helpers.PROJECTION_GROUPS))}
swapped = {}
for name, patch in STEPS.items():  # what each step swaps (no generation here)
    with helpers.patched(model, **patch) as counts:
        swapped[name] = dict(counts)
L = model.config.num_hidden_layers
assert [swapped[s]["attention_proj"] for s in STEPS] == [4 * L] * 3, "q, k, v, o in every layer"
assert [swapped[s]["mlp_proj"] for s in STEPS] == [0, 3 * L, 3 * L], "gate, up, down in every layer"
comparison = helpers.compare_configs(model, STEPS, tokenizer=tokenizer)
prof = helpers.profile_configs(comparison, model)  # after the timed rounds
helpers.show(comparison.table().set_index("configuration"))
for name in STEPS:
    print(helpers.verdict_line(name, comparison.ratios[name], comparison.floor))

NEW = {"attention proj": (helpers.ORIGINAL, 4 * L), "attention + MLP proj": ("attention proj", 3 * L)}
rows = []
for name, p in prof.items():
    row = {"configuration": name, "wall ms per token": p.wall_ms_per_token, "kernels per token": p.launches,
           "ours per token": p.project_launches_per_token,
           "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token, 3)}
    if name in NEW:  # the step's change over the step before, per projection it added
        before, n = prof[NEW[name][0]], NEW[name][1]
        row["wall µs per new projection"] = 1e3 * (p.wall_ms_per_token - before.wall_ms_per_token) / n
        if helpers.HAS_GPU:
            row["GPU-busy µs per new projection"] = 1e3 * (p.gpu_busy_ms_per_token - before.gpu_busy_ms_per_token) / n
    rows.append(row)
helpers.show(pd.DataFrame(rows).set_index("configuration"))

IDS = {  # step -> (its time ratio's id, its tokens/s id, the note)
    "attention proj": ("attention_proj_slowdown", "tps_attention_proj",
                       f"{4 * L} attention projections on the Triton matmul"),
    "attention + MLP proj": ("attention_mlp_slowdown", "tps_attention_mlp_proj", "attention + MLP projections"),
    "all proj + RMSNorm": ("all_proj_rmsnorm_slowdown", "tps_all_proj_rmsnorm",
                           "all projections incl. lm_head + two-pass RMSNorm")}
rounds_note = f"median of {len(comparison.orders)} shuffled rounds"
tps = comparison.tokens_per_s
helpers.record("matmul.tps_original", tps[helpers.ORIGINAL], "tokens/s",
               f"{rounds_note}; prompt {comparison.prompt_len}, {comparison.new_tokens} new")
for name, (ratio_id, tps_id, note) in IDS.items():
    comparison.record(name, f"matmul.{ratio_id}", note)
    helpers.record(f"matmul.{tps_id}", tps[name], "tokens/s", f"{note}; {rounds_note}")
helpers.record("matmul.attention_proj_replaced", swapped["attention proj"]["attention_proj"], "modules",
               "q, k, v, o per layer")
helpers.record("matmul.launches_per_token_all_proj_rmsnorm", prof["all proj + RMSNorm"].launches, "launches",
               helpers.launch_note() + ", all projections + two-pass RMSNorm")

# %%
order = [helpers.ORIGINAL_AGAIN, *STEPS]
med = [comparison.ratios[s].median for s in order]
err = [[m - comparison.ratios[s].low for s, m in zip(order, med)],
       [comparison.ratios[s].high - m for s, m in zip(order, med)]]
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.bar(["original again\n(A/A floor)", "attention proj", "+ MLP proj", "+ lm_head\n+ RMSNorm"], med, yerr=err,
       capsize=4, color=["tab:gray", "tab:orange", "tab:orange", "tab:orange"])
noise = helpers.noise_threshold(comparison.floor)
ax.axhspan(1 / (1 + noise), 1 + noise, color="tab:gray", alpha=0.2, label="within noise (helpers.verdict)")
ax.axhline(1.0, color="black", lw=0.8)
ax.set(ylabel="generation time / original's\n(median of rounds, quartiles)", title="How much slower is each step?")
ax.legend(loc="upper left")
ax.grid(True, axis="y", alpha=0.3)
fig.suptitle(f"{description}; {helpers.env_info()['gpu']} ({helpers.MODE} mode)", fontsize=8)
fig.tight_layout()
helpers.save_figure(fig, "matmul_model_steps")
plt.show()

# %% [markdown]
# ### What the model shows
#
# On the committed H200 run the original generated 44.51 tokens/s. With the 112 attention projections on our
# matmul each generation took 1.30x as long (quartiles 1.26-1.40), with the 84 MLP projections as well 1.40x
# (quartiles 1.34-1.41), and with `lm_head` and the two-pass RMSNorms on top 1.34x (quartiles 1.31-1.38), all
# against an A/A floor of 0.971 on the committed H200 run. The blog's T4 gave 23 to 17 tokens/s, 1.41x and 1.33x
# for the same steps; here the three steps' quartiles overlap, and only the first stands clear of the one before.
#
# Per decoded token, on the committed H200 run, the attention projections took the wall time from 22.30 to
# 28.80 ms and the GPU-busy time from 3.412 to 5.731 ms, with 1,655 kernels before and after: one launch for
# one, as predicted. That is about 58 µs of wall time and about 21 µs of GPU time per projection. The GPU part
# matches the cold price above. The wall part missed the prediction: on the committed H200 run it was about 1.5
# times the ceiling of 38.98 µs (host 16.78 plus GPU 22.20). This chapter cannot say where the rest goes; one
# candidate is a call of ours costing the host more inside `generate()` (its module's `forward`, the launcher's
# checks) than in a loop of bare calls, and [chapter 8](08_lessons.ipynb) prices every module inside the model.
#
# The MLP step says the same thing about the K loop. On the committed H200 run it took the GPU-busy time from
# 5.731 to 8.472 ms, about 33 µs per MLP projection against the attention's 21: `down_proj` walks $K = 3072$ in 96
# steps, so the MLP's three projections average 53 steps against the attention's 40. Its wall time, about 21 µs
# per projection, was just above the host's floor and well under the attention's 58, a difference lost in the
# steps' overlapping quartiles. The last step swaps 113 RMSNorms of 8 PyTorch kernels each for our two-pass
# kernel of 2: on the committed H200 run the kernels per token fell to 949, and the generation was no slower than
# with the projections alone. The blog's last step (1.33x) likewise came out below its attention + MLP step (1.41x).
#
# ## A look inside: what the compiler made, and the roofline
#
# As in [chapter 2](02_add_kernel.ipynb#What-the-compiler-made), every tile is compiled ahead of time for a T4
# (`sm_75`) and an H200 (`sm_90`), fp16, on this machine with or without a GPU: the tensor-core multiplies
# (`mma`: `mma.sync` for one warp, `wgmma.mma_async` for four together) and `fma` instructions in the PTX (each
# counted once, however often the loop runs it), the registers per thread, the bytes a thread spills to local
# memory, and how many programs one SM holds at once. Then two lines of each target's PTX for the default tile.

# %%
compiled = helpers.compiler_table(["matmul_kernel"])
COLS = {"tensor-core mma": "mma", "fma": "fma", "registers": "registers", "spill stores": "spill bytes",
        "programs_per_sm": "programs per SM"}
helpers.show(pd.concat({gpu: sub.set_index("label").loc[list(TILES), list(COLS)].rename(columns=COLS)
                        for gpu, sub in compiled.groupby("gpu", sort=False)}, axis=1))
display({"text/plain": helpers.ptx_excerpt("matmul_kernel", DEFAULT.name, 75, r"fma\.", max_lines=3) + "\n---\n"
                       + helpers.ptx_excerpt("matmul_kernel", DEFAULT.name, 90, r"wgmma\.mma_async", max_lines=2)},
        raw=True)

# %% [markdown]
# **On a T4, `tl.dot` becomes `fma`.** For `sm_75` no tile gets a single tensor-core instruction: every
# multiply-add is one thread's `fma.rn.f32`, on the FMA cores (8.1 TFLOP/s on a T4) where cuBLAS uses the tensor
# cores (65). At the model shape, about 110 flop per byte, that caps our kernel at a quarter of cuBLAS's roof, and
# the blog's 2.16x fits inside it. At one row the useful arithmetic is too small to matter, but the tile pads the
# row to `BLOCK_M` rows and `tl.dot` multiplies the padding too: 64 flop per byte for the default tile, beyond
# the T4's FMA ridge (about 25), so on a T4 a shorter tile should pay. The default tile also holds 255 registers
# per thread on `sm_75` and spills: local-memory traffic the table's programs per SM do not show.
#
# **On an H200, tensor cores.** Every tile's `tl.dot` became `wgmma.mma_async` (tiles of 64 rows and more) or
# `mma.sync`: one instruction multiplies a 64 x 16 block of $A$ by a 16 x 64 block of $B$. The default tile needs
# about 64 registers per thread, and an SM can hold 8 of its programs at once, so all 48 programs of the one-row
# grid start together, on 48 of the 132 SMs, as "The idea" assumed.
#
# **The roofline.** At one row the intensity is $2NK / 2(K + NK + N)$, just under one flop per byte (0.999 at the
# full decode shape), about 200 times left of the H200's ridge point (989 TFLOP/s over 4,800 GB/s): memory-bound
# at best, whatever the tile. On the committed H200 run the default tile reached about 0.57 TFLOP/s at one row and
# cuBLAS about 1.69, both well under the memory roof: latency and fixed cost held them there, not bandwidth. The
# figure adds this run's cold points (the attention projections from HBM) and the model shape.

# %%
if helpers.HAS_GPU and helpers.SLUG in helpers.NOMINAL_TFLOPS and helpers.SLUG in helpers.NOMINAL_GB_S:
    cold = [work((1, w.shape[1], w.shape[0])) for w in PASSES["cold"]]  # (flops, bytes) of each projection
    cold_flops, cold_bytes = (sum(v) / n_pass for v in zip(*cold))
    groups = {"one row, warm": (work(decode_shape), at["decode shape"].ms[REF], at["decode shape"].ms[DEFAULT.name]),
              "attention projection, cold": ((cold_flops, cold_bytes), per_proj["PyTorch, cold"] / 1e3,
                                             per_proj["ours, cold"] / 1e3),
              f"M = {model_shape[0]}": (work(model_shape), at["model shape"].ms[REF],
                                        at["model shape"].ms[DEFAULT.name])}
    helpers.plot_roofline(pd.DataFrame([{"label": who, "group": g, "flops": f, "bytes": b, "gpu_ms": ms}
                                        for g, ((f, b), torch_ms, ours_ms) in groups.items()
                                        for who, ms in (("PyTorch", torch_ms), (DEFAULT.name, ours_ms))]),
                          name="matmul_roofline")
    plt.show()
else:
    print("roofline: GPU only")  # it needs GPU times and the GPU's nominal figures

# %% [markdown]
# ## Your numbers beside the blog's
#
# The kernel rows (`_ms`) are GPU time (interpreter time in CPU mode), the `host_` rows host time per call, the
# tokens/s and ratio rows wall time in shuffled rounds. The blog's column is its T4, timed by a method the post
# does not name, at shapes it mostly does not give.

# %%
helpers.show(helpers.compare("matmul.").drop(columns="label"))

# %% [markdown]
# ## Try it yourself
#
# Each exercise changes one thing in the default tile's launch and times it against the unchanged call with
# `helpers.compare_calls` (GPU time in shuffled rounds with the A/A floor; interpreter time in CPU mode, which
# ignores `num_warps` and `num_stages`). Guess first: set `answer` to `"faster"`, `"slower"` or `"same"` and run
# the cell; with `answer = None` it only shows the measurement.
#
# **1. Half the K steps.** At one row, `BLOCK_K` from 32 to 64: 16 steps instead of 32, each loading twice the
# weight per program (8 KiB). The sweep says a step does not take twice as long when its block doubles: expect
# **faster**, by less than half.

# %%
BASE = DEFAULT.kwargs()  # block sizes, num_warps and num_stages of the default tile
default_call = lambda: slower_kernels.matmul(xd, wd.t(), **BASE)  # noqa: E731
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
change = "BLOCK_K 32 -> 64"
cmp = helpers.compare_calls({change: lambda: slower_kernels.matmul(xd, wd.t(), **{**BASE, "block_k": 64})},
                            reference=default_call)
measured = helpers.check_answer(answer, cmp.ratios[change], cmp.floor, change=change, clock=cmp.clock)

# %% [markdown]
# **2. No pipelining, with many rows.** At the model shape, `num_stages` from 2 to 1: the K loop no longer copies
# the next chunk into shared memory while it multiplies the current one, so every step waits for its loads. On
# sm_80 and newer expect clearly **slower** (on the committed H200 run, 1.57x slower); a T4 has no asynchronous
# copies, and there the two settings compile alike: "same".

# %%
answer = None  # @param ["None", "'faster'", "'slower'", "'same'"] {type:"raw"}
change = "num_stages 2 -> 1"
cmp = helpers.compare_calls({change: lambda: slower_kernels.matmul(xm, wm.t(), **{**BASE, "num_stages": 1})},
                            reference=lambda: slower_kernels.matmul(xm, wm.t(), **BASE))
measured = helpers.check_answer(answer, cmp.ratios[change], cmp.floor, change=change, clock=cmp.clock)

# %% [markdown]
# **3. Without measuring.** From the projection table and the sweep: how many K steps does `down_proj` walk with
# the default tile, and how long should one call take warm, at the default tile's µs per step? `lm_head` has
# 2,374 programs at full size: do they all fit on an H200 at once (8 per SM, 132 SMs)? If not, what replaces
# "the call lasts one program"?
#
# ## Takeaway
#
# - A tiled matmul gives each program one output tile and walks $K$ in chunks, accumulating in fp32; checked
#   against float64 on odd shapes, every tile is right, and slower than cuBLAS (on the committed H200 run 2.66x
#   with 128 rows, 2.97x with one).
# - With one row nothing is reused and every program runs at once, so a call lasts one program's K loop: the time
#   follows the K steps first and the programs second, set by latency, not bandwidth.
# - A microbenchmark that replays one weight reads it from the L2; the model reads every weight from HBM, where
#   each trip of the K loop takes longer: about 7 µs extra per call warm, 22 µs cold, 21 µs in the model.
#
# Next, in chapter 5, attention itself.
