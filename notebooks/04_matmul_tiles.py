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
# - how a matrix multiplication is cut into output *tiles*, one program each;
# - what the *K loop* and the fp32 *accumulator* inside each program do;
# - how to check a low-precision matmul, and how close to PyTorch (cuBLAS) a simple Triton kernel gets;
# - why the tile shape matters so much when the matmul has a single row, as in decoding;
# - why a kernel timing must name its clock (GPU time or host time per call);
# - what happens to tokens/s when the model's 197 linear layers, and then its RMSNorms too, use our kernels,
#   and how to tell a real slowdown from the noise of the machine.

# %% [markdown]
# ## The idea: tiles
#
# Every linear layer of the model computes $C = A B$: $A$ is the input, $M$ rows (one per token) of $K$
# numbers; $B$ is the weight, $K \times N$; $C$ has $M \times N$ outputs. Each output is a dot product
# of length $K$: $C_{mn} = \sum_k A_{mk} B_{kn}$.
#
# One program per output element would read the same rows of $A$ and columns of $B$ over and over. So
# the output is cut into **tiles** of `BLOCK_M` x `BLOCK_N` elements and each program computes one tile.
# The program needs a strip of `BLOCK_M` rows of $A$ and a strip of `BLOCK_N` columns of $B$, both $K$
# long, too much to hold at once; so it walks along $K$ in chunks of `BLOCK_K`:
#
# 1. load a `BLOCK_M x BLOCK_K` block of $A$ and a `BLOCK_K x BLOCK_N` block of $B$;
# 2. multiply them with `tl.dot` and add the result to the **accumulator**, a `BLOCK_M x BLOCK_N` tile
#    kept in fp32 in registers so that a thousand additions do not lose precision;
# 3. move both pointers on by `BLOCK_K` and repeat until $K$ is exhausted (**the K loop**);
# 4. cast the accumulator to the output dtype (fp16 on a GPU) and write the tile once.
#
# Every element of $A$ that a program loads is used `BLOCK_N` times, every element of $B$ `BLOCK_M`
# times: bigger tiles mean more reuse and fewer bytes from memory, as long as the tile is actually full.

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

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Patch
import torch

import helpers  # first: in CPU mode it sets TRITON_INTERPRET=1, which must happen before Triton loads
import kernels
import triton  # noqa: E402  (for triton.cdiv, after helpers)

helpers.show_env()
DEVICE, DTYPE, SIZES = helpers.DEVICE, helpers.DTYPE, helpers.SIZES
E = torch.tensor([], dtype=DTYPE).element_size()  # bytes per element

# %% [markdown]
# ## The kernel
#
# The kernel, and its launcher: the grid has one program per output tile, `cdiv(M, BLOCK_M)` by
# `cdiv(N, BLOCK_N)`. Masks zero out rows, columns and the last K chunk that fall outside the matrices.
# The launcher reads $B$ through its strides, so the model's weight, stored as $N \times K$, is passed as
# the transposed view `weight.t()` without copying it.

# %%
matmul_src = inspect.getmodule(kernels.matmul)
print(inspect.getsource(matmul_src.matmul_kernel.fn))
print(inspect.getsource(kernels.matmul))

# %% [markdown]
# ## Is it correct?
#
# At the model shape of this mode, $M \times K \times N$ from `helpers.SIZES` (in full mode
# 128 x 1024 x 3072: 128 tokens through the MLP's up projection), with fresh random inputs. We compare
# with PyTorch's own matmul in the same dtype (the blog's "max fp16 error") and with a float64 reference
# for the pass/fail line. Both kernels accumulate in fp32 and round once at the end, but in a different
# order, so they may disagree by a unit in the last place of fp16: with outputs in the hundreds, that
# unit is 0.0625 or 0.125. The tolerance is relative to the largest output.

# %%
REL_TOL = helpers.TOLERANCE["kernel"]  # per dtype, relative to the largest output


def make_operands(shape, seed=0):
    """Fresh random input a [M, K] and a weight w [N, K] stored like nn.Linear's."""
    M, K, N = shape
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(M, K, generator=g).to(DEVICE, DTYPE),
            torch.randn(N, K, generator=g).to(DEVICE, DTYPE))


M, K, N = SIZES.matmul_shape
a, w = make_operands(SIZES.matmul_shape, seed=1)
ours = kernels.matmul(a, w.t(), **kernels.DEFAULT_TILE.kwargs())
theirs = a @ w.t()
reference = a.double() @ w.double().t()
max_err = (ours.double() - theirs.double()).abs().max().item()
err_ref = (ours.double() - reference).abs().max().item()
tol = REL_TOL[DTYPE] * reference.abs().max().item()
helpers.record("matmul.max_err", max_err, "abs", f"max |Triton - torch|, {SIZES.matmul_shape}, {str(DTYPE)[6:]}")
print(f"[{M}, {K}] @ [{K}, {N}] {str(DTYPE)[6:]}, tile {kernels.DEFAULT_TILE.name}")
print(f"max |ours - torch| = {max_err:.5g}   max |ours - float64 reference| = {err_ref:.5g} (tolerance {tol:.3g})")
print("matmul check:", "PASS" if err_ref <= tol else "FAIL")
assert err_ref <= tol, f"matmul is off by {err_ref} (tolerance {tol})"

# %%
largest = reference.abs().max().item()
ulp = torch.finfo(DTYPE).eps * 2.0 ** torch.tensor(largest).log2().floor().item()  # one step of DTYPE there
helpers.md(
    f"The largest difference from PyTorch's result is **{max_err:.5g}**, on outputs as large as {largest:.0f}, "
    f"where one step of {str(DTYPE)[6:]} is {ulp:.3g}: "
    + ("the two results are identical, bit for bit. " if max_err == 0 else
       f"{max_err / ulp:.1f} steps, a disagreement in rounding order and nothing more. ")
    + f"The blog reported a maximum fp16 error of {helpers.blog('matmul.max_err')} on its T4, on a shape it "
    "does not state; at outputs between 32 and 64 that is one fp16 step."
)

# %% [markdown]
# ## Timing against PyTorch
#
# PyTorch hands a matmul to cuBLAS, NVIDIA's library, tuned for each GPU for years; on a T4 it uses the
# tensor cores, which Triton does not use there (on sm_75 it compiles `tl.dot` to ordinary fused
# multiply-adds). So we expect to lose. How much, and where, is the interesting part. We time two shapes:
# the model shape above, and the **decode shape**, one row, which is what every projection sees when the
# model generates one token at a time.
#
# Every call in this chapter is timed by one function, `helpers.time_call`, on two clocks: **GPU time**
# (the call replayed in a CUDA graph: the kernel's own work, the host out of the loop) and **host time per
# call** (calls back to back, synchronised: what one call costs the Python program that makes it). Each
# pair of tile and shape is timed once; the tables, the sweep, its figure and the explorer below all read
# that one measurement. In CPU mode there is only the interpreter's wall time.
#
# For each shape we also compute the work (FLOPs, $2MNK$) and the minimum bytes (read $A$ and $B$ once,
# write $C$ once), on the GPU clock. At one row the weight alone is almost all the bytes and the
# arithmetic is tiny, so the decode matmul is a memory problem: reading $K \times N$ weights as fast as
# possible.

# %%
CLOCK = "GPU" if helpers.HAS_GPU else "interpreter"  # the clock the ratios are read on
_timed = {}  # (who, shape, tile name) -> helpers.KernelTime, measured on first use, read by every later cell


def timed(who, shape, tile=kernels.DEFAULT_TILE):
    """PyTorch's ``a @ w.t()`` (who="torch") or our kernel with ``tile`` (who="triton") on a[M, K] @ w[N, K].T,
    through helpers.time_call (GPU and host clocks)."""
    key = (who, tuple(shape), tile.name if who == "triton" else None)
    if key not in _timed:
        a, w = make_operands(shape)
        call = (lambda: a @ w.t()) if who == "torch" else (lambda: kernels.matmul(a, w.t(), **tile.kwargs()))
        _timed[key] = helpers.time_call(call)
    return _timed[key]


def ms(who, shape, tile=kernels.DEFAULT_TILE):
    """The clock for ratios: GPU time on a GPU, the interpreter's wall time in CPU mode."""
    t = timed(who, shape, tile)
    return t.gpu_ms if helpers.HAS_GPU else t.host_ms


def against(v, other):
    """A verdict in a sentence: '7.31x slower than PyTorch', or 'within noise of PyTorch'."""
    return f"{v.text} than {other}" if v.real else f"within noise of {other}"


def work(shape):
    M, K, N = shape
    return 2 * M * N * K, (M * K + K * N + M * N) * E  # FLOPs, minimum bytes


def per_s(amount, gpu_ms):
    return None if gpu_ms is None else amount / (gpu_ms * 1e-3)


SHAPES = {"model shape": SIZES.matmul_shape, "decode shape": SIZES.matmul_decode_shape}
rows = []
for label, shape in SHAPES.items():
    t_torch, t_ours = timed("torch", shape), timed("triton", shape)
    flops, nbytes = work(shape)
    rows.append({"shape": label, "M x K x N": " x ".join(map(str, shape)),
                 "PyTorch GPU ms": t_torch.gpu_ms, "Triton GPU ms": t_ours.gpu_ms,
                 f"Triton / PyTorch ({CLOCK})": ms("triton", shape) / ms("torch", shape),
                 f"PyTorch {'host' if helpers.HAS_GPU else 'interpreter'} ms": t_torch.host_ms,
                 f"Triton {'host' if helpers.HAS_GPU else 'interpreter'} ms": t_ours.host_ms,
                 "kernels per call (PyTorch, Triton)": f"{helpers.fmt(t_torch.launches if helpers.HAS_GPU else None, 0)}, "
                                                       f"{t_ours.launches:.0f}",
                 "PyTorch TFLOP/s": per_s(flops / 1e12, t_torch.gpu_ms),
                 "Triton TFLOP/s": per_s(flops / 1e12, t_ours.gpu_ms),
                 "PyTorch GB/s": per_s(nbytes / 1e9, t_torch.gpu_ms),
                 "Triton GB/s": per_s(nbytes / 1e9, t_ours.gpu_ms)})
timings = pd.DataFrame(rows).set_index("shape")
model_shape, decode_shape = SIZES.matmul_shape, SIZES.matmul_decode_shape

helpers.record("matmul.torch_ms", timed("torch", model_shape).gpu_ms, "ms",
               f"torch a @ w.t(), {model_shape}, GPU time")
helpers.record("matmul.triton_ms", timed("triton", model_shape).gpu_ms, "ms",
               f"Triton matmul, {model_shape}, tile {kernels.DEFAULT_TILE.name}, GPU time")
helpers.record("matmul.decode_torch_ms", timed("torch", decode_shape).gpu_ms, "ms",
               f"torch a @ w.t(), {decode_shape}, GPU time")
helpers.record("matmul.decode_triton_ms", timed("triton", decode_shape).gpu_ms, "ms",
               f"Triton matmul, {decode_shape}, tile {kernels.DEFAULT_TILE.name}, GPU time")
helpers.record("matmul.host_decode_torch_ms", timed("torch", decode_shape).host_ms, "ms",
               f"torch a @ w.t(), {decode_shape}, {timed('torch', decode_shape).host_clock}")
helpers.record("matmul.host_decode_triton_ms", timed("triton", decode_shape).host_ms, "ms",
               f"Triton matmul, {decode_shape}, tile {kernels.DEFAULT_TILE.name}, "
               f"{timed('triton', decode_shape).host_clock}")
helpers.show(timings.round(4).fillna("n/a (CPU)"))

# %%
model_v = helpers.verdict(ms("triton", model_shape) / ms("torch", model_shape))
decode_v = helpers.verdict(ms("triton", decode_shape) / ms("torch", decode_shape))
host_v = helpers.verdict(timed("triton", decode_shape).host_ms / timed("torch", decode_shape).host_ms)
B = helpers.blog  # the blog's T4 figures, by result id
text = (
    f"On the {CLOCK} clock, at the model shape our kernel took **{ms('triton', model_shape):.4f} ms** against "
    f"PyTorch's **{ms('torch', model_shape):.4f} ms**: {against(model_v, 'PyTorch')}. At the decode shape, "
    f"{ms('triton', decode_shape):.4f} against {ms('torch', decode_shape):.4f} {CLOCK} ms: "
    f"{against(decode_v, 'PyTorch')}"
)
if helpers.HAS_GPU:
    text += (f", with our kernel reading the weights at {timings.loc['decode shape', 'Triton GB/s']:.3g} GB/s "
             f"against PyTorch's {timings.loc['decode shape', 'PyTorch GB/s']:.3g} GB/s. On the host clock, one "
             f"decode-shape call cost {1e3 * timed('triton', decode_shape).host_ms:.1f} µs through our launcher "
             f"against {1e3 * timed('torch', decode_shape).host_ms:.1f} µs for PyTorch's: "
             f"{against(host_v, 'PyTorch')}. ")
else:
    text += (". (In CPU mode that compares the Triton interpreter with PyTorch's compiled CPU code: read the "
             "method, not the numbers.) ")
text += (
    f"The blog measured {B('matmul.triton_ms')} ms against PyTorch's {B('matmul.torch_ms')} ms "
    f"({B('matmul.triton_ms') / B('matmul.torch_ms'):.2f}x slower) at a 'model-shaped input' on a T4, with "
    "64 x 64 tiles and BLOCK_K 32, the default tile here; it timed with `triton.testing.do_bench`, whose "
    "clock mixes host and GPU time for calls this short."
)
helpers.md(text)

# %% [markdown]
# ## One row in a 64-row tile: sweeping the tiles at the decode shape
#
# At the decode shape $M = 1$. A tile of `BLOCK_M = 64` rows has one real row and 63 rows of padding:
# the masks make those rows load zeros instead of memory, so they cost no bytes, but `tl.dot` still
# multiplies them, and the accumulator still holds them. Only $1/64$ of the arithmetic is useful.
#
# The sweep below times every configuration of `kernels.TILE_CONFIGS` (the project's one list, all of
# them safe on a T4) at the decode shape, on the GPU clock (the default tile's line is the decode timing
# above, not a second measurement). For each it also lists how many programs the grid has and what
# fraction of the computed outputs is real. Two things could matter:
#
# - **wasted arithmetic** grows with `BLOCK_M`: if the GPU's arithmetic is slow (a T4 running Triton's
#   `tl.dot` without tensor cores), tall tiles should be slower;
# - **parallelism**: with one row, the grid is `cdiv(N, BLOCK_N)` programs. Wide tiles make few programs,
#   and a GPU with more multiprocessors than programs leaves some idle while the weights are read.

# %%
MS_COL = f"{CLOCK} ms"


def tile_row(tile, shape):
    """One line of the tile table: the tile, its grid, and its timing (from timed: measured once)."""
    M, K, N = shape
    t = timed("triton", shape, tile)
    programs = triton.cdiv(M, tile.block_m) * triton.cdiv(N, tile.block_n)
    row = {"tile": tile.name, "block_m": tile.block_m, "block_n": tile.block_n, "block_k": tile.block_k,
           "num_warps": tile.num_warps, "programs": programs, "K steps": triton.cdiv(K, tile.block_k),
           "useful %": 100 * M * N / (programs * tile.block_m * tile.block_n), MS_COL: ms("triton", shape, tile)}
    if helpers.HAS_GPU:
        row["host ms"] = t.host_ms
        row["GB/s"] = work(shape)[1] / (t.gpu_ms * 1e-3) / 1e9
    row["vs PyTorch"] = row[MS_COL] / ms("torch", shape)
    return row


tiles = pd.DataFrame([tile_row(t, decode_shape)
                      for t in helpers.progress(kernels.TILE_CONFIGS.values(), desc="tile sweep")])
decode_torch_ms = ms("torch", decode_shape)
helpers.save_sweep(tiles, "matmul_tile_sweep")
helpers.show(tiles.round(4))

# %%
fig, ax = plt.subplots(figsize=(9, 4.5))
block_ms = sorted(tiles["block_m"].unique())
colors = {bm: plt.cm.viridis(0.1 + 0.8 * i / max(1, len(block_ms) - 1)) for i, bm in enumerate(block_ms)}
ax.barh(tiles["tile"], tiles[MS_COL], color=[colors[bm] for bm in tiles["block_m"]])
torch_line = ax.axvline(decode_torch_ms, color="crimson", ls="--", label=f"PyTorch: {decode_torch_ms:.4f} {CLOCK} ms")
dM, dK, dN = decode_shape  # helpers.SIZES gives shapes as (M, K, N): x[M, K] @ W[N, K]^T
ax.set(xlabel=f"{CLOCK} time per call (ms)", ylabel="tile (m_n_k: BLOCK_M, BLOCK_N, BLOCK_K)",
       title=f"Which tile suits a one-row matmul? (x[M, K] @ W[N, K]$^T$, M = {dM}, K = {dK}, N = {dN})")
ax.grid(True, axis="x", alpha=0.3)
bar_keys = [Patch(facecolor=c, label=f"BLOCK_M = {bm}") for bm, c in colors.items()]  # the bars' own colours
ax.legend(handles=[torch_line, *bar_keys], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
fig.tight_layout()
helpers.save_figure(fig, "matmul_tile_sweep")
plt.show()

# %%
best, worst = tiles.loc[tiles[MS_COL].idxmin()], tiles.loc[tiles[MS_COL].idxmax()]
by_m = tiles.groupby("block_m")[MS_COL].median()
short_ms = tiles.loc[tiles["block_m"] <= 32, MS_COL].median()  # tiles of 16 or 32 rows
tall_ms = tiles.loc[tiles["block_m"] >= 64, MS_COL].median()  # tiles of 64 or 128 rows
sms = torch.cuda.get_device_properties(0).multi_processor_count if DEVICE.type == "cuda" else None
default = tiles.set_index("tile").loc[kernels.DEFAULT_TILE.name]
spread_v = helpers.verdict(worst[MS_COL] / best[MS_COL])
tall_v = helpers.verdict(tall_ms / short_ms)
best_v = helpers.verdict(best[MS_COL] / decode_torch_ms)


def describe(row):
    programs, steps = int(row["programs"]), int(row["K steps"])
    return f"{programs} program{'s' * (programs != 1)}, {steps} K step{'s' * (steps != 1)} each"


text = (
    f"The fastest tile was **{best['tile']}** ({best[MS_COL]:.4f} {CLOCK} ms; {describe(best)}), the slowest "
    f"**{worst['tile']}** ({worst[MS_COL]:.4f} {CLOCK} ms; {describe(worst)}): slowest against fastest, "
    f"**{spread_v.text}**, from the tile alone, for the same result. The default tile "
    f"{kernels.DEFAULT_TILE.name} took {default[MS_COL]:.4f} {CLOCK} ms ({describe(default)}), with "
    f"{default['useful %']:.1f}% of its arithmetic useful. Median time by BLOCK_M: "
    + ", ".join(f"{bm}: {t:.4f} {CLOCK} ms" for bm, t in by_m.items()) + ". "
)
if helpers.MODE == "cpu":
    text += ("In the interpreter a tile's time follows how many programs and K steps numpy has to run, not "
             "what a GPU would do: read the method here, and the comparison on a GPU run. ")
elif tall_v.real and tall_v.ratio > 1:
    text += (f"Tall tiles (64 or 128 rows) against short ones (16 or 32), in the median: **{tall_v.text}**. "
             "The arithmetic spent on padding rows is a cost this GPU feels. ")
elif tall_v.real:
    text += (f"Tall tiles (64 or 128 rows) against short ones (16 or 32), in the median: **{tall_v.text}**. "
             "The wasted arithmetic costs less here than what the tile shape does to the grid and the K loop. ")
else:
    text += ("Tall tiles (64 or 128 rows) and short ones (16 or 32) are within noise of each other in the "
             "median: the padding rows cost no memory traffic, and this GPU has arithmetic to spare, so the "
             "wasted work mostly hides; what separates the fastest tile from the slowest is the rest of its "
             "shape, the number of programs and the length of each program's K loop. ")
if sms:
    text += (f"This GPU has {sms} multiprocessors, and the default tile's grid has {int(default['programs'])} "
             "programs" + (": part of the GPU sits idle. " if default["programs"] < sms else ". "))
text += f"The best tile is {against(best_v, 'PyTorch')} at this shape"
if helpers.MODE == "cpu":
    text += ". "
elif best_v.real and best_v.ratio > 1:
    text += ", so no tile choice closes the gap. "
elif best_v.real:
    text += ": a well-chosen tile is enough to beat PyTorch here. "
else:
    text += ": a well-chosen tile is enough to match it. "
text += "The blog's own table of this sweep did not survive in its text."
helpers.md(text)

# %% [markdown]
# ## Explore the tiles yourself
#
# Pick a configuration (and a shape). A pair of tile and shape is timed the first time it is asked for
# and remembered, so the explorer shows the same number as the table above for every tile the sweep
# timed. In a non-interactive run (a script, or a headless notebook run) the cell shows the default tile
# once; without `ipywidgets` it shows every configuration in a loop instead.

# %%
try:
    import ipywidgets as widgets
    from IPython.display import display
except ImportError:
    widgets = None

explorer_shapes = {"decode": decode_shape, "model": model_shape}


def explore(tile_name, shape_name="decode"):
    """One tile on one shape, from the same measurement as the tables, in a one-line summary."""
    shape = explorer_shapes[shape_name]
    row = tile_row(kernels.TILE_CONFIGS[tile_name], shape)
    host = f", {1e3 * row['host ms']:.1f} µs host time per call" if helpers.HAS_GPU else ""
    print(f"{tile_name:>14} on the {shape_name} shape {shape}: {row[MS_COL]:.4f} {CLOCK} ms{host}, "
          f"{row['programs']} programs, {row['useful %']:.1f}% of the tile arithmetic useful, "
          f"{against(helpers.verdict(row['vs PyTorch']), 'PyTorch')} ({CLOCK} time)")


explore(kernels.DEFAULT_TILE.name)  # the non-interactive default
if widgets is not None and helpers.IN_NOTEBOOK:
    tile_picker = widgets.Dropdown(options=list(kernels.TILE_CONFIGS), value=kernels.DEFAULT_TILE.name,
                                   description="tile")
    shape_picker = widgets.ToggleButtons(options=list(explorer_shapes), value="decode", description="shape")
    explorer_out = widgets.Output()

    def on_change(_change):
        with explorer_out:
            explorer_out.clear_output(wait=True)
            explore(tile_picker.value, shape_picker.value)

    tile_picker.observe(on_change, names="value")
    shape_picker.observe(on_change, names="value")
    display(widgets.VBox([widgets.HBox([tile_picker, shape_picker]), explorer_out]))
elif widgets is None:
    for name in kernels.TILE_CONFIGS:
        if name != kernels.DEFAULT_TILE.name:
            explore(name)

# %% [markdown]
# ## The projections of the model
#
# Now the kernel goes into the model, in three steps:
#
# 1. the **attention projections**, q, k, v, o in each layer (112 in the full-size model's 28 layers);
# 2. the **MLP projections** as well, gate, up, down (84 in the full-size model);
# 3. **`lm_head`** and all the **RMSNorms** (113 in the full-size model; two-pass, from chapter 3) on top.
#
# All use the default tile, 64 x 64 x 32, as the blog did. The three steps and the original are measured
# together by `helpers.compare_configs`: in each of several rounds every configuration generates once, in
# a shuffled order, and each one's time is divided by the original's time of the same round. The original
# also runs against itself: that A/A ratio is this run's noise floor, and a step whose ratio does not
# stand out of it is "within noise". Tokens/s there is new tokens over the whole generation time, prefill
# included. Separately, `helpers.profile_decode` profiles a few decode steps of the original and of the
# last step: kernels launched per token, GPU-busy ms and wall ms per decoded token (prefill excluded).
#
# Predict first: each replaced linear layer is still one launch per token (PyTorch's is one cuBLAS kernel,
# ours one Triton kernel), so the number of launches barely moves for the projection steps; what changes
# is the cost of each launch on the host, and the kernel time at one row, which the decode timings above
# compared with PyTorch's. If the host's extra time per call adds up call by call, each projection step
# costs (projections swapped) x (the difference in host time per call at the decode shape) per token. The
# projections read almost all of the model's weights, so if the GPU were the bottleneck this would be the
# most expensive swap of all; the next cell prints both predictions against the original's time per token.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
L = model.config.num_hidden_layers
STEPS = {
    "attention proj": dict(projections={"attention"}),
    "attention + MLP proj": dict(projections={"attention", "mlp"}),
    "all proj + RMSNorm": dict(rmsnorm="two_pass", projections=set(helpers.PROJECTION_GROUPS)),
}
replaced = {}
for name, patch in STEPS.items():  # what each step swaps (no generation here)
    with helpers.patched(model, **patch) as counts:
        replaced[name] = dict(counts)
assert [replaced[s]["attention_proj"] for s in STEPS] == [4 * L] * 3
assert [replaced[s]["mlp_proj"] for s in STEPS] == [0, 3 * L, 3 * L]
assert [replaced[s]["lm_head"] for s in STEPS] == [0, 0, 1]
assert [replaced[s]["rmsnorm"] for s in STEPS] == [0, 0, census["rmsnorm"]]

prof_original = helpers.profile_decode(model, SIZES.prompt_len, tokenizer=tokenizer)
wall0 = prof_original.wall_ms_per_token
extra_host_us = 1e3 * (timed("triton", decode_shape).host_ms - timed("torch", decode_shape).host_ms)
extra_gpu_us = (1e3 * (timed("triton", decode_shape).gpu_ms - timed("torch", decode_shape).gpu_ms)
                if helpers.HAS_GPU else None)
print(f"original model: {wall0:.2f} wall ms per decoded token, "
      f"{helpers.fmt(prof_original.gpu_busy_ms_per_token, 2)} GPU-busy ms per token, "
      f"{helpers.fmt(prof_original.launches_per_token, 0)} kernels per token")
predicted = {}
for name, n in (("attention proj", 4 * L), ("attention + MLP proj", 7 * L)):
    predicted[name] = (wall0 + n * extra_host_us / 1e3) / wall0
    gpu_part = ("" if extra_gpu_us is None else
                f"; on the GPU, {n} x {extra_gpu_us:+.1f} µs = {n * extra_gpu_us / 1e3:+.2f} ms of kernel time")
    print(f"{name}: host {n} x {extra_host_us:+.1f} µs = {n * extra_host_us / 1e3:+.2f} ms per token, a time "
          f"ratio of {predicted[name]:.2f}{gpu_part}")

# %%
with helpers.patched(model, **STEPS["all proj + RMSNorm"]) as counts:
    prof_all = helpers.profile_decode(model, SIZES.prompt_len, tokenizer=tokenizer)
replaced_linear = counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]
# every replaced module runs once per token: one launch per projection, two per two-pass RMSNorm
assert abs(prof_all.project_launches_per_token - (replaced_linear + 2 * counts["rmsnorm"])) < 1e-9

comparison = helpers.compare_configs(model, STEPS, tokenizer=tokenizer)
verdicts = {
    "attention proj": comparison.record("attention proj", "matmul.attention_proj_slowdown",
                                        "112 attention projections on the Triton matmul"),
    "attention + MLP proj": comparison.record("attention + MLP proj", "matmul.attention_mlp_slowdown",
                                              "attention + MLP projections"),
    "all proj + RMSNorm": comparison.record("all proj + RMSNorm", "matmul.all_proj_rmsnorm_slowdown",
                                            "all projections incl. lm_head + two-pass RMSNorm"),
}
tps = comparison.tokens_per_s
rounds_note = f"median of {len(comparison.orders)} shuffled rounds"
helpers.record("matmul.tps_original", tps[helpers.ORIGINAL], "tokens/s",
               f"{rounds_note}; prompt {SIZES.prompt_len}, {SIZES.new_tokens} new")
helpers.record("matmul.attention_proj_replaced", replaced["attention proj"]["attention_proj"], "modules",
               "q, k, v, o per layer")
helpers.record("matmul.tps_attention_proj", tps["attention proj"], "tokens/s",
               f"attention projections on the Triton matmul; {rounds_note}")
helpers.record("matmul.tps_attention_mlp_proj", tps["attention + MLP proj"], "tokens/s",
               f"attention + MLP projections; {rounds_note}")
helpers.record("matmul.tps_all_proj_rmsnorm", tps["all proj + RMSNorm"], "tokens/s",
               f"all projections incl. lm_head + two-pass RMSNorm; {rounds_note}")
helpers.record("matmul.launches_per_token_all_proj_rmsnorm", prof_all.launches, "launches",
               helpers.launch_note() + ", all projections + two-pass RMSNorm")

steps_df = comparison.table()
steps_df["predicted ratio (host time)"] = [f"{predicted[c]:.2f}" if c in predicted else ""
                                           for c in steps_df["configuration"]]
helpers.show(steps_df.round(3))
helpers.show(pd.DataFrame([
    {"model": label, "kernels per token": helpers.fmt(p.launches_per_token, 0),
     "Triton launches per token": p.project_launches_per_token,
     "wall ms per decoded token": round(p.wall_ms_per_token, 3),
     "GPU-busy ms per decoded token": helpers.fmt(p.gpu_busy_ms_per_token, 3)}
    for label, p in (("original", prof_original), ("all proj + RMSNorm", prof_all))
]))

# %%
order = [helpers.ORIGINAL_AGAIN, *STEPS]
short = {helpers.ORIGINAL_AGAIN: "original\n(again)", "attention proj": "attn proj",
         "attention + MLP proj": "+ MLP proj", "all proj + RMSNorm": "+ lm_head\n+ RMSNorm"}
fig, (ax_tps, ax_r) = plt.subplots(1, 2, figsize=(11, 4))
ax_tps.bar(["original", *(short[s] for s in STEPS)], [tps[helpers.ORIGINAL], *(tps[s] for s in STEPS)],
           color="tab:blue")
ax_tps.set(ylabel=f"tokens/s (median of {len(comparison.orders)} rounds)",
           title="How many tokens per second after each swap?")
med = [comparison.ratios[s].median for s in order]
err = [[m - comparison.ratios[s].low for s, m in zip(order, med)],
       [comparison.ratios[s].high - m for s, m in zip(order, med)]]
ax_r.bar([short[s] for s in order], med, yerr=err, capsize=4,
         color=["tab:gray" if s == helpers.ORIGINAL_AGAIN else "tab:orange" for s in order])
noise = helpers.noise_threshold(comparison.floor)  # helpers.verdict: real above 1 + noise or below 1 / (1 + noise)
ax_r.axhspan(1 / (1 + noise), 1 + noise, color="tab:gray", alpha=0.2,
             label=f"noise threshold ({1 / (1 + noise):.2f}-{1 + noise:.2f})")
ax_r.axhline(1.0, color="black", lw=0.8)
ax_r.set(ylabel="time ratio to the original (median, quartiles)", title="How much slower is each step?")
ax_r.legend(fontsize=8)
for ax in (ax_tps, ax_r):
    ax.grid(True, axis="y", alpha=0.3)
fig.suptitle(f"Qwen3, {description}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)", fontsize=9)
fig.tight_layout()
helpers.save_figure(fig, "matmul_model_steps")
plt.show()

# %%
floor = comparison.floor


def step(name):
    r, v = comparison.ratios[name], verdicts[name]
    return f"**{tps[name]:.2f}** (time ratio {r.median:.2f}, quartiles {r.low:.2f}-{r.high:.2f}: **{v.text}**)"


text = (
    f"Over {len(comparison.orders)} shuffled rounds the original model ran at a median **"
    f"{tps[helpers.ORIGINAL]:.2f} tokens/s**, and the original against itself gave a time ratio of "
    f"{floor.median:.3f} ({floor.low:.2f}-{floor.high:.2f}): the run's noise floor. With the {4 * L} attention "
    f"projections on our matmul: {step('attention proj')}; with the {3 * L} MLP projections too: "
    f"{step('attention + MLP proj')}; with `lm_head` and the two-pass RMSNorms on top: "
    f"{step('all proj + RMSNorm')}. From the host time per call, the prediction was a time ratio of "
    f"{predicted['attention proj']:.2f} for the attention projections and "
    f"{predicted['attention + MLP proj']:.2f} with the MLP projections too. "
)
if prof_original.launches_per_token is not None:
    l0, l3 = prof_original.launches_per_token, prof_all.launches_per_token
    hidden = torch.randn(1, 1, model.config.hidden_size, device=DEVICE, dtype=DTYPE)
    with torch.no_grad():  # kernels one call of the model's own (PyTorch) final RMSNorm launches
        norm_launches = helpers.launches_per_call(lambda: model.model.norm(hidden))
    from_norms = counts["rmsnorm"] * (2 - norm_launches)
    from_linear = l3 - l0 - from_norms
    text += (
        f"Launches per token went from {l0:.0f} (original) to {l3:.0f} (last step), {l3 - l0:+.0f}. Of that, "
        f"the RMSNorm swap accounts for {counts['rmsnorm']} x (2 - {norm_launches:.0f}) = {from_norms:+.0f} "
        f"(one of PyTorch's RMSNorms launches {norm_launches:.0f} kernels, ours 2), which leaves "
        f"{from_linear:+.0f} for the {replaced_linear} projections, {100 * from_linear / l0:+.1f}% of the "
        "original's count"
        + (": as predicted, the projection swaps change what each launch costs, on the host and on the GPU, "
           "not how many launches there are. " if abs(from_linear) < helpers.MIN_EFFECT * l0 else
           ": more than the one-launch-for-one prediction allows, so on this machine the projection swaps "
           "changed the number of launches too, not only what each costs. ")
    )
text += (
    f"The blog's T4 figures for the same steps, each from a single run: {B('matmul.tps_original'):g} -> "
    f"{B('matmul.tps_attention_proj'):g} tokens/s for the attention projections (rounded in the post, about "
    f"{B('matmul.tps_original') / B('matmul.tps_attention_proj'):.2f}x), {B('matmul.attention_mlp_slowdown')}x "
    f"slower with the MLP projections too, and {B('matmul.tps_all_proj_rmsnorm_original')} -> "
    f"{B('matmul.tps_all_proj_rmsnorm')} tokens/s "
    f"({B('matmul.tps_all_proj_rmsnorm_original') / B('matmul.tps_all_proj_rmsnorm'):.2f}x) with everything "
    "including RMSNorm. Note the inconsistency in the post: adding lm_head and the RMSNorms made its model "
    f"*less* slow than the projections alone "
    f"({B('matmul.tps_all_proj_rmsnorm_original') / B('matmul.tps_all_proj_rmsnorm'):.2f}x after "
    f"{B('matmul.attention_mlp_slowdown')}x), which more slow modules should not do; the two figures "
    "probably come from separate runs with their own originals. "
)
# the last step against the one before, round by round (both timed in every round)
last = helpers.Ratio.of([t / b for t, b in zip(comparison.seconds["all proj + RMSNorm"],
                                               comparison.seconds["attention + MLP proj"])])
last_v = helpers.verdict(last, floor)
text += (f"In your run, the last step's time over the step before it, round by round, had a median of "
         f"{last.median:.2f} ({last.low:.2f}-{last.high:.2f}): **{last_v.text}**. ")
if not last_v.real:
    text += "Adding `lm_head` and the RMSNorms made no difference this run can tell from its noise."
elif last_v.ratio < 1 and prof_original.launches_per_token is not None and from_norms < 0:
    text += (f"The last step has more of our kernels and is still faster; the RMSNorm swap removed "
             f"{-from_norms:.0f} launches per token, the likely reason (chapter 3 measured that swap on its own).")
elif last_v.ratio < 1:
    text += ("The last step has more of our kernels and is still faster: worth a second run before reading "
             "anything into it (chapter 3 measured what the two-pass RMSNorm alone does).")
else:
    text += "More of our kernels, a slower model, as adding them suggests."
helpers.md(text)

# %% [markdown]
# ## Your numbers beside the blog's

# %%
helpers.show(helpers.compare("matmul."))

# %% [markdown]
# ## Takeaway
#
# - A tiled matmul gives each program one output tile and walks K in chunks, accumulating in fp32.
# - Checked against PyTorch it agrees to within rounding; how it compares with cuBLAS in time depends on
#   the shape, the GPU and the clock, and the timings above are your hardware's answer.
# - The tile shape changes the GPU time of the very same computation: at one row, most of a tall tile is
#   padding, and the grid's number of programs decides how much of the GPU takes part.
# - In the model, each projection is one launch before the swap and one after, so the count of launches
#   is not where a projection swap can cost; what each launch costs is. Whether a step's cost stands out
#   of the machine's noise is for an interleaved comparison with an A/A floor to say, not for one pair
#   of runs.
#
# Next, in chapter 5, attention itself.
