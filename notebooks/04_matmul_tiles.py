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
# - what happens to tokens/s when the model's 197 linear layers, and then its RMSNorms too, use our kernels.

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
# with PyTorch's own matmul in the same dtype (the blog's "max fp16 error") and with an fp32 reference for
# the pass/fail line. Both kernels accumulate in fp32 and round once at the end, but in a different
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
reference = a.float() @ w.float().t()
max_err = (ours.float() - theirs.float()).abs().max().item()
err_ref = (ours.float() - reference).abs().max().item()
tol = REL_TOL[DTYPE] * reference.abs().max().item()
helpers.record("matmul.max_err", max_err, "abs", f"max |Triton - torch|, {SIZES.matmul_shape}, {str(DTYPE)[6:]}")
print(f"[{M}, {K}] @ [{K}, {N}] {str(DTYPE)[6:]}, tile {kernels.DEFAULT_TILE.name}")
print(f"max |ours - torch| = {max_err:.5g}   max |ours - fp32 reference| = {err_ref:.5g} (tolerance {tol:.3g})")
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
# For each we also compute the work (FLOPs, $2MNK$) and the minimum bytes (read $A$ and $B$ once, write
# $C$ once). At one row the weight alone is almost all the bytes and the arithmetic is tiny, so the
# decode matmul is a memory problem: reading $K \times N$ weights as fast as possible.

# %%
def time_pair(shape, tile=kernels.DEFAULT_TILE, seed=0):
    """Median ms of torch and of our kernel on a[M, K] @ w[N, K].T."""
    a, w = make_operands(shape, seed)
    return (helpers.bench_ms(lambda: a @ w.t()),
            helpers.bench_ms(lambda: kernels.matmul(a, w.t(), **tile.kwargs())))


def work(shape):
    M, K, N = shape
    return 2 * M * N * K, (M * K + K * N + M * N) * E  # FLOPs, minimum bytes


rows = []
for label, shape in (("model shape", SIZES.matmul_shape), ("decode shape", SIZES.matmul_decode_shape)):
    torch_ms, triton_ms = time_pair(shape)
    flops, nbytes = work(shape)
    rows.append({"shape": label, "M x K x N": " x ".join(map(str, shape)), "torch_ms": torch_ms,
                 "triton_ms": triton_ms, "ratio": triton_ms / torch_ms,
                 "torch TFLOP/s": flops / (torch_ms * 1e-3) / 1e12,
                 "triton TFLOP/s": flops / (triton_ms * 1e-3) / 1e12,
                 "torch GB/s": nbytes / (torch_ms * 1e-3) / 1e9,
                 "triton GB/s": nbytes / (triton_ms * 1e-3) / 1e9})
timings = pd.DataFrame(rows)
model_row, decode_row = timings.iloc[0], timings.iloc[1]

helpers.record("matmul.torch_ms", model_row["torch_ms"], "ms", f"torch a @ w.t(), {SIZES.matmul_shape}")
helpers.record("matmul.triton_ms", model_row["triton_ms"], "ms",
               f"Triton matmul, {SIZES.matmul_shape}, tile {kernels.DEFAULT_TILE.name}")
helpers.record("matmul.decode_torch_ms", decode_row["torch_ms"], "ms", f"{SIZES.matmul_decode_shape}")
helpers.record("matmul.decode_triton_ms", decode_row["triton_ms"], "ms",
               f"{SIZES.matmul_decode_shape}, tile {kernels.DEFAULT_TILE.name}")
helpers.show(timings.round(4))

# %%
versus = helpers.versus  # "1.23x slower" / "1.23x faster", from two times


helpers.md(
    f"At the model shape our kernel took **{model_row['triton_ms']:.4f} ms** against PyTorch's "
    f"**{model_row['torch_ms']:.4f} ms**: {versus(model_row['triton_ms'], model_row['torch_ms'])}. "
    f"At the decode shape, {decode_row['triton_ms']:.4f} against {decode_row['torch_ms']:.4f} ms: "
    f"{versus(decode_row['triton_ms'], decode_row['torch_ms'])}, with our kernel reading the weights at "
    f"{decode_row['triton GB/s']:.3g} GB/s against PyTorch's {decode_row['torch GB/s']:.3g} GB/s. "
    f"The blog measured {helpers.blog('matmul.triton_ms')} ms against PyTorch's {helpers.blog('matmul.torch_ms')} "
    f"ms ({helpers.blog('matmul.triton_ms') / helpers.blog('matmul.torch_ms'):.2f}x slower) at a 'model-shaped "
    "input' on a T4, "
    "with 64 x 64 tiles and BLOCK_K 32, the default tile here."
)

# %% [markdown]
# ## One row in a 64-row tile: sweeping the tiles at the decode shape
#
# At the decode shape $M = 1$. A tile of `BLOCK_M = 64` rows has one real row and 63 rows of padding:
# the masks make those rows load zeros instead of memory, so they cost no bytes, but `tl.dot` still
# multiplies them, and the accumulator still holds them. Only $1/64$ of the arithmetic is useful.
#
# The sweep below times every configuration of `kernels.TILE_CONFIGS` (the project's one list, all of
# them safe on a T4) at the decode shape. For each it also lists how many programs the grid has and what
# fraction of the computed outputs is real. Two things could matter:
#
# - **wasted arithmetic** grows with `BLOCK_M`: if the GPU's arithmetic is slow (a T4 running Triton's
#   `tl.dot` without tensor cores), tall tiles should be slower;
# - **parallelism**: with one row, the grid is `cdiv(N, BLOCK_N)` programs. Wide tiles make few programs,
#   and a GPU with more multiprocessors than programs leaves some idle while the weights are read.

# %%
def time_tile(tile, shape):
    """Time our kernel with one tile configuration on a[M, K] @ w[N, K].T; describe the grid."""
    M, K, N = shape
    a, w = make_operands(shape)
    ms = helpers.bench_ms(lambda: kernels.matmul(a, w.t(), **tile.kwargs()))
    programs = triton.cdiv(M, tile.block_m) * triton.cdiv(N, tile.block_n)
    return {"tile": tile.name, "block_m": tile.block_m, "block_n": tile.block_n, "block_k": tile.block_k,
            "num_warps": tile.num_warps, "programs": programs, "K steps": triton.cdiv(K, tile.block_k),
            "useful %": 100 * M * N / (programs * tile.block_m * tile.block_n), "ms": ms,
            "GB/s": work(shape)[1] / (ms * 1e-3) / 1e9}


decode_shape = SIZES.matmul_decode_shape
tiles = pd.DataFrame([time_tile(t, decode_shape)
                      for t in helpers.progress(kernels.TILE_CONFIGS.values(), desc="tile sweep")])
decode_torch_ms = decode_row["torch_ms"]
tiles["vs torch"] = tiles["ms"] / decode_torch_ms
helpers.save_sweep(tiles, "matmul_tile_sweep")
helpers.show(tiles.round(4))

# %%
fig, ax = plt.subplots(figsize=(9, 4.5))
block_ms = sorted(tiles["block_m"].unique())
colors = {bm: plt.cm.viridis(0.1 + 0.8 * i / max(1, len(block_ms) - 1)) for i, bm in enumerate(block_ms)}
ax.barh(tiles["tile"], tiles["ms"], color=[colors[bm] for bm in tiles["block_m"]])
torch_line = ax.axvline(decode_torch_ms, color="crimson", ls="--", label=f"PyTorch: {decode_torch_ms:.4f} ms")
dM, dK, dN = decode_shape  # helpers.SIZES gives shapes as (M, K, N): x[M, K] @ W[N, K]^T
ax.set(xlabel="time per call (ms)", ylabel="tile (m_n_k: BLOCK_M, BLOCK_N, BLOCK_K)",
       title=f"Which tile suits a one-row matmul? (x[M, K] @ W[N, K]$^T$, M = {dM}, K = {dK}, N = {dN})")
ax.grid(True, axis="x", alpha=0.3)
bar_keys = [Patch(facecolor=c, label=f"BLOCK_M = {bm}") for bm, c in colors.items()]  # the bars' own colours
ax.legend(handles=[torch_line, *bar_keys], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
fig.tight_layout()
helpers.save_figure(fig, "matmul_tile_sweep")
plt.show()

# %%
best, worst = tiles.loc[tiles["ms"].idxmin()], tiles.loc[tiles["ms"].idxmax()]
by_m = tiles.groupby("block_m")["ms"].median()
short_ms = tiles.loc[tiles["block_m"] <= 32, "ms"].median()  # tiles of 16 or 32 rows
tall_ms = tiles.loc[tiles["block_m"] >= 64, "ms"].median()  # tiles of 64 or 128 rows
sms = torch.cuda.get_device_properties(0).multi_processor_count if DEVICE.type == "cuda" else None
default = tiles.set_index("tile").loc[kernels.DEFAULT_TILE.name]


def describe(row):
    programs, steps = int(row["programs"]), int(row["K steps"])
    return f"{programs} program{'s' * (programs != 1)}, {steps} K step{'s' * (steps != 1)} each"


text = (
    f"The fastest tile was **{best['tile']}** ({best['ms']:.4f} ms; {describe(best)}), the slowest "
    f"**{worst['tile']}** ({worst['ms']:.4f} ms; {describe(worst)}): a factor of "
    f"**{worst['ms'] / best['ms']:.1f}** from the tile alone, for the same result. The default tile "
    f"{kernels.DEFAULT_TILE.name} took {default['ms']:.4f} ms ({describe(default)}), with "
    f"{default['useful %']:.1f}% of its arithmetic useful. Median time by BLOCK_M: "
    + ", ".join(f"{bm}: {ms:.4f} ms" for bm, ms in by_m.items()) + ". "
)
if helpers.MODE == "cpu":
    text += ("In the interpreter a tile's time follows how many programs and K steps numpy has to run, not "
             "what a GPU would do: read the method here, and the comparison on a GPU run. ")
elif tall_ms > 1.2 * short_ms:
    text += (f"Tall tiles (64 or 128 rows) took {tall_ms / short_ms:.2f}x the time of short ones (16 or 32) "
             "in the median: the arithmetic spent on padding rows is a cost this GPU feels. ")
elif tall_ms < short_ms / 1.2:
    text += (f"Tall tiles were *faster* than short ones in the median ({short_ms / tall_ms:.2f}x): the "
             "wasted arithmetic costs less here than what the tile shape does to the grid and the K loop. ")
else:
    text += ("Tall and short tiles took about the same time in the median: the padding rows cost no memory "
             "traffic, and this GPU has arithmetic to spare, so the wasted work mostly hides; what separates "
             "the fastest tile from the slowest is the rest of its shape, the number of programs and the "
             "length of each program's K loop. ")
if sms:
    text += (f"This GPU has {sms} multiprocessors, and the default tile's grid has {int(default['programs'])} "
             "programs" + (": part of the GPU sits idle. " if default["programs"] < sms else ". "))
text += (f"The best tile is {versus(best['ms'], decode_torch_ms)} than PyTorch at this shape"
         + (", so no tile choice closes the gap. " if best["ms"] > decode_torch_ms else
            ": a well-chosen tile is enough to beat PyTorch here. ")
         + "The blog's own table of this sweep did not survive in its text.")
helpers.md(text)

# %% [markdown]
# ## Explore the tiles yourself
#
# Pick a configuration (and a shape) and the kernel is re-timed on the spot. In a non-interactive run
# (a script, or a headless notebook run) the cell times the default tile once; without `ipywidgets` it
# times every configuration in a loop instead.

# %%
try:
    import ipywidgets as widgets
    from IPython.display import display
except ImportError:
    widgets = None

explorer_shapes = {"decode": SIZES.matmul_decode_shape, "model": SIZES.matmul_shape}
explorer_torch_ms = {"decode": decode_torch_ms, "model": model_row["torch_ms"]}


def explore(tile_name, shape_name="decode"):
    """Re-time one tile on one shape and print a one-line summary."""
    row = time_tile(kernels.TILE_CONFIGS[tile_name], explorer_shapes[shape_name])
    print(f"{tile_name:>14} on the {shape_name} shape {explorer_shapes[shape_name]}: {row['ms']:.4f} ms, "
          f"{row['programs']} programs, {row['useful %']:.1f}% of the tile arithmetic useful, "
          f"{versus(row['ms'], explorer_torch_ms[shape_name])} than PyTorch")


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
# Now the kernel goes into the model, in three steps, each measured for tokens/s and launches per token:
#
# 1. the **attention projections**, q, k, v, o in each layer (112 in the full-size model's 28 layers);
# 2. the **MLP projections** as well, gate, up, down (84 in the full-size model);
# 3. **`lm_head`** and all the **RMSNorms** (113 in the full-size model; two-pass, from chapter 3) on top.
#
# All use the default tile, 64 x 64 x 32, as the blog did. Predict first: each replaced linear layer is
# still one launch per token (PyTorch's is one cuBLAS kernel, ours one Triton kernel), so the number of
# launches barely moves; what changes is the cost of each launch on the host, and the kernel time at one
# row, which the decode timings above compared with PyTorch's. The projections read almost all of the
# model's weights, so if the GPU were the bottleneck this would be the most expensive swap of all.

# %%
model, tokenizer, description = helpers.load_model()
print(description)
census = helpers.module_census(model)
L = model.config.num_hidden_layers

steps = [
    ("original", {}),
    ("attention projections", dict(projections={"attention"})),
    ("attention + MLP projections", dict(projections={"attention", "mlp"})),
    ("all projections + two-pass RMSNorm", dict(projections={"attention", "mlp", "lm_head"}, rmsnorm="two_pass")),
]
results = []
for label, patch in helpers.progress(steps, desc="model steps"):
    with helpers.patched(model, **patch) as counts:
        tps = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
        prof = helpers.profile_decode(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)
    replaced_linear = counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]
    # every replaced module runs once per token: one launch per projection, two per two-pass RMSNorm
    assert abs(prof.project_launches_per_token - (replaced_linear + 2 * counts["rmsnorm"])) < 1e-9
    results.append({"step": label, "attention proj": counts["attention_proj"], "MLP proj": counts["mlp_proj"],
                    "lm_head": counts["lm_head"], "RMSNorm": counts["rmsnorm"],
                    "tokens/s": tps.tokens_per_s, "spread %": tps.spread_pct,
                    "launches per token": prof.launches_per_token,
                    "Triton launches per token": prof.project_launches_per_token,
                    "wall ms per token": prof.wall_ms_per_token,
                    "GPU-busy ms per token": prof.gpu_busy_ms_per_token,
                    "ids": tps.ids})
steps_df = pd.DataFrame(results)
steps_df["same tokens"] = [int((ids == steps_df["ids"][0]).sum()) for ids in steps_df["ids"]]
steps_df["slowdown"] = steps_df["tokens/s"][0] / steps_df["tokens/s"]
steps_df = steps_df.drop(columns="ids")
assert list(steps_df["attention proj"]) == [0, 4 * L, 4 * L, 4 * L]
assert list(steps_df["MLP proj"]) == [0, 0, 3 * L, 3 * L]
assert list(steps_df["lm_head"]) == [0, 0, 0, 1]
assert list(steps_df["RMSNorm"]) == [0, 0, 0, census["rmsnorm"]]
again = helpers.measure_tps(model, SIZES.prompt_len, SIZES.new_tokens, tokenizer=tokenizer)  # drift check
helpers.show(steps_df.round(3).fillna("n/a (CPU)"))
print(f"original model measured again at the end: {again.tokens_per_s:.2f} tokens/s")

# %%
tps_by_step = dict(zip(steps_df["step"], steps_df["tokens/s"]))
original, attn, attn_mlp, everything = (tps_by_step[s] for s, _ in steps)
helpers.record("matmul.tps_original", original, "tokens/s", f"prompt {SIZES.prompt_len}, {SIZES.new_tokens} new")
helpers.record("matmul.attention_proj_replaced", steps_df["attention proj"][1], "modules", "q, k, v, o per layer")
helpers.record("matmul.tps_attention_proj", attn, "tokens/s", "attention projections on the Triton matmul")
helpers.record("matmul.tps_attention_mlp_proj", attn_mlp, "tokens/s", "attention + MLP projections")
helpers.record("matmul.attention_mlp_slowdown", original / attn_mlp, "x slower",
               "original / (attention + MLP projections) tokens/s")
helpers.record("matmul.tps_all_proj_rmsnorm", everything, "tokens/s",
               "all projections incl. lm_head + two-pass RMSNorm")
helpers.record("matmul.launches_per_token_all_proj_rmsnorm", steps_df["launches per token"][3], "launches",
               "all CUDA kernels per decoded token; empty in CPU mode")
print("recorded under matmul.*")

# %%
fig, (ax_tps, ax_l) = plt.subplots(1, 2, figsize=(11, 4))
short = ["original", "attn proj", "+ MLP proj", "+ lm_head\n+ RMSNorm"]
ax_tps.bar(short, steps_df["tokens/s"], color="tab:blue")
ax_tps.set(ylabel="tokens per second", title="How much slower does each swap make the model?")
launch_col = "launches per token" if steps_df["launches per token"].notna().all() else "Triton launches per token"
ax_l.bar(short, steps_df[launch_col], color="tab:orange")
ax_l.set(ylabel=f"{launch_col} (kernels)", title="How many kernels does one token launch?")
for ax in (ax_tps, ax_l):
    ax.grid(True, axis="y", alpha=0.3)
fig.suptitle(f"Qwen3, {description}, {helpers.env_info()['gpu']} ({helpers.MODE} mode)", fontsize=9)
fig.tight_layout()
helpers.save_figure(fig, "matmul_model_steps")
plt.show()

# %%
def slower(tps):
    s = original / tps
    return f"{s:.2f}x slower" if s > 1 else f"{1 / s:.2f}x faster"


drift = abs(again.tokens_per_s - original) / original
ms = {label: 1e3 / tps for label, tps in tps_by_step.items()}  # wall ms per token, from tokens/s
per_attn_us = 1e3 * (ms["attention projections"] - ms["original"]) / (4 * L)
per_mlp_us = 1e3 * (ms["attention + MLP projections"] - ms["attention projections"]) / (3 * L)
text = (
    f"The original model ran at **{original:.2f} tokens/s**. With the {4 * L} attention projections on our "
    f"matmul: **{attn:.2f}** ({slower(attn)}); with the {3 * L} MLP projections too: **{attn_mlp:.2f}** "
    f"({slower(attn_mlp)}); with `lm_head` and the two-pass RMSNorms on top: **{everything:.2f}** "
    f"({slower(everything)}). Per token, each attention projection added {per_attn_us:+.0f} µs and each MLP "
    f"projection {per_mlp_us:+.0f} µs. The original, measured again at the end, ran at "
    f"{again.tokens_per_s:.2f} tokens/s, a drift of {100 * drift:.0f}%: "
    + ("the machine held steady, so the steps can be compared. " if drift < 0.1 else
       f"the machine's speed moved while we measured, so only differences well beyond {100 * drift:.0f}% "
       "mean something in this run. ")
)
launches = steps_df["launches per token"]
B = helpers.blog  # the blog's T4 figures, by result id
if launches.notna().all():
    text += (f"Launches per token went {' -> '.join(f'{v:.0f}' for v in launches)}: "
             + ("almost unchanged by the projection swaps, as predicted, so any change of speed there comes "
                "from what each launch costs (host time and kernel time), not from their number. "
                if abs(launches[2] - launches[0]) < 0.1 * launches[0] else
                "the projection swaps changed the count noticeably. "))
text += (
    f"The blog's T4 figures for the same steps: {B('matmul.tps_original'):g} -> {B('matmul.tps_attention_proj'):g} "
    f"tokens/s for the attention projections (rounded in the post, about "
    f"{B('matmul.tps_original') / B('matmul.tps_attention_proj'):.2f}x), {B('matmul.attention_mlp_slowdown')}x "
    f"slower with the MLP projections too, and {B('matmul.tps_all_proj_rmsnorm_original')} -> "
    f"{B('matmul.tps_all_proj_rmsnorm')} tokens/s ({B('matmul.tps_all_proj_rmsnorm_original') / B('matmul.tps_all_proj_rmsnorm'):.2f}x) "
    "with everything including RMSNorm. Note the inconsistency in the post: adding lm_head and the RMSNorms "
    f"made its model *less* slow than the projections alone ({B('matmul.tps_all_proj_rmsnorm_original') / B('matmul.tps_all_proj_rmsnorm'):.2f}x "
    f"after {B('matmul.attention_mlp_slowdown')}x), which more slow modules "
    "should not do; the two figures probably come from separate runs with their own originals. "
    + ("In your run the last step is slower than the one before it, as adding more of our kernels suggests."
       if everything < attn_mlp else
       f"In your run, too, the last step is {100 * (everything / attn_mlp - 1):.0f}% faster than the one before it"
       + (f", a difference inside this run's {100 * drift:.0f}% drift."
          if abs(everything / attn_mlp - 1) < drift else
          f", more than this run's {100 * drift:.0f}% drift. Fewer launches are the likely reason: the RMSNorm "
          f"swap replaced chains of 8 PyTorch kernels by 2 of ours, and launches per token fell from "
          f"{launches[2]:.0f} to {launches[3]:.0f} (chapter 3 measured that swap on its own)."
          if launches.notna().all() and launches[3] < launches[2] else
          f", more than this run's {100 * drift:.0f}% drift, so worth a second run before reading anything "
          "into it (chapter 3 measured what the two-pass RMSNorm alone does to this machine's tokens/s)."))
)
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
#   the shape and the GPU, and the timings above are your hardware's answer.
# - The tile shape changes the time of the very same computation: at one row, most of a tall tile is
#   padding, and the grid's number of programs decides how much of the GPU takes part.
# - In the model, each projection is one launch before the swap and one after, so the count of launches
#   is not where a projection swap can cost; what each launch costs is, and the launch table above shows
#   how the counts came out on your machine.
#
# Next, in chapter 5, attention itself.
