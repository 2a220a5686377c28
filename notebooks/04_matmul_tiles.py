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
# - what the compiler makes of `tl.dot` for a T4 and for an H200 (FMA or tensor cores), and what registers
#   and shared memory allow per SM;
# - why a kernel timing must name its clock (GPU time or host time per call);
# - how to place a kernel on a roofline, and why a one-row matmul can only be memory-bound;
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
import collections
import inspect
import itertools
import statistics

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Patch
import torch

import helpers  # first: in CPU mode it sets TRITON_INTERPRET=1, which must happen before Triton loads
import slower_kernels
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
#
# Its last two arguments set how the GPU runs each program. A program runs on one **streaming
# multiprocessor** (SM), one of the GPU's independent processors (tens of them on a T4, over a hundred on an
# H200), as a group of **warps**, 32 threads that execute each instruction together
# ([chapter 1](01_setup.ipynb#The-GPU-you-are-on) has the machine in one table). `num_warps` gives each
# program its warps: 4 for the default tile, 128 threads sharing a 64 x 64 output tile. `num_stages` is how
# many K chunks the loop keeps in flight in **shared memory**, a small on-chip memory of each SM that all the
# threads of a program share: with 2, the blocks of $A$ and $B$ for the next step are being copied in while
# the current ones are multiplied. Triton overlaps the two with asynchronous copies, which GPUs of compute
# capability 8.0 and newer have (sm_80; the number is NVIDIA's name for a GPU generation: a T4 is sm_75, an
# H200 sm_90). Every tile of the list uses 2 stages, and the CPU interpreter ignores both arguments; what
# they become on a real GPU is the subject of the compiler section below.

# %%
matmul_src = inspect.getmodule(slower_kernels.matmul)
print(inspect.getsource(matmul_src.matmul_kernel.fn))
print(inspect.getsource(slower_kernels.matmul))

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
ours = slower_kernels.matmul(a, w.t(), **slower_kernels.DEFAULT_TILE.kwargs())
theirs = a @ w.t()
reference = a.double() @ w.double().t()
max_err = (ours.double() - theirs.double()).abs().max().item()
err_ref = (ours.double() - reference).abs().max().item()
tol = REL_TOL[DTYPE] * reference.abs().max().item()
helpers.record("matmul.max_err", max_err, "abs", f"max |Triton - torch|, {SIZES.matmul_shape}, {str(DTYPE)[6:]}")
print(f"[{M}, {K}] @ [{K}, {N}] {str(DTYPE)[6:]}, tile {slower_kernels.DEFAULT_TILE.name}")
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
# ## What the compiler made: a T4 beside an H200
#
# `tl.dot` says *what* to compute; the compiler decides *how*. A GPU can multiply in two ways:
#
# - **FMA** (fused multiply-add, $a \cdot b + c$): the ordinary cores, one multiply-add per thread and
#   instruction; the PTX instruction is `fma`.
# - **Tensor cores**: units in each SM that multiply a small matrix tile (say 16 x 8 by 8 x 8, or on an H200
#   64 x 16 by 16 x N for a group of four warps) in one instruction; the PTX instruction is an `mma`
#   (matrix multiply-accumulate; `wgmma` on an H200). On a T4 they do about 65 TFLOP/s in fp16, the FMA
#   cores 8.1 TFLOP/s in fp32 (the vendor's figures, `helpers.NOMINAL_TFLOPS`).
#
# Triton compiles ahead of time for a GPU that is not there: `helpers.compiler_table` compiles the matmul
# in every tile of the list for a T4 (sm_75) and an H200 (sm_90), on this machine, GPU or not (about a
# minute the first time), and reads the result: **PTX**, the GPU's portable assembly, and the assembler's
# report. For each tile and target the table below gives instruction counts in the code (each instruction
# counted once, however often the K loop runs it): the tensor-core multiplies, **mma** (`mma.sync`, one warp,
# or `wgmma.mma_async`, four warps together; not the `wgmma` lines around them that only synchronise), and
# the **fma** instructions. Then the **registers** per thread (the
# fastest storage, private to each thread; the fp32 accumulator lives there), the shared memory per
# program, and how many programs one SM can hold at once, with the limit that sets it (warps, registers
# or shared memory per SM). That last number is the kernel's **occupancy**: more programs resident on an
# SM give it more work to switch to while one of them waits for memory.

# %%
DEFAULT = slower_kernels.DEFAULT_TILE.name  # the blog's tile, 64 x 64 x 32
compiled = helpers.compiler_table(["matmul_kernel"])
TARGETS = {cc: compiled.loc[compiled["cc"] == cc, "gpu"].iloc[0] for cc in sorted(compiled["cc"].unique())}


MULTIPLY = r"^\s*(@!?%p\d+\s+)?(mma\.|wgmma\.mma_async)"  # a tensor-core multiply, not wgmma's fence/commit/wait


def multiplies(label, cc):
    """The tensor-core multiplies in one tile's PTX, by instruction: {'mma': n} (mma.sync, one warp) and/or
    {'wgmma': n} (wgmma.mma_async, four warps together)."""
    text = helpers.ptx_excerpt("matmul_kernel", label, cc, MULTIPLY, max_lines=1_000_000)
    lines = [] if text.startswith("(no line") else text.splitlines()
    return collections.Counter(next(w for w in line.split() if "mma" in w).split(".")[0] for line in lines)


def per_target(cc):
    """The compiler's numbers for one target, one row per tile in the order of slower_kernels.TILE_CONFIGS."""
    t = compiled[compiled["cc"] == cc].set_index("label").loc[list(slower_kernels.TILE_CONFIGS)]
    return pd.DataFrame({"mma": t["tensor-core mma"], "fma": t["fma"], "registers": t["registers"],
                         "shared KiB": t["shared"] / 1024, "programs per SM": t["programs_per_sm"],
                         "limited by": t["limited_by"]})


print("static PTX instruction counts per kernel (not per run of the K loop): mma = tensor-core multiplies "
      "(`mma.sync`, `wgmma.mma_async`); registers per thread (ptxas); shared memory per program; programs one SM "
      "can hold at once, and what limits it")
helpers.show(pd.concat({TARGETS[cc]: per_target(cc) for cc in TARGETS}, axis=1).rename_axis("tile"))

# %%
T4_CC, H_CC = min(TARGETS), max(TARGETS)  # sm_75 and sm_90
t4, h = per_target(T4_CC), per_target(H_CC)
fma_on_t4 = bool((t4["mma"] == 0).all() and (t4["fma"] > 0).all())
mma_on_h = bool((h["mma"] > 0).all())
t4_tc, t4_fma = helpers.NOMINAL_TFLOPS["t4"]


def count_range(col):
    return f"{col.min():,}" if col.min() == col.max() else f"{col.min():,} to {col.max():,}"


def compiled_as(t, cc):
    """What tl.dot became for one target, in words, from its instruction counts."""
    name = TARGETS[cc]
    if (t["mma"] == 0).all():
        return (f"for {name} no tile uses the tensor cores: `tl.dot` became {count_range(t['fma'])} `fma` "
                "instructions per kernel, and not one `mma`")
    kinds = {n: multiplies(n, cc) for n in t.index}
    by_kind = []
    for kind, opcode in (("wgmma", "`wgmma.mma_async` (four warps together)"), ("mma", "`mma.sync` (one warp)")):
        tiles = [n for n in t.index if kinds[n][kind]]
        if tiles:
            which = "every tile" if len(tiles) == len(t) else and_list(tiles)
            by_kind.append(f"{opcode} for {which}, {count_range(pd.Series([kinds[n][kind] for n in tiles]))} "
                           "per kernel")
    every = "every tile's" if (t["mma"] > 0).all() else f"{int((t['mma'] > 0).sum())} of the {len(t)} tiles'"
    return f"for {name} {every} `tl.dot` became tensor-core multiplies: " + "; ".join(by_kind)


MAX_REGISTERS = 255  # the most registers one thread can address, on sm_75 and sm_90 alike


def and_list(items):
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def register_reading():
    """The register counts against what each tile's fp32 accumulator needs per thread (BLOCK_M x BLOCK_N over the
    program's threads): a count at the ceiling, or below the accumulator's own need, means the compiler spilled."""
    need = pd.Series({name: t.block_m * t.block_n // (32 * t.num_warps) for name, t in slower_kernels.TILE_CONFIGS.items()})
    parts = []
    for cc, t in ((T4_CC, t4), (H_CC, h)):
        at_cap = [n for n in t.index if t.loc[n, "registers"] >= MAX_REGISTERS]
        below = [n for n in t.index if t.loc[n, "registers"] <= need[n]]
        if not at_cap and not below:
            parts.append(f"On {TARGETS[cc]} every tile's count is above its accumulator's need ({count_range(need)} "
                         "fp32 registers per thread) and below the ceiling: the accumulator lives in registers. ")
            continue
        text = f"On {TARGETS[cc]}, "
        if at_cap:
            text += (f"{and_list(at_cap)} sit{'s' * (len(at_cap) == 1)} at the ceiling of {MAX_REGISTERS} registers a "
                     "thread can address, the sign of a tile that wants more than a thread has. ")
        if below:
            counts = and_list([f"{n} ({t.loc[n, 'registers']} registers, {need[n]} for the accumulator)"
                               for n in below])
            text += (f"{counts} report no more registers than their fp32 accumulator alone needs per thread, with "
                     "addresses, loop counters and the blocks of A and B still to hold: their accumulator cannot "
                     "live in registers. ")
        text += ("What does not fit, the compiler (ptxas) keeps in *local memory*, a private area of each thread "
                 "in the GPU's device memory, reached through the caches: it **spills**, and every spilled value "
                 "costs a store and a load where a register would cost nothing. So a count at the ceiling or below "
                 "the accumulator's need is what ptxas allocated, not what the tile needs, and the programs per SM "
                 "the table gives such a tile come with local-memory traffic that the table does not show. ")
        parts.append(text)
    if "spill stores" in compiled:  # bytes per thread, where slower_kernels.aot reports ptxas's spill line
        spilled = compiled[(compiled["kernel"] == "matmul_kernel") & (compiled["spill stores"] > 0)]
        parts.append("ptxas reports spill stores for " + (", ".join(
            f"{r['label']} on sm_{r['cc']} ({r['spill stores']:,} bytes)" for _, r in spilled.iterrows())
            if len(spilled) else "no tile") + ". ")
    return "**Registers and spilling.** " + "".join(parts)


d4, dh = t4.loc[DEFAULT], h.loc[DEFAULT]
capital = lambda words: words[0].upper() + words[1:]  # noqa: E731
text = f"**What the table shows.** {capital(compiled_as(t4, T4_CC))}. {capital(compiled_as(h, H_CC))}. "
if fma_on_t4 and mma_on_h:
    text += ("So with this Triton the T4 runs our matmul on its FMA cores, whose roof is "
             f"{t4_fma:g} TFLOP/s, while cuBLAS, which PyTorch calls, runs on the T4's tensor cores, roof "
             f"{t4_tc:g} TFLOP/s: on a shape with enough arithmetic to reach those roofs, the blog's matmul was "
             f"racing cuBLAS with {t4_tc / t4_fma:.0f} times less compute available. On an H200 both use the "
             "tensor cores. ")
text += (f"The default tile {DEFAULT} holds {d4['registers']} registers per thread and {d4['shared KiB']:g} KiB "
         f"of shared memory on {TARGETS[T4_CC]}, so an SM holds {d4['programs per SM']} of its programs at once "
         f"(limited by {d4['limited by']}); on {TARGETS[H_CC]}, {dh['registers']} registers and "
         f"{dh['shared KiB']:g} KiB, {dh['programs per SM']} programs per SM (limited by {dh['limited by']}). "
         f"Tiles limited by registers on {TARGETS[T4_CC]}: {int((t4['limited by'] == 'registers').sum())} of "
         f"{len(t4)}, on {TARGETS[H_CC]}: {int((h['limited by'] == 'registers').sum())}. A tile that needs many "
         "registers leaves an SM few programs to switch between while one waits for memory.")
helpers.md(text + "\n\n" + register_reading())

# %% [markdown]
# What the instructions look like: the first few PTX lines of the default tile's multiply for each target.
# On the T4, `fma.rn.f32 d, a, b, c` is one fp32 multiply-add of one thread ($d = a \cdot b + c$, rounded
# to nearest): one K step of the default tile, a 64 x 32 by 32 x 64 product, is 131,072 multiply-adds,
# 1,024 for each of the program's 128 threads (compare the tile's `fma` count in the table). On the H200, `wgmma.mma_async...m64nNk16.f32.f16.f16`
# is one instruction for the four warps of a program together: a 64 x 16 block of fp16 $A$ times a
# 16 x N block of $B$, added into fp32 accumulators; the `fence`, `commit_group` and `wait_group` lines
# around it start it and wait for it, since it runs asynchronously (the table's mma column counts the
# multiplies alone).

# %%
print(f"{TARGETS[T4_CC]}, tile {DEFAULT}, lines matching 'fma':")
print(helpers.ptx_excerpt("matmul_kernel", DEFAULT, T4_CC, r"fma", max_lines=4))
print(f"\n{TARGETS[H_CC]}, tile {DEFAULT}, lines matching 'mma':")
print(helpers.ptx_excerpt("matmul_kernel", DEFAULT, H_CC, r"mma", max_lines=6))

# %% [markdown]
# ## Timing against PyTorch
#
# PyTorch hands a matmul to cuBLAS, NVIDIA's library, tuned for each GPU for years, and on both GPUs
# running on the tensor cores. So we expect to lose. On a T4, if the compiler section above found FMA
# instructions there, the roofs give the gap a reason of their own at the model shape; whether the roofs are
# what sets the gap on your GPU, the roofline section below reads. How much, and where, is the interesting
# part. We time two shapes:
# the model shape above, and the **decode shape**, one row, which is what every projection sees when the
# model generates one token at a time.
#
# A kernel timing has to name its clock, and this chapter uses two:
#
# - **GPU time** (`helpers.compare_calls`): each call is replayed in a CUDA graph, so the host is out of
#   the loop, in shuffled rounds against PyTorch's call and PyTorch's call against itself. That A/A pair is
#   the noise floor of the comparison: a kernel of a few microseconds moves from one replay to the next, and
#   a ratio that does not stand out of that floor is "within noise". At the decode shape the same rounds
#   time every tile of the sweep below, so the default tile is timed once and every later cell reads it.
# - **host time per call** (`helpers.host_ms_per_call`): calls back to back, synchronised; what one call
#   costs the Python program that makes it, launch included.
#
# In CPU mode there is one clock, the interpreter's wall time, and the rounds run on it.
#
# For each shape we also compute the work (FLOPs, $2MNK$) and the minimum bytes (read $A$ and $B$ once,
# write $C$ once), on the GPU clock. At one row the weight alone is almost all the bytes and the
# arithmetic is tiny, so the decode matmul is at best a memory problem: reading $K \times N$ weights as
# fast as possible. Whether a call this short even gets near that limit, or spends most of its time on its
# fixed cost, is for the timings to say.
#
# One caution about the GB/s below. A CUDA-graph replay runs the same call over and over on the same
# inputs, and a weight of a few megabytes fits in the GPU's L2 cache (the on-chip cache in front of the
# GPU's memory: 4 MB on a T4, tens of MB on an H200; chapter 2 measured it), so from the second replay on it is read from L2, not
# from memory. Where the bytes fit in L2, the GB/s are cache rates and can exceed the memory's nominal
# bandwidth; only the shapes larger than L2 measure the memory itself. The model's weights (about 1.2 GB:
# the 28 layers plus the embedding that lm_head reads) do not fit: each token reads them from memory.

# %%
CLOCK = helpers.CLOCK_LABELS["gpu" if helpers.HAS_GPU else "interpreter"]  # the clock of every kernel ratio
SHORT = "GPU" if helpers.HAS_GPU else "interpreter"  # the same clock, in column names
HOST = "host" if helpers.HAS_GPU else "interpreter"
model_shape, decode_shape = SIZES.matmul_shape, SIZES.matmul_decode_shape


def calls_at(shape, tiles):
    """PyTorch's ``a @ w.t()`` and our kernel with each tile, on one pair of fresh operands of ``shape``."""
    a, w = make_operands(shape)
    ours = {t.name: (lambda t=t: slower_kernels.matmul(a, w.t(), **t.kwargs())) for t in tiles}
    return (lambda: a @ w.t()), ours


def work(shape):
    M, K, N = shape
    return 2 * M * N * K, (M * K + K * N + M * N) * E  # FLOPs, minimum bytes


def per_s(amount, ms):
    return amount / (ms * 1e-3) if helpers.HAS_GPU else None


def against(v, other):
    """A verdict in a sentence: '2.72x slower than PyTorch', or 'within noise of PyTorch' with the rule that held it
    back (``Verdict.reason``)."""
    return f"{v.text} than {other}" if v.real else f"within noise of {other} ({v.reason})"


def noise_band(floor):
    """The band helpers.verdict calls "within noise", and a legend label saying which rule set its width:
    the series' 5% minimum effect, or twice the run's A/A floor's distance from 1 when that is wider."""
    noise = helpers.noise_threshold(floor)
    rule = (f"the series' {100 * helpers.MIN_EFFECT:.0f}% minimum effect" if noise == helpers.MIN_EFFECT else
            "twice the A/A floor's distance from 1")
    lo, hi = 1 / (1 + noise), 1 + noise
    return lo, hi, f"within noise: {lo:.2f}-{hi:.2f}\n({rule}; A/A floor {floor.median:.3f})"


def off_by(predicted, measured):
    """A prediction against its measurement in words: '8.1% under', '0.3% over', 'equal to within 0.05%'."""
    pct = 100 * (predicted / measured - 1)
    if abs(pct) < 0.05:
        return "equal to within 0.05%"
    size = f"{abs(pct):.1f}%" if abs(pct) < 100 else f"{abs(pct):.0f}%"
    return f"{size} {'under' if pct < 0 else 'over'}"


def gb_s(value):
    """A bandwidth for a sentence: '566 GB/s', '1,683 GB/s', '0.42 GB/s' (never '1.68e+03')."""
    return f"{value:,.0f} GB/s" if value >= 100 else f"{value:.3g} GB/s"


def us(ms):
    """A time given in ms, written in µs to three significant figures: '4.24', '11.4', '568', '12,345'."""
    text = f"{1e3 * ms:#.3g}"
    return f"{1e3 * ms:,.0f}" if "e" in text else text.rstrip(".")


def sig(value, digits=3):
    """A number to ``digits`` significant figures as text (no padding back to four, no exponent)."""
    if value is None:
        return "n/a (CPU)"
    text = f"{value:#.{digits}g}"
    return f"{value:,.0f}" if "e" in text else text.rstrip(".")


def single_reading(a, b):
    """Two host readings, one of each call and no rounds, side by side: a ratio without a verdict."""
    r = a / b
    return f"{r:.0f} times" if r >= 10 else f"{r:.2f} times"


torch_model, ours_model = calls_at(model_shape, [slower_kernels.DEFAULT_TILE])
torch_decode, ours_decode = calls_at(decode_shape, slower_kernels.TILE_CONFIGS.values())
# One measurement per shape on the GPU clock: shuffled rounds, PyTorch as the reference and its A/A floor.
at = {"model shape": helpers.compare_calls(ours_model, torch_model),
      "decode shape": helpers.compare_calls(ours_decode, torch_decode)}  # every tile: the sweep reads it too
calls = {"model shape": (torch_model, ours_model[DEFAULT]), "decode shape": (torch_decode, ours_decode[DEFAULT])}
# The host clock, once per call (in CPU mode the interpreter's time above is the only clock: reused, not re-timed).
host_ms, launches = {}, {}
for label, (torch_call, our_call) in calls.items():
    for who, fn, name in (("torch", torch_call, helpers.REFERENCE), ("triton", our_call, DEFAULT)):
        host_ms[label, who] = helpers.host_ms_per_call(fn) if helpers.HAS_GPU else at[label].ms[name]
        launches[label, who] = helpers.launches_per_call(fn)

rows = []
for label, shape in (("model shape", model_shape), ("decode shape", decode_shape)):
    cc, (flops, nbytes) = at[label], work(shape)
    t_torch, t_ours, r = cc.ms[helpers.REFERENCE], cc.ms[DEFAULT], cc.ratios[DEFAULT]
    row = {"shape": label, "M x K x N": " x ".join(map(str, shape)),
           f"PyTorch {SHORT} µs": us(t_torch), f"Triton {SHORT} µs": us(t_ours),
           "Triton / PyTorch (median)": r.median_text, "quartiles": f"{r.quartiles}",
           "A/A floor": f"{cc.floor.median:.3f}", "verdict": cc.verdict(DEFAULT).text}
    if helpers.HAS_GPU:
        row.update({"PyTorch host µs per call": us(host_ms[label, "torch"]),
                    "Triton host µs per call": us(host_ms[label, "triton"])})
    torch_launches = launches[label, "torch"] if helpers.HAS_GPU else None  # CPU mode counts only our kernels
    row["kernels per call (PyTorch, Triton)"] = f"{helpers.fmt(torch_launches, 0)}, {launches[label, 'triton']:.0f}"
    row.update({"PyTorch TFLOP/s": per_s(flops / 1e12, t_torch), "Triton TFLOP/s": per_s(flops / 1e12, t_ours),
                "PyTorch GB/s": per_s(nbytes / 1e9, t_torch), "Triton GB/s": per_s(nbytes / 1e9, t_ours)})
    rows.append(row)
timings = pd.DataFrame(rows).set_index("shape")  # rates kept as numbers: the sentences below read them
print(f"{SHORT} µs: {CLOCK}, medians of {at['model shape'].rounds} shuffled rounds (helpers.compare_calls)"
      + (f"; host µs per call: {helpers.CLOCK_LABELS['host']}" if helpers.HAS_GPU else "")
      + "; times and rates to three significant figures")
RATES = ["PyTorch TFLOP/s", "Triton TFLOP/s", "PyTorch GB/s", "Triton GB/s"]
helpers.show(timings.assign(**{c: timings[c].map(sig) for c in RATES}))

rounds_note = f"{CLOCK}, median of {at['model shape'].rounds} shuffled rounds (compare_calls)"
helpers.record("matmul.torch_ms", at["model shape"].ms[helpers.REFERENCE], "ms",
               f"torch a @ w.t(), {model_shape}; {rounds_note}")
helpers.record("matmul.triton_ms", at["model shape"].ms[DEFAULT], "ms",
               f"Triton matmul, {model_shape}, tile {DEFAULT}; {rounds_note}; same rounds as matmul.torch_ms")
helpers.record("matmul.decode_torch_ms", at["decode shape"].ms[helpers.REFERENCE], "ms",
               f"torch a @ w.t(), {decode_shape}; {rounds_note}")
helpers.record("matmul.decode_triton_ms", at["decode shape"].ms[DEFAULT], "ms",
               f"Triton matmul, {decode_shape}, tile {DEFAULT}; {rounds_note}; same rounds as matmul.decode_torch_ms")
host_note = (helpers.CLOCK_LABELS["host"] if helpers.HAS_GPU else
             f"{CLOCK}: the same measurement as the decode_*_ms ids (CPU mode has one clock)")
helpers.record("matmul.host_decode_torch_ms", host_ms["decode shape", "torch"], "ms",
               f"torch a @ w.t(), {decode_shape}; {host_note}")
helpers.record("matmul.host_decode_triton_ms", host_ms["decode shape", "triton"], "ms",
               f"Triton matmul, {decode_shape}, tile {DEFAULT}; {host_note}")

# %%
model_v, decode_v = at["model shape"].verdict(DEFAULT), at["decode shape"].verdict(DEFAULT)
B = helpers.blog  # the blog's T4 figures, by result id
gpu_ms = {label: (at[label].ms[DEFAULT], at[label].ms[helpers.REFERENCE]) for label in at}
text = (
    f"On the {SHORT} clock, at the model shape our kernel took **{us(gpu_ms['model shape'][0])} µs** against "
    f"PyTorch's **{us(gpu_ms['model shape'][1])} µs**; round by round, **{against(model_v, 'PyTorch')}** "
    f"(A/A floor {at['model shape'].floor.median:.3f}). At the decode shape, {us(gpu_ms['decode shape'][0])} "
    f"against {us(gpu_ms['decode shape'][1])} {SHORT} µs: **{against(decode_v, 'PyTorch')}** "
    f"(A/A floor {at['decode shape'].floor.median:.3f})"
)
if helpers.HAS_GPU:
    n_ours, n_torch = launches["decode shape", "triton"], launches["decode shape", "torch"]
    kernels_each = (f"{n_ours:.0f} kernel{'s' * (n_ours != 1)} per call each" if n_ours == n_torch else
                    f"{n_ours:.0f} kernels per call against {n_torch:.0f}")
    text += (f", with our kernel reading the weights at {gb_s(timings.loc['decode shape', 'Triton GB/s'])} "
             f"against PyTorch's {gb_s(timings.loc['decode shape', 'PyTorch GB/s'])}. On the host clock, one "
             f"decode-shape call cost {us(host_ms['decode shape', 'triton'])} µs of host time through our "
             f"launcher against {us(host_ms['decode shape', 'torch'])} µs for PyTorch's, "
             f"{single_reading(host_ms['decode shape', 'triton'], host_ms['decode shape', 'torch'])} as long "
             f"(one host reading of each call, no rounds: a ratio, not a verdict), for {kernels_each}. ")
else:
    text += (". (In CPU mode that compares the Triton interpreter with PyTorch's compiled CPU code: read the "
             "method, not the numbers.) ")
text += (
    f"The blog measured {B('matmul.triton_ms')} ms against PyTorch's {B('matmul.torch_ms')} ms "
    f"({helpers.versus(B('matmul.triton_ms'), B('matmul.torch_ms'))}) at a 'model-shaped input' on a T4, with "
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
# The table below reads the decode-shape rounds above, in which every configuration of
# `slower_kernels.TILE_CONFIGS` (the project's one list, all of them safe on a T4) was timed against PyTorch on the
# GPU clock. A tile is compared with the default tile round by round (both against the same PyTorch call in
# the same round), and the verdict holds that ratio against the run's A/A floor. For each tile the table also
# lists how many programs the grid has and what fraction of the computed outputs is real. Two things could
# matter:
#
# - **wasted arithmetic** grows with `BLOCK_M`: if the GPU's arithmetic is slow (a T4 running Triton's
#   `tl.dot` without tensor cores), tall tiles should be slower;
# - **parallelism**: with one row, the grid is `cdiv(M, BLOCK_M) x cdiv(N, BLOCK_N)` = `cdiv(N, BLOCK_N)`
#   programs. Wide tiles make few programs, and a program runs on one multiprocessor (SM, chapter 2), so
#   a grid with fewer programs than the GPU has multiprocessors leaves some of them without work while
#   the weights are read.
#
# Most tiles of the list differ from each other in several sizes at once (BLOCK_M, BLOCK_N, BLOCK_K, warps),
# so a gap between two of them cannot be pinned on one size. To test each idea, the reading compares tiles
# that differ in **one size only**: BLOCK_M alone for the padding, BLOCK_N alone for the grid.

# %%
sweep = at["decode shape"]
floor_decode = sweep.floor
MS_COL = f"{SHORT} ms"


def per_round(top, bottom):
    """Ratio of two tiles' times, round by round: each was divided by the same PyTorch call in its round."""
    return helpers.Ratio.of([t / b for t, b in zip(sweep.ratios[top].values, sweep.ratios[bottom].values)])


def tile_row(tile, shape=decode_shape):
    """One line of the tile table: the tile, its grid, and its timing (read from the sweep's rounds)."""
    M, K, N = shape
    programs = triton.cdiv(M, tile.block_m) * triton.cdiv(N, tile.block_n)
    vs_default = per_round(tile.name, DEFAULT)
    row = {"tile": tile.name, "block_m": tile.block_m, "block_n": tile.block_n, "block_k": tile.block_k,
           "num_warps": tile.num_warps, "programs": programs, "K steps": triton.cdiv(K, tile.block_k),
           "useful %": 100 * M * N / (programs * tile.block_m * tile.block_n), MS_COL: sweep.ms[tile.name]}
    if helpers.HAS_GPU:
        row["GB/s"] = work(shape)[1] / (sweep.ms[tile.name] * 1e-3) / 1e9
    row.update({"vs PyTorch": sweep.ratios[tile.name].median,
                "vs PyTorch: verdict": sweep.verdict(tile.name).text,
                "vs default tile": vs_default.median,
                "vs default: quartiles": f"{vs_default.quartiles}",
                "vs default: verdict": ("reference" if tile.name == DEFAULT else
                                        helpers.verdict(vs_default, floor_decode).text)})
    return row


tiles = pd.DataFrame([tile_row(t) for t in slower_kernels.TILE_CONFIGS.values()])
decode_torch_ms = sweep.ms[helpers.REFERENCE]
helpers.save_sweep(tiles, "matmul_tile_sweep")
print(f"{SHORT} µs: {CLOCK}, median of {sweep.rounds} shuffled rounds; A/A floor (PyTorch against itself) "
      f"{floor_decode.median_text} ({floor_decode.quartiles})")
shown = tiles.copy()  # for reading: times in µs and rates to three significant figures, ratios to two decimals
# (against the default tile, beside its quartiles, to the quartiles' digits)
shown[MS_COL] = tiles[MS_COL].map(us)
for column in [c for c in ("useful %", "GB/s") if c in tiles]:
    shown[column] = tiles[column].map(sig)
shown["vs PyTorch"] = tiles["vs PyTorch"].map(lambda r: f"{r:.2f}")
shown["vs default tile"] = [per_round(t, DEFAULT).median_text for t in tiles["tile"]]  # at its quartiles' digits
helpers.show(shown.rename(columns={MS_COL: f"{SHORT} µs"}))

# %%
fig, ax = plt.subplots(figsize=(9, 4.5))
block_ms = sorted(tiles["block_m"].unique())
colors = {bm: plt.cm.viridis(0.1 + 0.8 * i / max(1, len(block_ms) - 1)) for i, bm in enumerate(block_ms)}
med = [sweep.ratios[t].median for t in tiles["tile"]]
err = [[m - sweep.ratios[t].low for t, m in zip(tiles["tile"], med)],
       [sweep.ratios[t].high - m for t, m in zip(tiles["tile"], med)]]
ax.barh(tiles["tile"], med, xerr=err, capsize=3, color=[colors[bm] for bm in tiles["block_m"]])
lo, hi, band_label = noise_band(floor_decode)  # helpers.verdict: within noise inside [lo, hi]
band = ax.axvspan(lo, hi, color="tab:gray", alpha=0.25, label=band_label)
torch_line = ax.axvline(1.0, color="crimson", ls="--", label=f"PyTorch: {us(decode_torch_ms)} {SHORT} µs = 1")
dM, dK, dN = decode_shape  # helpers.SIZES gives shapes as (M, K, N): x[M, K] @ W[N, K]^T
ax.set(xlabel=f"{CLOCK}, relative to PyTorch's (median of {sweep.rounds} rounds, quartiles)",
       ylabel="tile (m_n_k: BLOCK_M, BLOCK_N, BLOCK_K)",
       title=f"Which tile suits a one-row matmul? (x[M, K] @ W[N, K]$^T$, M = {dM}, K = {dK}, N = {dN})")
ax.set_xlim(left=0)
ax.grid(True, axis="x", alpha=0.3)
bar_keys = [Patch(facecolor=c, label=f"BLOCK_M = {bm}") for bm, c in colors.items()]  # the bars' own colours
ax.legend(handles=[torch_line, band, *bar_keys], fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
fig.tight_layout()
helpers.save_figure(fig, "matmul_tile_sweep")
plt.show()

# %%
best, worst = tiles.loc[tiles[MS_COL].idxmin()], tiles.loc[tiles[MS_COL].idxmax()]
default = tiles.set_index("tile").loc[DEFAULT]
spread_v = helpers.verdict(per_round(worst["tile"], best["tile"]), floor_decode)
best_default_v = helpers.verdict(per_round(best["tile"], DEFAULT), floor_decode)
best_v = sweep.verdict(best["tile"])
sms = torch.cuda.get_device_properties(DEVICE).multi_processor_count if DEVICE.type == "cuda" else None
programs = tiles.set_index("tile")["programs"]  # cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), from tile_row
KNOBS = ("block_m", "block_n", "block_k", "num_warps", "num_stages")


def one_size_pairs(knob):
    """Pairs (smaller, larger) of the sweep's tiles that differ in ``knob`` and in nothing else."""
    ts = slower_kernels.TILE_CONFIGS.values()
    return [(a, b) for a in ts for b in ts if getattr(a, knob) < getattr(b, knob)
            and all(getattr(a, k) == getattr(b, k) for k in KNOBS if k != knob)]


def read_one_size(knob, what):
    """Each pair that differs in ``knob`` alone, larger tile against smaller, round by round against the A/A
    floor: (a sentence, the verdicts). ``what`` describes a pair's two tiles, e.g. 'taller against shorter'."""
    pairs = one_size_pairs(knob)
    if not pairs:
        return f"No two tiles of the sweep differ in {knob.upper()} alone, so this run cannot test it. ", []
    found, parts = [], []
    for small, large in pairs:
        r = per_round(large.name, small.name)
        v = helpers.verdict(r, floor_decode)
        found.append(v)
        grid = f" ({programs[large.name]} against {programs[small.name]} programs)" if knob == "block_n" else ""
        parts.append(f"{large.name} against {small.name}{grid}: " + (f"**{v.text}**" if v.real else
                                                                      f"{r.median_text}, within noise"))
    held = sorted({v.reason for v in found if not v.real})
    return (f"Tiles that differ in {knob.upper()} alone, {what}, round by round: " + "; ".join(parts) + ". "
            + (f"(Within noise: {'; '.join(held)}.) " if held else "")), found


def tally(found, larger, cost):
    """What one-size verdicts say together, e.g. 'The taller tile was slower, the rest held equal: in this pair,
    ...'. The words stay with the pairs: tiles that differ in several sizes are read elsewhere."""
    slower = sum(v.real and v.ratio > 1 for v in found)
    faster = sum(v.real and v.ratio < 1 for v in found)
    n = len(found)
    each = f"The {larger} tile was" if n == 1 else f"Every {larger} tile was"
    where = "in this pair" if n == 1 else f"in these {n} pairs"
    if slower == n:
        return f"{each} slower, the rest held equal: {where}, {cost} cost time. "
    if faster == n:
        return f"{each} faster, the rest held equal: {where}, {cost} did not cost time. "
    if slower == faster == 0:
        return f"With the rest held equal, {cost} made no difference this run can tell. "
    counts = [f"{word} in {k}" for word, k in (("slower", slower), ("faster", faster),
                                                 ("within noise", n - slower - faster)) if k]
    return (f"Of the {n} pairs, the {larger} tile was {', '.join(counts[:-1])} and {counts[-1]}: {cost} costs "
            "time in some pairs, not in all. ")


def differ_in(a, b):
    """Which sizes two tiles of the sweep differ in: one, or several (then no one size explains their gap)."""
    ta, tb = slower_kernels.TILE_CONFIGS[a], slower_kernels.TILE_CONFIGS[b]
    knobs = [k.upper() for k in KNOBS if getattr(ta, k) != getattr(tb, k)]
    if not knobs:
        return ""
    if len(knobs) == 1:
        return f"The fastest and the slowest tile differ in {knobs[0]} alone."
    return (f"The fastest and the slowest tile differ in {', '.join(knobs[:-1])} and {knobs[-1]} at once, so "
            "their gap is not any one size's doing.")


def read_grid_across(best_name):
    """Does the whole sweep follow the grid? The fastest tile's program count against every other tile's, round by
    round against the A/A floor, and the tiles that share its grid: a sentence."""
    p_best = programs[best_name]
    v = {t: helpers.verdict(per_round(t, best_name), floor_decode) for t in programs.index if t != best_name}
    more = [t for t in v if programs[t] > p_best]
    fewer = [t for t in v if programs[t] < p_best]
    same = [t for t in v if programs[t] == p_best]
    rank = ("the fewest of the sweep" if not fewer else "the most of the sweep" if not more else
            f"between the sweep's fewest ({programs.min()}) and most ({programs.max()})")
    text = (f"Across the whole sweep, the fastest tile {best_name} launches {p_best} programs, {rank}"
            + (f" (shared with {', '.join(same)})" if same else "") + ". ")
    for group, word in ((more, "more"), (fewer, "fewer")):
        if group:
            n = len(group)
            slower = sum(v[t].real and v[t].ratio > 1 for t in group)
            faster = sum(v[t].real and v[t].ratio < 1 for t in group)  # possible: a median of ratios, not of times
            counts = [f"{k} {what}" for k, what in ((slower, "slower than it"), (faster, "faster than it"),
                                                    (n - slower - faster, "within noise of it")) if k]
            text += (f"Tiles with {word} programs than it ({n}): "
                     + (f"{'the one' if n == 1 else f'all {n}'} slower than it" if slower == n else ", ".join(counts))
                     + ", round by round. ")
    if same:
        slowest = max(same, key=lambda t: sweep.ms[t])
        text += (f"With the grid held at {p_best} programs, the slowest of those tiles, {slowest}, took "
                 f"{us(sweep.ms[slowest])} {SHORT} µs against {us(sweep.ms[best_name])}: round by round, **"
                 + (f"{v[slowest].text}**, so at one grid size the other sizes decided. " if v[slowest].real else
                    f"within noise** ({v[slowest].reason}). "))
    return text


def describe(row):
    programs, steps = int(row["programs"]), int(row["K steps"])
    return f"{programs} program{'s' * (programs != 1)}, {steps} K step{'s' * (steps != 1)} each"


text = (
    f"The fastest tile in the median was **{best['tile']}** ({us(best[MS_COL])} {SHORT} µs; {describe(best)}), "
    f"the slowest **{worst['tile']}** ({us(worst[MS_COL])} {SHORT} µs; {describe(worst)}). Round by round, "
    f"slowest against fastest: **{spread_v.text}**"
    + (", from the tile alone, for the same result. " if spread_v.real else
       ": the tile shape made no difference this run can tell from its noise at this shape. ")
    + f"The default tile {DEFAULT} took {us(default[MS_COL])} {SHORT} µs ({describe(default)}), with "
    f"{default['useful %']:.1f}% of its arithmetic useful; the fastest tile against it: **{best_default_v.text}**. "
    + differ_in(best["tile"], worst["tile"]) + "\n\n"
)
height, height_v = read_one_size("block_m", "taller against shorter")
width, width_v = read_one_size("block_n", "wider against narrower (fewer programs against more)")
text += "**Padding.** " + height
if helpers.MODE == "cpu":
    text += ("In the interpreter a tile's time follows how many programs and K steps numpy has to run, not "
             "what a GPU would do: read the method here, and the comparison on a GPU run.\n\n")
elif height_v:
    text += tally(height_v, "taller", "the padding rows' arithmetic (and their share of the accumulator)") + "\n\n"
text += "**The grid.** "
if sms:  # one program runs on one multiprocessor: a grid of fewer programs leaves some without work
    below = int((programs < sms).sum())
    text += (f"This GPU has {sms} multiprocessors; at the decode shape the sweep's grids have "
             f"{programs.min()} to {programs.max()} programs, and "
             + (f"{below} of the {len(programs)} tiles launch fewer programs than there are multiprocessors. "
                if below else "every tile launches enough programs for every multiprocessor. ")
             + f"The default tile launches {programs[DEFAULT]}"
             + (f", which leaves at least {sms - programs[DEFAULT]} multiprocessors without a program. "
                if programs[DEFAULT] < sms else ", enough for every multiprocessor. "))
text += width
if helpers.HAS_GPU and width_v:
    text += tally(width_v, "wider", "a grid of fewer, larger programs")
if helpers.HAS_GPU:  # the pairs hold the rest equal; the sweep as a whole does not, and may point elsewhere
    text += read_grid_across(best["tile"])
    wide = [large.name for _, large in one_size_pairs("block_n")]
    pairs_say_fewer_cost = bool(width_v) and all(v.real and v.ratio > 1 for v in width_v)
    best_has_fewest = programs[best["tile"]] == programs.min()
    if sms and pairs_say_fewer_cost and all(programs[t] < sms for t in wide):
        text += ("Multiprocessors left without a program would predict the one-size result"
                 + ("; they would also make the tiles with the fewest programs the slowest, and the fastest tile "
                    "is one of them: across tiles that differ in several sizes, the grid did not decide the "
                    "ranking, and this sweep cannot say which of the other sizes did. " if best_has_fewest else
                    ". "))
    elif pairs_say_fewer_cost and best_has_fewest:
        text += ("The one-size pair and the sweep point different ways: with the rest held equal fewer programs "
                 "cost time, yet the fastest tile has the fewest; the other sizes it differs in outweighed the grid. ")
text += "\n\n"
text += f"The fastest tile is {against(best_v, 'PyTorch')} at this shape"
if helpers.MODE == "cpu":
    text += ". "
elif best_v.real and best_v.ratio > 1:
    text += ", so no tile of the sweep closes the gap. "
elif best_v.real:
    text += ": a well-chosen tile is enough to beat PyTorch here. "
else:
    text += ": a well-chosen tile is enough to match it. "
text += "The blog's own table of this sweep did not survive in its text."
helpers.md(text)

# %% [markdown]
# ## A roofline: why one row can only be memory-bound
#
# A kernel's **arithmetic intensity** is its work over its traffic: FLOPs per byte moved, here
# $2MNK$ over the minimum bytes $2(MK + NK + MN)$ in fp16. A **roofline** plots each measurement at its
# intensity against the TFLOP/s it achieved, under two roofs of the GPU: the memory roof, bandwidth x
# intensity (a slanted line: at one flop per byte and a T4's 320 GB/s, at most 0.32 TFLOP/s), and the flat
# compute peak. Where they meet is the **ridge point**, peak over bandwidth. Left of it a kernel can at
# best be **memory-bound**, right of it **compute-bound**: the regimes of
# [chapter 1](01_setup.ipynb#Three-regimes). The figure draws two compute peaks: the tensor cores', and the
# FMA cores' (the roof of a `tl.dot` compiled to `fma`, as for a T4).
#
# For $M = 1$ the intensity is $2NK / 2(K + NK + N)$, just under one flop per byte, whatever $N$ and $K$:
# each weight is read once and used once. On the tensor cores the T4's and the H200's ridge points are in the
# hundreds of flops per byte; on the FMA cores they are far lower, tens of flops per byte, yet still well right
# of one.
#
# Two things to know before reading the figure below. Nearby labels are moved down a line at a time until they
# no longer overlap, so a decode-shape label can sit beside another tile's dot or below every dot: take each
# tile's time from the sweep's table above, not from where its label lands (the reading under the figure names
# the lowest, the default and the highest tile at the decode shape with their times). And on a GPU whose `tl.dot` runs on
# the tensor cores, as an H200's does, our kernel's roof is the solid line: a model-shape point that lands near
# the dashed FMA roof lands there by coincidence. The dashed roof binds only where `tl.dot` compiles to FMA, as
# on a T4.

# %%
def roof_point(label, group, shape, ms):
    flops, nbytes = work(shape)
    return {"label": label, "group": group, "flops": flops, "bytes": nbytes, "gpu_ms": ms}


def intensity(shape, element_bytes=2):
    M, K, N = shape
    return 2 * M * N * K / (element_bytes * (M * K + N * K + M * N))


def per_byte(i):
    """An intensity in flop per byte, to the same digits in every reading: 0.999, 110."""
    return f"{i:.3g}"


FULL = helpers.SIZES_BY_MODE["full"]  # the shapes the blog's T4 ran (full size), whatever this mode is
t4_gb_s = helpers.NOMINAL_GB_S["t4"]
t4_ridge_fma, t4_ridge_tc = t4_fma * 1e3 / t4_gb_s, t4_tc * 1e3 / t4_gb_s


def t4_roof(shape, peak):
    """The most TFLOP/s a T4 allows at the shape's intensity, under compute peak ``peak``."""
    return min(peak, intensity(shape) * t4_gb_s / 1e3)


def blog_gap_against_roofs() -> str:
    """The blog's measured T4 gap at the model shape beside the gap the roofs allow there (cuBLAS's over FMA's)."""
    roofs = t4_roof(FULL.matmul_shape, t4_tc) / t4_roof(FULL.matmul_shape, t4_fma)
    gap = B("matmul.triton_ms") / B("matmul.torch_ms")
    if gap >= roofs:
        return (f"The blog measured a gap of {gap:.2f}x there, at least what the roofs allow: on its T4 the roofs "
                "can account for all of it. ")
    return (f"The blog measured a gap of {gap:.2f}x there, less than the {roofs:.1f}x the roofs allow: on its T4 "
            "neither kernel ran at its roof, so the roofs bound the gap without setting it (and the blog's "
            "`do_bench` clock mixes in host time, which narrows a gap between short calls). ")


def padding_on_t4() -> str:
    """The default tile's executed arithmetic at one row (the padding rows included) against the T4's ridges."""
    executed = slower_kernels.DEFAULT_TILE.block_m * i_dec  # tl.dot multiplies every row of the tile, padding too
    return (f"But a tile pads the one row to BLOCK_M rows, and `tl.dot` multiplies the padding too: the default "
            f"tile ({DEFAULT}) executes {slower_kernels.DEFAULT_TILE.block_m} times the useful arithmetic, about "
            f"{executed:.0f} flop per byte, "
            + (f"right of the T4's FMA ridge ({t4_ridge_fma:.0f}) and left of its tensor-core ridge "
               f"({t4_ridge_tc:.0f}): on the FMA cores the padding's arithmetic, not the weights' bytes, can set a "
               "tall tile's decode time, while on tensor cores it stays hidden under the bytes."
               if t4_ridge_fma < executed < t4_ridge_tc else
               f"against ridges of {t4_ridge_fma:.0f} (FMA) and {t4_ridge_tc:.0f} (tensor cores)."))


i_dec, i_mod = intensity(FULL.matmul_decode_shape), intensity(FULL.matmul_shape)
text = (f"**On a T4, from the data sheet.** Its ridge point is {t4_ridge_tc:.0f} flop per byte on the tensor cores "
        f"and {t4_ridge_fma:.0f} on the FMA cores ({t4_tc:g} and {t4_fma:g} TFLOP/s over {t4_gb_s} GB/s). At the "
        f"full-size decode shape {FULL.matmul_decode_shape} the intensity is {per_byte(i_dec)} flop per byte, left of "
        f"both: the memory roof allows {t4_roof(FULL.matmul_decode_shape, t4_tc):.2f} TFLOP/s with or without "
        "tensor cores, so for the useful arithmetic compiling `tl.dot` to FMA costs nothing there; the weights' "
        "bytes set the time. At the "
        f"full-size model shape {FULL.matmul_shape}, {per_byte(i_mod)} flop per byte, "
        + ("right of the FMA ridge: " if i_mod > t4_ridge_fma else "left of the FMA ridge too: ")
        + f"an FMA kernel's roof is {t4_roof(FULL.matmul_shape, t4_fma):.1f} TFLOP/s, cuBLAS's on the tensor cores "
        f"{t4_roof(FULL.matmul_shape, t4_tc):.1f}, "
        f"{t4_roof(FULL.matmul_shape, t4_tc) / t4_roof(FULL.matmul_shape, t4_fma):.1f} times higher. "
        + ("That is the part of the blog's gap to cuBLAS at a model-shaped input that no tile can close on a T4 "
           "with this compiler. " if fma_on_t4 else "")
        + blog_gap_against_roofs()
        + "In decoding, every projection runs at M = 1, where the two roofs coincide for the useful arithmetic. "
        + padding_on_t4())
helpers.md(text)

# %%
if helpers.HAS_GPU and helpers.SLUG in helpers.NOMINAL_TFLOPS and helpers.SLUG in helpers.NOMINAL_GB_S:
    named = {DEFAULT, best["tile"], worst["tile"]}  # the other tiles unlabelled: at one intensity they overlap
    points = [roof_point("PyTorch", f"decode shape, M = {decode_shape[0]}", decode_shape, sweep.ms[helpers.REFERENCE])]
    points += [roof_point(t if t in named else "", f"decode shape, M = {decode_shape[0]}", decode_shape, sweep.ms[t])
               for t in slower_kernels.TILE_CONFIGS]
    points += [roof_point(name, f"model shape, M = {model_shape[0]}", model_shape, at["model shape"].ms[key])
               for name, key in (("PyTorch", helpers.REFERENCE), (DEFAULT, DEFAULT))]
    roofline = pd.DataFrame(points)
    helpers.plot_roofline(roofline, name="matmul_roofline")
    plt.show()
else:
    roofline = None
    helpers.md("The roofline needs GPU times and this GPU's nominal bandwidth and compute "
               "(`helpers.NOMINAL_GB_S`, `helpers.NOMINAL_TFLOPS`): "
               + ("in CPU mode there is no GPU clock. " if not helpers.HAS_GPU else
                  f"no nominal figures for {helpers.SLUG}. ")
               + "The T4 reading above needs neither.")


# %%
def read_roofline(points):
    """Where each shape's points sit against this GPU's roofs, and which regime the default tile's call is in."""
    gb, (tc, fma) = helpers.NOMINAL_GB_S[helpers.SLUG], helpers.NOMINAL_TFLOPS[helpers.SLUG]
    ridge = tc * 1e3 / gb
    of_roof, reached = {}, {}  # shape -> (default tile, PyTorch): % of the roof at its intensity; the default's TFLOP/s
    text = f"**On this GPU ({helpers.SLUG}).** Ridge point {ridge:.0f} flop per byte ({tc:g} TFLOP/s over {gb:,} GB/s). "
    for label, shape in (("decode shape", decode_shape), ("model shape", model_shape)):
        sub = points[points["group"].str.startswith(label)]
        i = intensity(shape, E)
        roof = min(tc, i * gb / 1e3)
        tflops = sub["flops"] / (sub["gpu_ms"] * 1e-3) / 1e12
        got = dict(zip(sub["label"], tflops))  # the labelled points: PyTorch, the default tile and others
        ours = reached[label] = got[DEFAULT]
        of_roof[label] = (100 * ours / roof, 100 * got["PyTorch"] / roof)
        left = f"{ridge / i:.1f}" if ridge / i < 10 else f"{ridge / i:.0f}"  # 1.9 times, not 2; 206 times
        text += (f"At the {label} {shape}, {per_byte(i)} flop per byte, "
                 + (f"{left} times left of the ridge: memory-bound, with a roof of {roof:.3g} TFLOP/s "
                    f"({100 * roof / tc:.2g}% of the compute peak). " if i < ridge else
                    f"right of the ridge: compute-bound, under the {tc:g} TFLOP/s peak. ")
                 + f"The default tile reached {ours:.3g} TFLOP/s ({100 * ours / roof:.0f}% of its roof), PyTorch "
                 f"{got['PyTorch']:.3g} ({100 * got['PyTorch'] / roof:.0f}%). ")
        above = int((tflops > roof).sum())
        if above:
            text += (f"{above} of its {len(sub)} points sit{'s' * (above == 1)} above the memory roof: the "
                     "replayed operands came from the L2 cache (the caution above), whose bandwidth is higher "
                     "than memory's. ")
        flops, nbytes = work(shape)
        side, why = helpers.regime(host_ms[label, "triton"], at[label].ms[DEFAULT], flops, nbytes)
        text += f"As a call of its own, the default tile at this shape is **{side}** ({why}). "
    text += ("A call that is overhead-bound on its own can still be memory-bound inside a CUDA graph, where "
             "no host launches it: the point on the roofline is that GPU time.\n\n")
    flops_d = work(decode_shape)[0]
    point = lambda t: f"{t} ({us(sweep.ms[t])} {SHORT} µs, {sig(flops_d / sweep.ms[t] / 1e9)} TFLOP/s)"
    model_tflops = reached["model shape"]
    text += (f"**The labels.** At the decode shape, with the times of the sweep's table, the lowest tile is "
             f"{point(worst['tile'])}, the default {point(DEFAULT)}, the highest tile {point(best['tile'])}. At the model shape the default tile's "
             f"{sig(model_tflops)} TFLOP/s "
             + (f"passed this GPU's FMA peak of {fma:g}, which only the tensor cores allow." if model_tflops > fma
                else f"stayed under this GPU's FMA peak of {fma:g}."))
    return text + "\n\n" + gap_not_the_roofs(of_roof["model shape"])


def gap_not_the_roofs(pct) -> str:
    """The model-shape gap to PyTorch on this GPU, read against the roofs (``pct``: the default tile's and PyTorch's
    % of their roof) and against the default tile's own time at one row: fixed cost, or the roofs?"""
    (flops_m, bytes_m), (flops_d, bytes_d) = work(model_shape), work(decode_shape)
    t_model, t_decode = at["model shape"].ms[DEFAULT], at["decode shape"].ms[DEFAULT]
    grew = helpers.verdict(t_model / t_decode)  # one median each, from two comparisons: the 5% rule alone
    text = (f"**The gap, against the roofs.** At the model shape our kernel came out {against(model_v, 'PyTorch')}, "
            f"at {pct[0]:.0f}% of its roof against PyTorch's {pct[1]:.0f}%. ")
    if max(pct) < 50:
        text += "Neither came near its roof, so on this GPU the roofs do not set the gap. "
    text += (f"Our kernel took {us(t_model)} {SHORT} µs at the model shape and {us(t_decode)} at the decode shape "
             f"(medians of the two shapes' rounds; model over decode: {grew.text}"
             + ("" if grew.real else f", {grew.reason}") + f"), for {flops_m / flops_d:.0f} times the arithmetic "
             f"and {bytes_m / bytes_d:.2f} times the bytes. ")
    if t_model / t_decode < bytes_m / bytes_d * (1 + helpers.MIN_EFFECT):
        text += ("Its time did not follow the arithmetic: a call this short is mostly fixed cost (starting the "
                 "programs, filling the K loop's pipeline, writing the tile) and how well each tile keeps the units "
                 "busy, where cuBLAS, tuned for each shape and GPU, is ahead. ")
    return text + ("The blog's T4 gap came from a different clock too (`do_bench`), so the two gaps are not one "
                   "effect measured twice.")


if roofline is not None:
    helpers.md(read_roofline(roofline))

# %% [markdown]
# ## Explore the tiles yourself
#
# `explore(name)` reads one tile of the sweep in words: its grid, its share of useful arithmetic and its
# verdicts against PyTorch and against the default tile, all from the rounds above (nothing is timed again,
# so it always agrees with the table). Change the name in the cell and run it again; the names are those of
# `slower_kernels.TILE_CONFIGS`. To try a tile inside the model, pass it to `helpers.patched(model, projections=...,
# tile=slower_kernels.TILE_CONFIGS[name])`.

# %%
def explore(tile_name):
    """One tile of the decode-shape sweep in a line, from the same measurement as the table."""
    row = tile_row(slower_kernels.TILE_CONFIGS[tile_name])
    vs_default = "" if tile_name == DEFAULT else f", against the default tile {row['vs default: verdict']}"
    print(f"{tile_name} on the decode shape {decode_shape}: {us(row[MS_COL])} {SHORT} µs, {row['programs']} "
          f"programs, {row['useful %']:.1f}% of the tile arithmetic useful; against PyTorch "
          f"{row['vs PyTorch: verdict']}{vs_default} ({CLOCK})")


print("tiles:", ", ".join(slower_kernels.TILE_CONFIGS))
explore(DEFAULT)  # try explore("m16_n128_k64")

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
# stand out of it is "within noise". (The original's own tokens/s need not match chapter 1's or 3's: each
# chapter's rounds run under their own host conditions, and over a long run of the series the host can drift.
# Only ratios within one run's rounds are compared.) Tokens/s there is new tokens over the whole generation
# time, prefill included. Each generation is followed by a one-token one, so the same rounds also give the **wall ms per
# decoded token** (prefill excluded); after the rounds, the profiler counts each configuration's kernels
# and GPU-busy ms per decoded token.
#
# **Predict first**, with a launch budget (chapter 8 applies one to the whole series): a decoded token costs
# the host a price per PyTorch launch times PyTorch's launches, plus a price per launch of ours times
# ours, and the GPU-busy time on top:
#
# $$\text{wall ms per decoded token} \approx n_\text{PyTorch} \cdot p_\text{PyTorch} + n_\text{ours} \cdot p_\text{ours} + \text{GPU-busy ms}$$
#
# - $p_\text{PyTorch}$ comes from the original model in this very comparison: its wall ms per decoded
#   token minus its GPU-busy ms, over its launches per token: the framework's own Python around each
#   launch, and the launch itself.
# - $p_\text{ours}$ is measured, not fitted: our matmul's host time per call at the decode shape (above)
#   divided by its launches per call (one). The last step also runs the two-pass RMSNorm, priced the same
#   way at one row (timed below), so its price is the launch-weighted mean of the two. (Chapter 8 also
#   prices each kind of call of ours on its own, and lets a token take the longer of host and GPU.) The output below
#   prints this reading of the two-pass call beside chapter 3's, the same call timed the same way in
#   chapter 3's process. Where this chapter's reading falls outside the range of chapter 3's own single
#   readings of that call across its sweep, the last step's price is uncertain by at least the distance to
#   that range; the output below says whether it lies inside the range.
# - The launch counts and GPU-busy ms are each swap's own, from the profile.
#
# Each replaced linear layer is still one launch per token (PyTorch's is one cuBLAS kernel, ours one Triton
# kernel), so the count of launches should barely move for the projection steps; what changes is the price
# of each launch, and the kernel time at one row, which the decode timings above compared with PyTorch's.
# The projections read almost all of the model's weights, so if the GPU were the bottleneck this would be
# the most expensive swap of all; if the host is, the budget should predict it.

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
LAST = "all proj + RMSNorm"
replaced = {}
for name, patch in STEPS.items():  # what each step swaps (no generation here)
    with helpers.patched(model, **patch) as counts:
        replaced[name] = dict(counts)
assert [replaced[s]["attention_proj"] for s in STEPS] == [4 * L] * 3
assert [replaced[s]["mlp_proj"] for s in STEPS] == [0, 3 * L, 3 * L]
assert [replaced[s]["lm_head"] for s in STEPS] == [0, 0, 1]
assert [replaced[s]["rmsnorm"] for s in STEPS] == [0, 0, census["rmsnorm"]]
counts = replaced[LAST]
replaced_linear = counts["attention_proj"] + counts["mlp_proj"] + counts["lm_head"]

# The price of one launch of ours, from host time per call (GPU only: the budget needs every CUDA launch).
PREDICTION_BAR = helpers.PREDICTION_BAR  # a prediction within 20% of the measurement holds, as in chapter 8
if helpers.HAS_GPU:
    matmul_us = 1e3 * host_ms["decode shape", "triton"] / launches["decode shape", "triton"]
    norm = model.model.norm  # the model's final RMSNorm: its weight and eps, at one row
    norm_x = torch.randn(SIZES.rmsnorm_decode_rows, model.config.hidden_size, device=DEVICE, dtype=DTYPE)
    two_pass = lambda: slower_kernels.rmsnorm_two_pass(norm_x, norm.weight, norm.variance_epsilon)  # noqa: E731
    with torch.no_grad():  # as chapter 3 times the same call: the weight is a Parameter, and autograd stays out
        norm_launches = helpers.launches_per_call(two_pass)
        norm_us = 1e3 * helpers.host_ms_per_call(two_pass, 200, 5) / norm_launches  # 5 loops of 200, as chapter 3
    n_mm, n_norm = replaced_linear, norm_launches * counts["rmsnorm"]  # our launches per token in the last step
    ours_us = {name: matmul_us for name in STEPS}
    ours_us[LAST] = (n_mm * matmul_us + n_norm * norm_us) / (n_mm + n_norm)
    print(f"price of our launches ({helpers.CLOCK_LABELS['host']}): matmul at {decode_shape} "
          f"{matmul_us:.1f} µs per launch; two-pass RMSNorm at [{SIZES.rmsnorm_decode_rows}, "
          f"{model.config.hidden_size}] {norm_us:.1f} µs per launch ({norm_launches:.0f} launches per call); "
          f"last step, weighted by {n_mm} + {n_norm:.0f} launches per token: {ours_us[LAST]:.1f} µs")
    ch3 = helpers.results().set_index("id")
    if "rmsnorm.host_decode_two_pass_ms" in ch3.index:  # the same call, timed the same way in chapter 3's process
        ch3_us = 1e3 * float(ch3.loc["rmsnorm.host_decode_two_pass_ms", "value"])
        print(f"chapter 3 read the same call at {ch3_us:.1f} µs ({ch3_us / norm_launches:.1f} µs per launch; "
              f"rmsnorm.host_decode_two_pass_ms, one reading in its own process); here {norm_us * norm_launches:.1f}"
              " µs per call")
    sweep3 = helpers.RESULTS_DIR / "rmsnorm_sweep.csv"  # chapter 3's single host readings across its row counts
    spread3 = pd.read_csv(sweep3).get("two_pass_host_ms") if sweep3.exists() else None
    if spread3 is not None:
        lo3, hi3, here = 1e3 * spread3.min(), 1e3 * spread3.max(), norm_us * norm_launches
        print(f"chapter 3's single host readings of the two-pass call across its sweep ({len(spread3)} row counts): "
              f"{lo3:.2f} to {hi3:.2f} µs; this chapter's reading, {here:.2f} µs, lies "
              f"{'inside' if lo3 <= here <= hi3 else 'outside'} that spread")
    else:
        print("chapter 3's sweep of host readings (rmsnorm_sweep.csv, two_pass_host_ms) is not in this run's "
              "results: no spread to set this reading against")
else:
    print("CPU mode: the launch budget needs every CUDA launch per token and the GPU-busy time, which only a "
          "GPU profile gives; no prediction here, the measurement below still runs.")

# %%
comparison = helpers.compare_configs(model, STEPS, tokenizer=tokenizer, profile=True)
profiles = {name: comparison.profile(name) for name in [helpers.ORIGINAL, *STEPS]}
# every replaced module runs once per token: one launch per projection, two per two-pass RMSNorm
assert abs(profiles[LAST].project_launches_per_token - (replaced_linear + 2 * counts["rmsnorm"])) < 1e-9

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
               f"{rounds_note}; prompt {comparison.prompt_len}, {comparison.new_tokens} new")
helpers.record("matmul.attention_proj_replaced", replaced["attention proj"]["attention_proj"], "modules",
               "q, k, v, o per layer")
helpers.record("matmul.tps_attention_proj", tps["attention proj"], "tokens/s",
               f"attention projections on the Triton matmul; {rounds_note}")
helpers.record("matmul.tps_attention_mlp_proj", tps["attention + MLP proj"], "tokens/s",
               f"attention + MLP projections; {rounds_note}")
helpers.record("matmul.tps_all_proj_rmsnorm", tps[LAST], "tokens/s",
               f"all projections incl. lm_head + two-pass RMSNorm; {rounds_note}")
helpers.record("matmul.launches_per_token_all_proj_rmsnorm", profiles[LAST].launches, "launches",
               helpers.launch_note() + ", all projections + two-pass RMSNorm")
RATIO_COLUMNS = ["time ratio to original (median)", "quartiles", "verdict"]  # what every reading below reads
print(f"time ratio: each round's generation time over the original's in the same round, median and quartiles over "
      f"the {len(comparison.orders)} rounds (the verdicts read it, against the A/A floor); tokens/s: new tokens over "
      "the generation time, each configuration's own median over the rounds. Different statistics: the host drifts "
      "between rounds, and only the per-round ratio cancels the drift, so the original's tokens/s over a step's need "
      "not equal the step's median ratio.")
helpers.show(comparison.table().set_index("configuration")[[*RATIO_COLUMNS, "tokens/s (median)"]].round(3))

orig = profiles[helpers.ORIGINAL]
predicted, budgets = {}, {}
if helpers.HAS_GPU:
    torch_us = (orig.wall_ms_per_token - orig.gpu_busy_ms_per_token) * 1e3 / orig.launches
    for name in STEPS:
        budgets[name] = helpers.LaunchBudget(
            torch_us=torch_us, ours_us=ours_us[name],
            fitted_on=("original", "host time per call of the Triton matmul"
                       + (" and the two-pass RMSNorm" if name == LAST else "")))
        predicted[name] = budgets[name].predict_ms(profiles[name])
per_token = []
for name, p in profiles.items():
    row = {"configuration": name, "wall ms per decoded token": p.wall_ms_per_token,
           "kernels per token": helpers.fmt(p.launches_per_token, 0),
           "our launches per token": p.project_launches_per_token,
           "GPU-busy ms per token": helpers.fmt(p.gpu_busy_ms_per_token, 3)}
    if name in predicted:
        error = round(100 * (predicted[name] / p.wall_ms_per_token - 1), 1) + 0.0  # + 0.0: never "-0.0"
        row.update({"predicted wall ms per decoded token": f"{predicted[name]:.2f}", "error %": f"{error:+.1f}"})
    per_token.append(row)
print(f"per decoded token: wall ms from the rounds ({orig.note}); kernels and GPU-busy ms from torch.profiler"
      + (f"; price of a PyTorch launch from the original: ({orig.wall_ms_per_token:.2f} wall ms - "
         f"{orig.gpu_busy_ms_per_token:.2f} GPU-busy ms) / {orig.launches:.0f} = {torch_us:.1f} host µs"
         if predicted else ""))
helpers.show(pd.DataFrame(per_token).fillna("").set_index("configuration"))

# %%
order = [helpers.ORIGINAL_AGAIN, *STEPS]
short = {helpers.ORIGINAL_AGAIN: "original again\n(A/A floor)", "attention proj": "attn proj",
         "attention + MLP proj": "+ MLP proj", "all proj + RMSNorm": "+ lm_head\n+ RMSNorm"}
floor = comparison.floor  # the original against itself, in the same rounds
fig, (ax_tps, ax_r) = plt.subplots(1, 2, figsize=(11, 5))
ax_tps.bar(["original", *(short[s] for s in order)], [tps[helpers.ORIGINAL], *(tps[s] for s in order)],
           color=["tab:blue", *("tab:gray" if s == helpers.ORIGINAL_AGAIN else "tab:blue" for s in order)])
ax_tps.set(ylabel=(f"tokens/s (each configuration's own median\n"
                   f"of {len(comparison.orders)} rounds: not the ratios' statistic)"),
           title="How many tokens per second after each swap?")
med = [comparison.ratios[s].median for s in order]
err = [[m - comparison.ratios[s].low for s, m in zip(order, med)],
       [comparison.ratios[s].high - m for s, m in zip(order, med)]]
ax_r.bar([short[s] for s in order], med, yerr=err, capsize=4,
         color=["tab:gray" if s == helpers.ORIGINAL_AGAIN else "tab:orange" for s in order])
lo, hi, band_label = noise_band(floor)  # helpers.verdict: real above hi or below lo
ax_r.axhspan(lo, hi, color="tab:gray", alpha=0.2, label=band_label)
ax_r.axhline(floor.median, color="tab:gray", ls="--", lw=1.2,
             label=f"A/A floor (original against itself, grey bar): median {floor.median_text}, "
                   f"quartiles {floor.quartiles}")
ax_r.axhline(1.0, color="black", lw=0.8, label="1: as fast as the original")
ax_r.set(ylabel="generation time / original's\n(median of per-round ratios, quartiles)",
         title="How much slower is each step?")
ax_r.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)  # below the axes, off the bars
for ax in (ax_tps, ax_r):
    ax.grid(True, axis="y", alpha=0.3)
fig.suptitle(f"{description}; {helpers.env_info()['gpu']} ({helpers.MODE} mode)", fontsize=9)
fig.tight_layout()
helpers.save_figure(fig, "matmul_model_steps")
plt.show()

# %%
def direction(v):
    return "no change" if not v.real else "slower" if v.ratio > 1 else "faster"


def step(name):
    """A step's verdict, from its per-round time ratios to the original; its tokens/s median beside it."""
    r, v = comparison.ratios[name], verdicts[name]
    return (f"**{v.text}** (time ratio {r.median_text}, quartiles {r.quartiles}; "
            f"{tps[name]:.2f} tokens/s)")


def read_bias(errors):
    """The signs of the budget's errors (predicted / measured - 1, by step) read together: biased, or not."""
    med = 100 * statistics.median(errors.values())
    signs = {e < 0 for e in errors.values()}
    n = len(errors)
    if signs == {True}:
        return (f"**All {n} predictions fell under their measurements** (median error {med:+.1f}%): the budget is "
                "biased low, so the model spends host time per token that it does not count. The additive form "
                "already puts the whole GPU-busy time on top of the host's, the pessimistic side (any overlap would "
                "lower the prediction further), so the missing time is host work the prices leave out. One place it "
                "can hide is around our launches: their price comes from a loop of bare `slower_kernels.matmul` calls, while "
                "in the model each launch also runs its module's `forward` (and, for a projection, "
                "`slower_kernels.linear`'s checks and reshapes): Python the loop never runs; the budget also keeps "
                "PyTorch's launches at the original's price. ")
    if signs == {False}:
        return (f"**All {n} predictions came out above their measurements** (median error {med:+.1f}%): the budget "
                "is biased high, so it counts time the model does not spend: part of the GPU-busy time may hide "
                "behind the host's launching (the additive form puts all of it on top), or a launch costs less "
                "inside `generate()` than in a loop of calls on their own. ")
    over, under = sum(e > 0 for e in errors.values()), sum(e < 0 for e in errors.values())
    lean = ("as many each way, so no lean either way shows" if over == under else
            f"they lean {'high' if over > under else 'low'}, though with mixed signs over {n} steps that is no "
            "established bias")
    return (f"The errors have no common sign ({', '.join(f'{100 * e:+.1f}%' for e in errors.values())}; median "
            f"{med:+.1f}%): {over} of the {n} predictions came out over their measurements, {under} under; {lean}. ")


def over_previous(name, before):
    """A step's generation time over the step before it, round by round (both ran in every round)."""
    return helpers.Ratio.of([t / b for t, b in zip(comparison.seconds[name], comparison.seconds[before])])


def read_two_statistics():
    """Tokens/s medians against median ratios: what each is, and whether they rank the steps alike."""
    by_ratio = sorted(STEPS, key=lambda s: comparison.ratios[s].median)  # fastest step first
    by_tps = sorted(STEPS, key=lambda s: -tps[s])
    of_medians = ", ".join(f"{tps[helpers.ORIGINAL] / tps[s]:.2f}" for s in STEPS)
    of_ratios = ", ".join(f"{comparison.ratios[s].median:.2f}" for s in STEPS)
    text = (f"The tokens/s in brackets are each configuration's own median over the rounds (the original "
            f"{tps[helpers.ORIGINAL]:.2f}, its second copy {tps[helpers.ORIGINAL_AGAIN]:.2f}), while each time ratio "
            "is the median of per-round ratios against the original of the same round, which cancels the host's "
            "drift between rounds. They are different statistics: the original's median tokens/s over each step's "
            f"gives {of_medians} for the three steps, against median ratios of {of_ratios}. ")
    if by_ratio == by_tps:
        return text + "Here both rank the steps the same way; the verdicts read the ratios.\n\n"
    return (text + "Here they even rank the steps differently (fastest first, by tokens/s medians: "
            f"{', '.join(by_tps)}; by median ratios: {', '.join(by_ratio)}): the ratios, paired round by round, "
            "are the measurement, and the verdicts read them.\n\n")


def decode_over_previous(name, before):
    """A step's wall ms per decoded token over the step before it, round by round (prefill excluded)."""
    return helpers.Ratio.of([t / b for t, b in zip(comparison.decode_ms(name).values,
                                                   comparison.decode_ms(before).values)])


def read_increments():
    """The budget's step-to-step changes against the measured ones (wall ms per decoded token): does it get
    the direction of each step right? A total near its measurement can hide a step predicted the wrong way."""
    decode_floor = comparison.decode_ratio(helpers.ORIGINAL_AGAIN)  # the A/A floor of wall ms per decoded token
    names = list(STEPS)
    parts, outcome = [], collections.Counter()  # "same", "wrong", "unseen" (by the rounds), "unpredicted"
    for before, name in itertools.pairwise(names):
        pred_v = helpers.verdict(predicted[name] / predicted[before])  # one number each: the 5% rule alone
        meas_v = helpers.verdict(decode_over_previous(name, before), decode_floor)
        said, got = direction(pred_v), direction(meas_v)
        change = profiles[name].wall_ms_per_token - profiles[before].wall_ms_per_token
        pct = 100 * change / profiles[before].wall_ms_per_token  # a difference of the table's two readings
        pred_change = predicted[name] - predicted[before]
        if said == got:
            kind, how = "same", "the same direction"
        elif pred_v.real and meas_v.real:
            kind, how = "wrong", f"**the wrong direction**: the budget said {said}, the model got {got}"
        elif pred_v.real:
            size = (f"the measured change has the predicted sign, {abs(change):.2f} of the {abs(pred_change):.2f} wall "
                    "ms predicted" if change * pred_change > 0 else "the measured change has the opposite sign")
            kind, how = "unseen", f"**a change the run could not see**: the budget said {said}; {size}"
        else:
            kind, how = "unpredicted", f"**a change the budget did not see**: it said no change, the model got {got}"
        outcome[kind] += 1
        parts.append(f"{name} over {before}: predicted {pred_change:+.2f} wall ms "
                     f"({pred_v.text}), measured {change:+.2f} wall ms ({pct:+.1f}% on the step before's reading "
                     "in the table; per decoded token, the median of the per-round ratios to it: "
                     + (meas_v.text + (f", near {meas_v.threshold_text}" if meas_v.near_threshold else "")
                        if meas_v.real else
                        f"{decode_over_previous(name, before).median_text}, within noise; {meas_v.reason}")
                     + f"): {how}")
    n = len(parts)
    text = ("**Step by step.** The budget also predicts what each swap adds to the one before; per decoded token: "
            + "; ".join(parts) + f". The rounds confirm its direction for {outcome['same']} of the {n} steps")
    if outcome["same"] == n:
        return text + ". "
    misses = [f"{outcome['wrong']} went the wrong way (a miss whatever the totals say)" if outcome["wrong"] else
              "none went the wrong way"]
    if outcome["unseen"]:
        misses.append(f"{outcome['unseen']} the rounds could not tell from noise (within noise: no verdict on the "
                      "sign, so no confirmation either)")
    if outcome["unpredicted"]:
        misses.append(f"{outcome['unpredicted']} changed where the budget predicted no change")
    return (text + "; " + and_list(misses) + ". A prediction near the measured total is not a prediction of each "
            "swap's cost. ")


def recorded(result_id):
    """This machine's recorded row for ``result_id`` (``helpers.results()``), or None where no run has recorded it."""
    table = helpers.results().set_index("id")
    return (table.loc[result_id] if result_id in table.index
            and table.loc[result_id, "value"] == table.loc[result_id, "value"] else None)


def beside_chapter3(last, last_v) -> str:
    """The last step (lm_head and the RMSNorms, over the step before: ``last``, judged ``last_v``) beside chapter 3's
    RMSNorm swap alone, from the ratio and verdict chapter 3 recorded (``rmsnorm.tps_slowdown``): agree, differ
    with overlapping quartiles, or disagree and why it may be."""
    r3 = recorded("rmsnorm.tps_slowdown")
    if r3 is None:
        return ("**Beside chapter 3.** No run has recorded chapter 3's RMSNorm swap on this machine "
                "(`rmsnorm.tps_slowdown`), so there is no measurement of that swap alone to set beside this step.")
    words = r3["verdict"] or helpers.verdict(float(r3["value"])).text  # the verdict chapter 3 recorded
    said = "no change" if words == "within noise" else words.split(" ")[-1]
    change_ms = profiles[LAST].wall_ms_per_token - profiles["attention + MLP proj"].wall_ms_per_token
    r = helpers.Ratio(float(r3["value"]), float(r3["low"]), float(r3["high"]), [])
    ratio3 = f"{r.median_text}, quartiles {r.quartiles}" if r3["low"] == r3["low"] else f"{r.median:.3f}"
    text = (f"**Beside chapter 3.** Chapter 3 swapped the {counts['rmsnorm']} RMSNorms alone into the original "
            f"model: time ratio {ratio3}, **{words}** (`rmsnorm.tps_slowdown`: its own rounds, "
            f"{helpers.recorded_when(r3['time'], helpers.STARTED, 3)}). Here the step that adds "
            f"them, with `lm_head`, came out **{last_v.text}** (generation time over the step before's, round by "
            f"round: {last.median_text}, quartiles {last.quartiles}; per decoded token, the difference of the two "
            f"steps' medians: {change_ms:+.2f} wall ms). ")
    r3_median = r.median_text if r3["low"] == r3["low"] else f"{r.median:.3f}"  # no quartiles: no digits to match
    medians = f"their medians, {r3_median} and {last.median_text}, lie {sides_of_one(r.median, last.median)}"
    unseen = unseen_direction({"chapter 3's swap": said, "this step": direction(last_v)}, medians)
    if unseen:
        return text + unseen + lm_head_note(last_v)
    if said == direction(last_v):
        return text + "The two point the same way. "
    reasons = ("The host's state can differ between the two processes (the paragraph below sets this chapter's "
               "original beside chapter 1's and says whether it moved); and the RMSNorm swap need not cost the same beside our projections as "
               "beside PyTorch's, since what a launch removed or added costs the host depends on what runs around it. ")
    if r3["low"] == r3["low"] and r.low <= last.high and last.low <= r.high:  # the two middle halves overlap
        inside = [f"chapter 3's contain this step's median, {last.median_text}"] if r.low <= last.median <= r.high else []
        inside += [f"this step's contain chapter 3's median, {r.median_text}"] if last.low <= r.median <= last.high else []
        text += ("The verdicts differ while the quartiles overlap" + (f" ({'; '.join(inside)})" if inside else "")
                 + ": the two measurements need not disagree, and this chapter cannot say whether they do. If they "
                 "do, two candidate reasons: " + reasons[0].lower() + reasons[1:])
    else:
        text += ("The two disagree, and this chapter cannot say why: it leaves the question open, with two candidate "
                 "reasons. " + reasons)
    return text + lm_head_note(last_v)


def lm_head_note(last_v) -> str:
    """Where the last step (judged ``last_v``) came out faster while our matmul was slower at the decode shape: why ``lm_head``'s swap
    does not explain it ('' otherwise)."""
    if not (decode_v.real and decode_v.ratio > 1 and last_v.real and last_v.ratio < 1):
        return ""
    return (f"The `lm_head` swap does not explain a step that came out faster: at one row, the decode shape "
            f"(M, K, N) = {tuple(decode_shape)}, our matmul was {decode_v.text} than PyTorch's in {CLOCK} "
            f"above; `lm_head`'s own shape, {(1, model.config.hidden_size, model.config.vocab_size)}, was "
            "not timed. ")


def unseen_direction(directions: dict, medians: str) -> str:
    """Two verdicts' directions ({who: "slower", "faster" or "no change"}) where one or both could not tell a
    direction from noise: no agreement or disagreement on a direction, with where the ``medians`` lie; '' where
    both stood out."""
    quiet = [who for who, d in directions.items() if d == "no change"]
    if not quiet:
        return ""
    if len(quiet) == len(directions):
        return f"Neither stood out of its noise, so neither points a direction ({medians}). "
    loud = next(who for who in directions if who not in quiet)
    return (f"Only {loud} stood out of its noise ({directions[loud]}); {quiet[0]} neither confirms nor contradicts "
            f"it ({medians}). ")


def sides_of_one(a, b) -> str:
    """Where two ratios lie against 1: 'on the same side of 1', 'on opposite sides of 1', or one of them at it."""
    p = (a - 1) * (b - 1)
    return "on the same side of 1" if p > 0 else "on opposite sides of 1" if p < 0 else "with one of them at 1"


def with_chapter3_price():
    """The last step predicted with chapter 3's host reading of the two-pass call instead of this chapter's."""
    r3 = recorded("rmsnorm.host_decode_two_pass_ms")
    if r3 is None:
        return ("**With chapter 3's price.** No run has recorded chapter 3's reading of the two-pass call on this "
                "machine (`rmsnorm.host_decode_two_pass_ms`), so there is no other price to try. ")
    norm3_us = 1e3 * float(r3["value"]) / norm_launches
    ours3_us = (n_mm * matmul_us + n_norm * norm3_us) / (n_mm + n_norm)
    budget3 = helpers.LaunchBudget(torch_us, ours3_us, ("original", "chapter 3's host time of the two-pass call"))
    pred3, wall = budget3.predict_ms(profiles[LAST]), profiles[LAST].wall_ms_per_token
    said = direction(helpers.verdict(pred3 / predicted["attention + MLP proj"]))  # one number each: the 5% rule
    got = direction(helpers.verdict(decode_over_previous(LAST, "attention + MLP proj"),
                                    comparison.decode_ratio(helpers.ORIGINAL_AGAIN)))
    return (f"**With chapter 3's price.** Chapter 3 read the two-pass call at {norm3_us:.1f} host µs per launch, "
            f"against {norm_us:.1f} here. At that price a launch of ours in the last step costs {ours3_us:.1f} host µs "
            f"instead of {ours_us[LAST]:.1f}, and the budget predicts {pred3:.2f} wall ms per decoded token against the "
            f"measured {wall:.2f} ({off_by(pred3, wall)}, "
            f"{'within' if abs(pred3 / wall - 1) <= PREDICTION_BAR else 'outside'} the {100 * PREDICTION_BAR:.0f}% "
            f"bar). For the last step over the one before, it predicts {said} and the rounds found {got}. ")


mlp_over_attn = over_previous("attention + MLP proj", "attention proj")
mlp_v = helpers.verdict(mlp_over_attn, floor)
floor_v = comparison.verdict(helpers.ORIGINAL_AGAIN)  # the floor against the 5% minimum alone
text = (
    f"Over {len(comparison.orders)} shuffled rounds the original against itself gave a time ratio of "
    f"{floor.median_text} ({floor.quartiles}): the run's noise floor"
    + (f". The floor itself stood out of the series' {100 * helpers.MIN_EFFECT:.0f}% minimum: two identical models "
       f"differed by {100 * abs(floor.median - 1):.1f}%, so the host was noisy in these rounds, and a step must "
       f"now differ from 1 by more than {100 * helpers.noise_threshold(floor):.0f}% to count. "
       if floor_v.real else ". ")
    + "Round by round against the "
    f"original: with the {4 * L} attention projections on our matmul, {step('attention proj')}; with the "
    f"{3 * L} MLP projections too, {step('attention + MLP proj')}; with `lm_head` and the two-pass RMSNorms on "
    f"top, {step(LAST)}. The MLP step over the attention step, per generation (prefill included), round by round: "
    f"{mlp_over_attn.median_text} "
    f"({mlp_over_attn.quartiles}), **{mlp_v.text}**"
    + (f" ({mlp_v.reason}): adding the {3 * L} MLP projections made no difference this run can tell. "
       if not mlp_v.real else f": adding the {3 * L} MLP projections made the model {direction(mlp_v)} than the "
       "attention step alone. ")
    + "\n\n" + read_two_statistics()
)
if predicted:
    hits = [n for n in STEPS if abs(predicted[n] / profiles[n].wall_ms_per_token - 1) <= PREDICTION_BAR]
    parts = []
    for name in STEPS:
        p, pred = profiles[name], predicted[name]
        parts.append(f"{name}: {pred:.2f} predicted against {p.wall_ms_per_token:.2f} measured "
                     f"({off_by(pred, p.wall_ms_per_token)})")
    text += ("**The prediction.** Per decoded token, in wall ms: " + "; ".join(parts) + f". The budget "
             f"predicted {len(hits)} of the {len(STEPS)} steps within {100 * PREDICTION_BAR:.0f}%. "
             + read_bias({n: predicted[n] / profiles[n].wall_ms_per_token - 1 for n in STEPS})
             + read_increments())
    # every error beyond the smallest effect the series calls real (5%) is explained with the price it implies
    for name in [n for n in STEPS if abs(predicted[n] / profiles[n].wall_ms_per_token - 1) > helpers.MIN_EFFECT]:
        p, b = profiles[name], budgets[name]
        ours = p.project_launches_per_token
        torch_part = (p.launches - ours) * b.torch_us / 1e3
        implied_us = (p.wall_ms_per_token - p.gpu_busy_ms_per_token - torch_part) * 1e3 / ours
        gap_ms = ours * abs(implied_us - b.ours_us) / 1e3
        text += (f"For {name} the prediction was {off_by(predicted[name], p.wall_ms_per_token)} the measurement"
                 + (f", outside the {100 * PREDICTION_BAR:.0f}%" if name not in hits else "")
                 + f": its {p.launches - ours:.0f} PyTorch "
                 f"launches at {b.torch_us:.1f} host µs make {torch_part:.2f} ms of host time per token and its "
                 f"GPU-busy time is {p.gpu_busy_ms_per_token:.2f} ms, so to match the measurement each of its "
                 f"{ours:.0f} launches of ours would cost {implied_us:.1f} host µs inside `generate()`, against the "
                 f"{b.ours_us:.1f} µs of host time per launch measured in a loop of calls on their own: "
                 f"{gap_ms:.2f} wall ms per token "
                 + ("that the budget does not see" if implied_us > b.ours_us else "that the budget counts and the "
                    "model does not spend")
                 + ", if PyTorch's launches kept the original's price. ")
    text += "\n\n" + with_chapter3_price() + "\n\n"
else:
    text += ("In CPU mode there is no prediction (no CUDA launches or GPU-busy time to put in the budget); the "
             "table above still shows each configuration's interpreter wall ms per decoded token and our "
             "launches per token.\n\n")
if orig.launches_per_token is not None:
    l0, l1, l2, l3 = (profiles[n].launches_per_token for n in [helpers.ORIGINAL, *STEPS])
    hidden = torch.randn(1, 1, model.config.hidden_size, device=DEVICE, dtype=DTYPE)
    with torch.no_grad():  # kernels one call of the model's own (PyTorch) final RMSNorm launches
        torch_norm_launches = helpers.launches_per_call(lambda: model.model.norm(hidden))
    from_norms = counts["rmsnorm"] * (norm_launches - torch_norm_launches)
    from_linear = l3 - l0 - from_norms
    text += (
        f"**Launches.** Per decoded token: {l0:.0f} (original), {l1:.0f} and {l2:.0f} after the two projection "
        f"steps ({l1 - l0:+.0f}, {l2 - l0:+.0f}), {l3:.0f} after the last ({l3 - l0:+.0f}). Of the last step's "
        f"change, the RMSNorm swap accounts for {counts['rmsnorm']} x ({norm_launches:.0f} - "
        f"{torch_norm_launches:.0f}) = {from_norms:+.0f} (one of PyTorch's RMSNorms launches "
        f"{torch_norm_launches:.0f} kernels, ours {norm_launches:.0f}), which leaves {from_linear:+.0f} for the "
        f"{replaced_linear} projections, {100 * from_linear / l0:+.1f}% of the original's count"
        + (": as predicted, the projection swaps change what each launch costs, on the host and on the GPU, "
           "not how many launches there are. " if abs(from_linear) < helpers.MIN_EFFECT * l0 else
           ": more than the one-launch-for-one prediction allows, so on this machine the projection swaps "
           "changed the number of launches too, not only what each costs. ")
    )
# the last step against the one before, round by round (both timed in every round)
last = over_previous(LAST, "attention + MLP proj")
last_v = helpers.verdict(last, floor)
text += (f"The last step's generation time over the step before it, round by round, had a median of "
         f"{last.median_text} ({last.quartiles}): **{last_v.text}**. ")
if not last_v.real:
    text += f"Adding `lm_head` and the RMSNorms made no difference this run can tell ({last_v.reason}). "
else:  # two swaps in one step, and neither timed alone here: the step's verdict is not split between them
    moved = (f", and it took the launches per token from {l2:.0f} to {l3:.0f}" if orig.launches_per_token is not None
             else "")
    text += (f"That step swaps two things at once, `lm_head` and the RMSNorms{moved}; this chapter times them "
             f"only together, so it cannot say which of the two made the model {direction(last_v)} "
             "(chapter 3 times the RMSNorm swap on its own). ")
text += "\n\n" + beside_chapter3(last, last_v) + "\n\n" + helpers.beside_baseline(orig)
helpers.md(text)

# %% [markdown]
# **The step-by-step directions, checked.** The step-by-step reading above compares the budget's direction
# for each step (its predicted change judged by the 5% rule) with the rounds' verdict on the measured one:
# "the same direction" where the two agree, "the wrong direction" where both see a change and the signs
# differ, "a change the run could not see" where the budget predicts a change and the rounds find it within
# noise (within noise: the rounds neither confirm nor refute its sign), and "a change the budget did not see" where
# it predicts none. Set each step's size beside its direction, too: a step can go the right way at a fraction
# of the predicted size.
#
# **The last step with chapter 3's price.** The last step's price rests on this chapter's one host reading
# of the two-pass call (printed beside chapter 3's where the prices were set). Where the two readings
# differ beyond chapter 3's spread, the reading of the last step above moves with the price, and neither
# chapter can say which reading holds. So the reading above also predicts the last step with chapter 3's
# reading in place of this chapter's, where chapter 3 recorded one.

# %% [markdown]
# ### The blog's steps beside yours
#
# The blog gives one number per step, from single runs with no spread, and the last step with its own
# original. Its ratios are read here by the series' rule with no floor of their own (only the smallest effect
# the series calls real, 5%), yours against your run's A/A floor.

# %%
blog_ratio = {"attention proj": B("matmul.tps_original") / B("matmul.tps_attention_proj"),
              "attention + MLP proj": B("matmul.attention_mlp_slowdown"),
              LAST: B("matmul.tps_all_proj_rmsnorm_original") / B("matmul.tps_all_proj_rmsnorm")}


def rounding_allows(before_id, after_id):
    """The range of before / after tokens/s that the post's rounding to whole numbers leaves open (half a unit each
    way), as 'low-high' with its verdicts; None where the post gave decimals."""
    t0, t1 = B(before_id), B(after_id)
    if not (float(t0).is_integer() and float(t1).is_integer()):
        return None
    lo, hi = (t0 - 0.5) / (t1 + 0.5), (t0 + 0.5) / (t1 - 0.5)
    words = {direction(helpers.verdict(lo)), direction(helpers.verdict(hi))}  # one number each: the 5% rule
    return f"{lo:.2f}-{hi:.2f}", (f"{words.pop()} either way" if len(words) == 1 else
                                  "the verdict could go either way")


rounded = {"attention proj": rounding_allows("matmul.tps_original", "matmul.tps_attention_proj")}
blog_rows = [{"step": name, "blog (T4)": f"{blog_ratio[name]:.2f}",
              "blog: verdict": helpers.verdict(blog_ratio[name]).text
              + (f" (rounding allows {rounded[name][0]})" if rounded.get(name) else ""),
              "yours": comparison.ratios[name].median_text,
              "yours: quartiles": f"{comparison.ratios[name].quartiles}",
              "yours: verdict": verdicts[name].text} for name in STEPS]
blog_last = helpers.verdict(blog_ratio[LAST] / blog_ratio["attention + MLP proj"])
blog_rows.append({"step": "last step / the one before", "blog (T4)": f"{blog_last.ratio:.2f}",
                  "blog: verdict": blog_last.text, "yours": last.median_text,
                  "yours: quartiles": f"{last.quartiles}", "yours: verdict": last_v.text})
helpers.show(pd.DataFrame(blog_rows).set_index("step"))


same = direction(blog_last) == direction(last_v)
both_medians = (f"the two medians, {blog_last.ratio:.2f} and {last.median_text}, lie "
                f"{sides_of_one(blog_last.ratio, last.median)}")
helpers.md(
    f"In the blog, the attention projections took the model from {B('matmul.tps_original'):g} to "
    f"{B('matmul.tps_attention_proj'):g} tokens/s"
    + (f" (rounded in the post: {blog_ratio['attention proj']:.2f}x as printed, but the rounding alone allows "
       f"{rounded['attention proj'][0]}, {rounded['attention proj'][1]})" if rounded["attention proj"] else "")
    + f", the MLP projections too made it "
    f"{B('matmul.attention_mlp_slowdown')}x slower, and everything including RMSNorm took it from "
    f"{B('matmul.tps_all_proj_rmsnorm_original')} to {B('matmul.tps_all_proj_rmsnorm')} tokens/s. Its last "
    f"step over the one before: {blog_ratio[LAST]:.2f} / {blog_ratio['attention + MLP proj']:.2f} = "
    f"{blog_last.ratio:.2f}, **{blog_last.text}**; yours, round by round: {last.median_text}, **{last_v.text}**. "
    + (unseen_direction({f"the blog's last step (by the series' {100 * helpers.MIN_EFFECT:.0f}% rule alone)":
                         direction(blog_last), "your last step": direction(last_v)}, both_medians)
       or (f"The two runs agree on the direction of the last step ({direction(last_v)}). " if same else
           f"The two runs disagree on the direction of the last step (blog: {direction(blog_last)}, yours: "
           f"{direction(last_v)}). "))
    + "The blog's ratios come from single runs, so whether its step-to-step change stands out of its noise "
    "cannot be told from the post."
)

# %% [markdown]
# ## Your numbers beside the blog's
#
# Two clocks sit side by side here, as in chapters 2 and 3. The blog's column is its T4 run, timed with
# `triton.testing.do_bench`, which mixes the host's launching with the GPU's work; the `yours` and `h200`
# columns of the kernel rows are GPU time by CUDA-graph replay (interpreter wall time in CPU mode), the
# `host_` rows host time per call, and the tokens/s rows wall time in shuffled rounds. So a kernel row
# beside the blog's figure differs in clock as well as in GPU.

# %%
helpers.show(helpers.compare("matmul.").astype(object).fillna("-"))  # "-": not measured in that run (blog only)

# %% [markdown]
# ## Takeaway
#
# - A tiled matmul gives each program one output tile and walks K in chunks, accumulating in fp32.
# - Checked against PyTorch it agrees to within rounding; how it compares with cuBLAS in time depends on
#   the shape, the GPU and the clock, and the timings above are your hardware's answer.
# - The tile shape changes the GPU time of the very same computation: at one row, most of a tall tile is
#   padding, and the grid's number of programs sets how many multiprocessors can take part. Whether two
#   tiles differ is for rounds against a noise floor to say (a microsecond kernel moves from replay to
#   replay), and which size made the difference only pairs of tiles that differ in that size alone can say:
#   a ranking of tiles that differ in several sizes at once pins its gaps on none of them.
# - In the model, each projection is one launch before the swap and one after, so the count of launches
#   is not where a projection swap can cost; what each launch costs is. The launch budget turns the prices
#   and counts into a prediction of the wall ms per decoded token; when its errors all share a sign, it
#   leaves out (or counts twice) some cost, and the reading above says which way it leans.
# - A step's cost is read from its per-round time ratios against the original, with the A/A floor beside
#   them; the tokens/s medians are another statistic, and can even rank the steps differently.
# - What the compiler made decides what a tile can reach: the table shows `tl.dot` as `fma` or tensor-core
#   `mma` for each GPU, with the registers and shared memory that set how many programs an SM holds.
# - A matmul with one row does about one flop per byte: far left of the ridge point on the roofline, it is
#   at best memory-bound on any GPU (a call this short can sit far below the memory roof, held by its fixed
#   cost), so tensor cores (or their absence) matter at the model shape, not in decoding,
#   unless the tile pads that one row into arithmetic of its own (a 64-row tile on a T4's FMA cores).

# %% [markdown]
# ## Try it yourself
#
# Each exercise changes one thing in the default tile's launch and times the call against the default, in
# shuffled rounds with an A/A floor (`helpers.compare_calls`, the GPU clock; interpreter time in CPU mode).
# Write your guess in `answer` before you run the cell: `"faster"`, `"slower"` or `"same"` (within noise).
# `helpers.check_answer` says whether the measurement agrees. Each cell takes a few seconds.

# %%
BASE = slower_kernels.DEFAULT_TILE.kwargs()  # block sizes, num_warps, num_stages of the default tile
decode_ops, model_ops = make_operands(decode_shape, seed=3), make_operands(model_shape, seed=4)


def launch(ops, **change):
    """A call of our matmul on ``ops`` (x, w) with the default tile, ``change`` overriding its sizes."""
    x, w_ = ops
    return lambda: slower_kernels.matmul(x, w_.t(), **{**BASE, **change})


def in_the_sweep(ratio, floor, **change) -> str:
    """The decode-shape sweep's reading of the tile closest to the exercise's (the default tile with ``change``):
    the same tile where the sweep has it, else the one that differs from it in warps alone, labelled as such.
    For the very tile, the exercise's ``ratio`` (against the default, with its A/A ``floor``) is set beside the
    sweep's, held to the noise threshold of the noisier of the two floors."""
    want = {**BASE, **change}
    sizes = ("block_m", "block_n", "block_k")
    near = [t for t in slower_kernels.TILE_CONFIGS.values() if all(getattr(t, k) == want[k] for k in sizes)]
    if not near:
        return "The sweep above has no tile of these sizes to set beside this exercise."
    t = near[0]
    row, vs = tile_row(t), per_round(t.name, DEFAULT)
    same = t.num_warps == want["num_warps"] and t.num_stages == want["num_stages"]
    # the two sets' medians and quartiles to one number of digits, enough that each set's quartiles differ and
    # the two medians print apart (as beside_recorded does in chapter 6)
    text = lambda v, d: f"{v:#.{d}g}".rstrip(".")  # noqa: E731
    digits = 3
    while digits < 6 and (any(r.low != r.high and text(r.low, digits) == text(r.high, digits) for r in (ratio, vs))
                          or (ratio.median != vs.median and text(ratio.median, digits) == text(vs.median, digits))):
        digits += 1
    reading = (f"The sweep above timed {t.name} with {t.num_warps} warps"
               + (" (the exercise's very tile)" if same else f", where this exercise keeps {want['num_warps']}")
               + (f": {text(vs.median, digits)} of the default tile's time, round by round (quartiles "
                  f"{text(vs.low, digits)}-{text(vs.high, digits)})" if same else
                  f": {row['vs default tile']:.2f} of the default tile's time, round by round")
               + f", {row['vs default: verdict']}, in its own rounds ({CLOCK}).")
    if not same:
        return reading
    # two sets of rounds of the same pair of calls: held against the noisier of their two A/A floors
    noisier = helpers.noisier_floor((floor, floor_decode))
    apart = helpers.verdict(ratio.median / vs.median, noisier)
    off = ratio.median / vs.median - 1
    overlap = ratio.low <= vs.high and vs.low <= ratio.high
    return reading + (
        f" This exercise's {text(ratio.median, digits)} (quartiles {text(ratio.low, digits)}-"
        f"{text(ratio.high, digits)}) is {100 * abs(off):.1f}% {'above' if off > 0 else 'below'} it, "
        + (apart.text.replace("within noise", "within noise of it") if not apart.real else
           f"{apart.text} than it by the series' rule")
        + f" (noise threshold {100 * apart.noise:.0f}%, held against the "
        "noisier of the two sets' A/A floors; the sweep's rounds ran before this chapter's profile, the "
        "exercise's after it)"
        + (", and the two sets' quartiles overlap" if overlap else ", though the two sets' quartiles do not overlap")
        + ": the quartiles show the spread within one set of rounds, not how far the same ratio moves between two "
          "sets of rounds.")


# %% [markdown]
# **1. A shorter tile for one row.** At the decode shape, cut `BLOCK_M` from 64 to 16 and keep everything
# else (4 warps: so this is not the sweep's m16_n64_k32, which has 2; the cell prints that tile's reading
# beside yours). The masked rows load no bytes, but `tl.dot` multiplies them and the accumulator holds them
# in registers. What to expect depends on what does that arithmetic. On a T4, `tl.dot` runs on the FMA cores
# (the compiler table), and the default tile's 64 rows turn one flop per byte into about 64, right of the FMA
# ridge (the T4 reading above): there the padding's arithmetic, not the weights, sets the time, and cutting
# it to a quarter should make the call clearly **faster**. On an H200 the tensor cores do the padding almost
# for free and the bytes are the same, so expect little change: what remains is how the smaller tile uses
# its registers and warps, a small effect that may land on either side of the 5% threshold ("same" or
# slightly "faster").

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"BLOCK_M 16": launch(decode_ops, block_m=16)}, reference=launch(decode_ops))
measured = helpers.check_answer(answer, cmp.ratios["BLOCK_M 16"], cmp.floor,
                     change=f"BLOCK_M 64 -> 16 at the decode shape {decode_shape}", clock=cmp.clock)
print(in_the_sweep(cmp.ratios["BLOCK_M 16"], cmp.floor, block_m=16))

# %% [markdown]
# **2. A wider tile, half the programs.** At the decode shape, double `BLOCK_N` from 64 to 128: each
# program covers twice the columns, and the grid has half as many programs. Count them
# (`cdiv(N, BLOCK_N)`) and compare with the number of SMs of your GPU
# ([chapter 1](01_setup.ipynb#The-GPU-you-are-on)): who reads the weights when programs are fewer than SMs?
# On an H200 (132 SMs) both grids already leave SMs idle at the full size, and halving the programs halves
# the SMs that read the weights: expect **slower**. On a T4 (40 SMs) the grid argument is weaker, since the
# default grid is only a little larger than the GPU, but there the wider tile's fp32 accumulator no longer
# fits in registers (the compiler table's register reading): expect slower there too, for that reason.

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"BLOCK_N 128": launch(decode_ops, block_n=128)}, reference=launch(decode_ops))
measured = helpers.check_answer(answer, cmp.ratios["BLOCK_N 128"], cmp.floor,
                     change=f"BLOCK_N 64 -> 128 at the decode shape {decode_shape}", clock=cmp.clock)
print(in_the_sweep(cmp.ratios["BLOCK_N 128"], cmp.floor, block_n=128))

# %% [markdown]
# **3. No pipelining.** At the model shape, set `num_stages` from 2 to 1: the K loop no longer copies the
# next chunk of $A$ and $B$ into shared memory while it multiplies the current one, so each step waits for
# its loads. On a GPU that has the asynchronous copies (sm_80 and newer, an H200 among them), every K step
# now waits for its loads, at a shape with enough arithmetic to hide them: expect clearly **slower**. On a T4
# (sm_75) there are no asynchronous copies to pipeline with; with the Triton we checked, the two settings
# even compile to the same code for sm_75, so expect "same". (The CPU interpreter ignores `num_stages`:
# there too, the honest guess is known in advance.)

# %%
answer = None  # your guess: "faster", "slower" or "same"
cmp = helpers.compare_calls({"num_stages 1": launch(model_ops, num_stages=1)}, reference=launch(model_ops))
measured = helpers.check_answer(answer, cmp.ratios["num_stages 1"], cmp.floor,
                     change=f"num_stages 2 -> 1 at the model shape {model_shape}", clock=cmp.clock)

# %% [markdown]
# Next, in chapter 5, attention itself.
