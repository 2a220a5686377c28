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
# # Chapter 8: What the numbers taught
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/slower-on-purpose/slower-on-purpose/blob/main/notebooks/08_lessons.ipynb)
#
# In this chapter you will learn:
# - how to gather every measurement of the series into one table: your hardware, the committed H200 run,
#   and the blog's T4;
# - how much slowdown each swap added, side by side across machines;
# - what a *launch budget* is: how launches per token and tokens/s trade off, and what one launch costs;
# - the lessons of the series, each with the numbers that support it;
# - where an optimiser would start, and how much the numbers say that should help.

# %% [markdown]
# ## The idea
#
# Every earlier chapter recorded its measurements with `helpers.record` into a `results.csv` for the
# hardware it ran on. This chapter only reads. It puts three sources side by side:
#
# - **yours**: what the chapters recorded on this machine (`figures/<your GPU>/results.csv`);
# - **H200**: the series' own run on an NVIDIA H200, committed in `figures/h200/results.csv`;
# - **blog T4**: the figures the blog's post reports for a Tesla T4, labelled as the blog's.
#
# On Colab each notebook opened from a badge gets a fresh machine, so the other chapters' results are
# not there. The chapter still runs: it says what is missing, and one cell re-measures the headline
# numbers on your GPU in a few minutes.

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
import re

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import offset_copy
import pandas as pd

import helpers

helpers.show_env()
SIZES = helpers.SIZES

# %% [markdown]
# ## What has been recorded?

# %%
H200_DIR = helpers.ROOT / "figures" / "h200"
yours_table = helpers.results()
h200_table = helpers.results(H200_DIR / "results.csv")
blog_table = helpers.blog_numbers()
CHAPTERS = {p: int(c.split()[0]) for p, c in helpers.CHAPTER_OF_PREFIX.items()}  # {"baseline": 1, ...}


def notebook_of(prefix):
    """'chapter 3 (03_rmsnorm)' for a result prefix, from the notebook files present."""
    n = CHAPTERS.get(prefix)
    if n is None:
        return prefix
    found = sorted((helpers.ROOT / "notebooks").glob(f"{n:02d}_*.py"))
    return f"chapter {n}" + (f" ({found[0].stem})" if found else "")


status = pd.DataFrame([
    {"source": "yours", "file": str(helpers.results_path().relative_to(helpers.ROOT)),
     "results": len(yours_table)},
    {"source": "H200 (committed)", "file": str((H200_DIR / "results.csv").relative_to(helpers.ROOT)),
     "results": len(h200_table)},
    {"source": "blog T4", "file": "data/blog_numbers.csv",
     "results": int((blog_table["blog_value"] != "").sum())},
])
helpers.show(status)
same_dir = helpers.RESULTS_DIR.resolve() == H200_DIR.resolve()
recorded = set(yours_table["id"])
by_chapter = {p: sorted(i for i in recorded if i.startswith(p + ".")) for p in CHAPTERS}
present = [notebook_of(p) for p, ids in by_chapter.items() if ids]
absent = [notebook_of(p) for p, ids in by_chapter.items() if not ids]
text = f"**Yours** ({helpers.SLUG}, {helpers.MODE} mode): "
text += (f"results from {', '.join(present)}. " if present else "no chapter has recorded results on this machine yet. ")
if absent:
    text += (f"Missing: {', '.join(absent)}. On Colab each chapter runs on its own machine, so its results stay "
             "there; run the chapters one after another in the same runtime to gather them here, or use the "
             "re-measure cell below for the headline numbers. ")
h200_ids = set(h200_table["id"])
h200_present = [notebook_of(p) for p in CHAPTERS if any(i.startswith(p + ".") for i in h200_ids)]
h200_absent = [notebook_of(p) for p in CHAPTERS if not any(i.startswith(p + ".") for i in h200_ids)]
if not len(h200_table):
    text += "**H200**: no committed results yet (`figures/h200/results.csv` is absent), so that column is empty. "
elif h200_absent:
    text += (f"**H200**: {len(h200_table)} committed results, from "
             f"{', '.join(h200_present) if h200_present else 'no chapter yet'}; its column stays empty for "
             f"{', '.join(h200_absent)} until the H200 run of those chapters is committed. ")
else:
    text += f"**H200**: {len(h200_table)} committed results, from every chapter. "
if same_dir:
    text += "You are running on the H200 in full mode, so your column and the H200 column are the same file. "
text += f"**Blog T4**: {status['results'].iloc[2]} figures quoted from the post."
helpers.md(text)

# %% [markdown]
# ## Re-measure the headline numbers here
#
# This cell measures the two numbers the series builds towards, on the machine in front of you: the
# original model's tokens/s and the fully custom model's tokens/s (every RMSNorm, projection and attention
# module on our kernels), plus launches and GPU-busy time per token for both. It uses
# `SIZES.new_tokens` new tokens, fewer than chapter 6's run, so it takes a few minutes on a T4 (the model
# download included) and seconds in CPU mode. Its results are recorded under `lessons.*` so they never
# overwrite chapter 6's. Set `REMEASURE = False` to skip it.

# %%
REMEASURE = True
FULL = helpers.ALL_CUSTOM  # two-pass RMSNorm, every projection, slow attention

if REMEASURE:
    model, tokenizer, description = helpers.load_model()
    print(description)
    P, N = SIZES.prompt_len, SIZES.new_tokens
    with helpers.generation_progress(model, helpers.forwards_per_tps(N) + helpers.forwards_per_profile(N),
                                     "original"):
        fresh_o = helpers.measure_tps(model, P, N, tokenizer)
        prof_o = helpers.profile_decode(model, P, N, tokenizer)
    with helpers.patched(model, **FULL), \
            helpers.generation_progress(model, helpers.forwards_per_tps(N) + helpers.forwards_per_profile(N),
                                        "every custom kernel"):
        fresh_c = helpers.measure_tps(model, P, N, tokenizer)
        prof_c = helpers.profile_decode(model, P, N, tokenizer)
    note = f"re-measured in chapter 8: prompt {P}, {N} new tokens"
    helpers.record("lessons.tps_original", fresh_o.tokens_per_s, "tokens/s", note)
    helpers.record("lessons.tps_custom", fresh_c.tokens_per_s, "tokens/s", note + ", every custom kernel on")
    helpers.record("lessons.slowdown", fresh_o.tokens_per_s / fresh_c.tokens_per_s, "x slower", note)
    helpers.record("lessons.our_launches_per_token_custom", prof_c.project_launches_per_token, "launches",
                   "our Triton kernels per decoded token, every custom kernel on")
    for tag, p in (("original", prof_o), ("custom", prof_c)):
        helpers.record(f"lessons.launches_per_token_{tag}", p.launches, "launches", helpers.launch_note())
        helpers.record(f"lessons.wall_ms_per_token_{tag}", p.wall_ms_per_token, "ms", "decode only, no profiler")
        if p.gpu_busy_ms_per_token is not None:
            helpers.record(f"lessons.gpu_busy_ms_per_token_{tag}", p.gpu_busy_ms_per_token, "ms",
                           "summed kernel time per decoded token")
    print(f"original {fresh_o.tokens_per_s:.2f} tokens/s, custom {fresh_c.tokens_per_s:.2f} tokens/s: "
          f"{fresh_o.tokens_per_s / fresh_c.tokens_per_s:.2f}x slower")
    del model  # the rest of the chapter only reads tables

# %% [markdown]
# ## One table for the whole series
#
# One row per recorded result of chapters 1 to 7 (`helpers.summary_table()`, the table the series script
# prints when it finishes), with a short description where one helps, and three columns of values. Empty
# cells mean that source has no such number: the blog reports only some of them, the H200 column holds
# what has been committed so far, and your column fills as you run the chapters. Read the columns
# as separate stories: absolute numbers move between machines (and even between two runs of the same
# GPU type), so compare ratios within a column rather than raw numbers across columns.

# %%
EXPERIMENTS = [
    ("baseline.tps_kv", "1 baseline: tokens/s with KV cache"),
    ("baseline.tps_no_kv", "1 baseline: tokens/s without KV cache"),
    ("baseline.launches_per_token", "1 baseline: kernel launches per token"),
    ("baseline.gpu_busy_ms_per_token", "1 baseline: GPU-busy ms per token"),
    ("baseline.wall_ms_per_token", "1 baseline: wall ms per token (profiled)"),
    ("baseline.floor_fraction", "1 baseline: fraction of the weight-read floor"),
    ("add.torch_ms", "2 add: PyTorch ms"),
    ("add.triton_ms", "2 add: Triton ms"),
    ("add.ratio", "2 add: Triton / PyTorch"),
    ("rmsnorm.torch_ms", "3 RMSNorm: PyTorch ms"),
    ("rmsnorm.fused_ms", "3 RMSNorm: fused kernel ms"),
    ("rmsnorm.two_pass_ms", "3 RMSNorm: two-pass kernel ms"),
    ("rmsnorm.two_pass_ratio", "3 RMSNorm: two-pass / PyTorch"),
    ("rmsnorm.tps_original", "3 RMSNorm swap: tokens/s before"),
    ("rmsnorm.tps_custom", "3 RMSNorm swap: tokens/s after"),
    ("rmsnorm.launches_per_token_custom", "3 RMSNorm swap: launches per token"),
    ("matmul.max_err", "4 matmul: max error vs PyTorch"),
    ("matmul.torch_ms", "4 matmul: PyTorch ms (model-shaped)"),
    ("matmul.triton_ms", "4 matmul: Triton ms (model-shaped)"),
    ("matmul.decode_torch_ms", "4 matmul: PyTorch ms (one row)"),
    ("matmul.decode_triton_ms", "4 matmul: Triton ms (one row)"),
    ("matmul.tps_original", "4 projections: tokens/s before"),
    ("matmul.tps_attention_proj", "4 projections: attention projections swapped"),
    ("matmul.tps_attention_mlp_proj", "4 projections: + MLP projections"),
    ("matmul.attention_mlp_slowdown", "4 projections: attention + MLP slowdown"),
    ("matmul.tps_all_proj_rmsnorm_original", "4 all projections + RMSNorm: tokens/s before (blog)"),
    ("matmul.tps_all_proj_rmsnorm", "4 all projections + RMSNorm: tokens/s after"),
    ("matmul.launches_per_token_all_proj_rmsnorm", "4 all projections + RMSNorm: launches per token"),
    ("attention.sdpa_ms", "5 attention: SDPA ms (blog shape)"),
    ("attention.torch_ops_ms", "5 attention: PyTorch ops ms (blog shape)"),
    ("attention.slow_ms", "5 attention: per-head loop ms (blog shape)"),
    ("attention.slow_launches", "5 attention: per-head loop launches (blog shape)"),
    ("attention.qwen_sdpa_ms", "5 attention: SDPA ms (Qwen3 shape)"),
    ("attention.qwen_slow_ms", "5 attention: per-head loop ms (Qwen3 shape)"),
    ("attention.tps_original", "5 attention swap: tokens/s before"),
    ("attention.tps_custom", "5 attention swap: tokens/s after"),
    ("attention.launches_per_token_custom", "5 attention swap: launches per token"),
    ("full.tps_original", "6 everything: tokens/s original"),
    ("full.tps_custom", "6 everything: tokens/s custom"),
    ("full.slowdown", "6 everything: slowdown"),
    ("full.launches_per_token_original", "6 everything: launches per token, original"),
    ("full.launches_per_token_custom", "6 everything: launches per token, custom"),
    ("full.gpu_busy_ms_per_token_original", "6 everything: GPU-busy ms per token, original"),
    ("full.gpu_busy_ms_per_token_custom", "6 everything: GPU-busy ms per token, custom"),
    ("full.first_divergence", "6 everything: first differing token"),
]
context_lengths = sorted({int(m.group(1)) for t in (yours_table, h200_table) for i in t["id"]
                          if (m := re.fullmatch(r"context\.(\d+)\.ratio", i))})
EXPERIMENTS += [(f"context.{L}.ratio", f"7 context: slowdown, {L}-token prompt") for L in context_lengths]
EXPERIMENTS += [("context.ratio_range", "7 context: slowdown range (blog)"),
                ("lessons.tps_original", "8 re-measured: tokens/s original"),
                ("lessons.tps_custom", "8 re-measured: tokens/s custom"),
                ("lessons.slowdown", "8 re-measured: slowdown")]

every = helpers.compare()  # every id of the three sources (the re-measured lessons.* and run times included)
summary = helpers.summary_table()  # the same table tools/run_series.py prints at the end of a series run
summary.insert(2, "experiment", summary["id"].map(dict(EXPERIMENTS)).fillna(""))
h200_units = h200_table.set_index("id")["unit"] if len(h200_table) else pd.Series(dtype=str)
summary["unit"] = summary["unit"].fillna(summary["id"].map(h200_units))  # ids only the H200 run has
summary = summary.rename(columns={"h200": "H200", "blog_t4": "blog T4 (the blog's)"})
helpers.show(summary.set_index(["chapter", "id"]))


def value(source, id_):
    """A number from one source ('yours', 'h200' or 'blog'), or None when it has none."""
    row = every[every["id"] == id_]
    if row.empty:
        return None
    v = row[{"yours": "yours", "h200": "h200", "blog": "blog_t4"}[source]].iloc[0]
    v = pd.to_numeric(v, errors="coerce")
    return None if pd.isna(v) else float(v)


YOURS = {"full": f"yours ({helpers.SLUG})", "quick": f"yours ({helpers.SLUG}, quick mode)", "cpu": "yours (CPU mode)"}
SOURCES = {"yours": YOURS[helpers.MODE], "h200": "H200", "blog": "blog T4"}
if same_dir:  # on the H200 in full mode both columns are one file: show it once
    del SOURCES["h200"]
MEASURED = [s for s in SOURCES if s != "blog"]  # the sources with launch counts and profiles
ours_only = [(i, e) for i, e in EXPERIMENTS if not e.endswith("(blog)")]
missing = [i for i, e in ours_only if value("yours", i) is None]
gaps = pd.Series([i.split(".")[0] for i in missing]).value_counts(sort=False)
helpers.md(f"Your column has {len(ours_only) - len(missing)} of the {len(ours_only)} experiments the series measures"
           + ("; missing: " + ", ".join(f"{n} from {notebook_of(p) if p != 'lessons' else 'the re-measure cell'}"
                                        for p, n in gaps.items()) + "." if missing else ".")
           + (" In CPU mode the GPU-only numbers (CUDA kernel counts, GPU-busy times, the bandwidth floor) stay "
              "empty by design." if helpers.MODE == "cpu" and missing else ""))

# %% [markdown]
# ## How much slower did each swap make the model?
#
# Each swap's slowdown is its original tokens/s divided by its custom tokens/s, measured in the same
# run, so it is comparable across machines in a way raw tokens/s are not. Where the blog gives a different
# original for a row (it quotes 23.67 tokens/s before its projection-plus-RMSNorm run), that original is
# used; where it gives only the slowdown (1.41x for attention plus MLP projections), the slowdown is used.
# Its 23 and 17 tokens/s around the attention-projection swap are rounded in the post, so that ratio is
# rough. Note the blog's own inconsistency: swapping all projections *and* RMSNorm (1.33x) cost it less
# than swapping the projections alone (1.41x).

# %%
SWAPS = [  # label, original tokens/s id, custom tokens/s id, the blog's alternative (original id or slowdown id)
    ("RMSNorm", "rmsnorm.tps_original", "rmsnorm.tps_custom", None),
    ("attention projections", "matmul.tps_original", "matmul.tps_attention_proj", None),
    ("attention + MLP projections", "matmul.tps_original", "matmul.tps_attention_mlp_proj",
     ("slowdown", "matmul.attention_mlp_slowdown")),
    ("all projections + RMSNorm", "matmul.tps_original", "matmul.tps_all_proj_rmsnorm",
     ("original", "matmul.tps_all_proj_rmsnorm_original")),
    ("attention (per-head loop)", "attention.tps_original", "attention.tps_custom", None),
    ("everything", "full.tps_original", "full.tps_custom", None),
    ("everything, re-measured", "lessons.tps_original", "lessons.tps_custom", None),
]


def slowdown(source, original_id, custom_id, blog_alt=None):
    if source == "blog" and blog_alt is not None:
        kind, alt = blog_alt
        if kind == "slowdown":
            return value("blog", alt)
        original_id = alt
    o, c = value(source, original_id), value(source, custom_id)
    return o / c if o and c else float("nan")


slow = pd.DataFrame([{"swap": label, **{SOURCES[s]: slowdown(s, o, c, alt) for s in SOURCES}}
                     for label, o, c, alt in SWAPS]).set_index("swap").astype(float)
helpers.show(slow)

fig, ax = plt.subplots(figsize=(8, 5))
height = 0.8 / len(SOURCES)
for k, column in enumerate(slow.columns):
    ys = np.arange(len(slow)) + k * height
    vals = slow[column].astype(float)
    ax.barh(ys, vals.fillna(0), height=height, label=column)
    for y, v in zip(ys, vals):
        ax.text(v if v == v else 0, y, f" {v:.2f}x" if v == v else " n/a", va="center", fontsize=7)
ax.axvline(1, color="black", linewidth=0.8)
ax.set_yticks(np.arange(len(slow)) + height * (len(SOURCES) - 1) / 2, slow.index)
ax.invert_yaxis()
ax.set_xlabel("slowdown (original tokens/s / custom tokens/s, x)")
ax.set_title("How much slower did each swap make the model?")
ax.legend(fontsize=8, loc="lower right")
helpers.save_figure(fig, "lessons_slowdowns")
plt.show()

# %%
def best(series):
    s = series.dropna()
    return (s.idxmax(), s.max()) if len(s) else (None, None)


lines = []
for column in slow.columns:
    label, top = best(slow[column].iloc[:-2].astype(float))  # the partial swaps, before "everything"
    if label is None:
        lines.append(f"- **{column}**: no partial-swap slowdowns recorded.")
        continue
    every_swap = slow[column].get("everything")
    lines.append((f"- **{column}**: the costliest partial swap was *{label}* ({top:.2f}x slower)" if top > 1.05 else
                  f"- **{column}**: no partial swap slowed the model down by more than 5% (the most, *{label}*, "
                  f"ran at {top:.2f}x the original's time per token)")
                 + (f"; everything at once: {every_swap:.2f}x." if every_swap == every_swap and every_swap else "."))
helpers.md("\n".join(lines))

# %% [markdown]
# ## The launch budget
#
# At batch size 1 the GPU mostly waits for the host, so a useful way to read a token's time is as a
# budget of launches: *milliseconds per token = launches per token x average cost of a launch*. On a
# plot of tokens/s against launches per token (both axes logarithmic), every average cost is a straight
# diagonal line. The dashed lines below are such lines; where a configuration's point falls tells you
# what one of its launches cost on average, everything else on the host included.
#
# If every launch cost the same, all configurations would sit on one line. They need not: a PyTorch op
# goes through PyTorch's dispatcher in C++, while each of our launches also runs a Python launcher that
# checks its inputs, and our attention loop adds Python work per head.

# %%
CONFIGS = [  # label, launches-per-token id, tokens/s id
    ("original", "baseline.launches_per_token", "baseline.tps_kv"),
    ("RMSNorm", "rmsnorm.launches_per_token_custom", "rmsnorm.tps_custom"),
    ("projections + RMSNorm", "matmul.launches_per_token_all_proj_rmsnorm", "matmul.tps_all_proj_rmsnorm"),
    ("attention loop", "attention.launches_per_token_custom", "attention.tps_custom"),
    ("original (ch. 6)", "full.launches_per_token_original", "full.tps_original"),
    ("everything", "full.launches_per_token_custom", "full.tps_custom"),
    ("original (re-measured)", "lessons.launches_per_token_original", "lessons.tps_original"),
    ("everything (re-measured)", "lessons.launches_per_token_custom", "lessons.tps_custom"),
]
points = pd.DataFrame([{"source": SOURCES[s], "config": label, "launches per token": value(s, lid),
                        "tokens/s": value(s, tid)}
                       for s in MEASURED for label, lid, tid in CONFIGS]).dropna()
points = points[points["launches per token"] > 0]  # CPU mode counts only our launches: the original has none
points["ms per token"] = 1000 / points["tokens/s"]
points["µs per launch"] = 1000 * points["ms per token"] / points["launches per token"]
helpers.show(points)

fig, ax = plt.subplots(figsize=(7.5, 5))
if len(points):
    ax.set_xscale("log")
    ax.set_yscale("log")
    # the view is the data's, with a margin of a factor 1.6 each way; the guide lines are cut to it
    x0, x1 = points["launches per token"].min() / 1.6, points["launches per token"].max() * 1.6
    y0, y1 = points["tokens/s"].min() / 1.6, points["tokens/s"].max() * 1.6
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    xs = np.geomspace(x0, x1, 50)
    us_lo, us_hi = 1e6 / (x1 * y1), 1e6 / (x0 * y0)  # the launch costs whose lines cross the view
    steps = (1, 3) if us_hi / us_lo < 1e3 else (1,)
    for us in [m * 10.0**k for k in range(-2, 7) for m in steps]:
        if not us_lo <= us <= us_hi:
            continue
        ax.plot(xs, 1e6 / (us * xs), color="gray", linestyle="--", linewidth=0.7)  # every launch costs `us` µs
        x_end = min(x1, 1e6 / (us * y0))  # where the line leaves the view, to the right or at the bottom
        ax.annotate(f"{us:g} µs/launch", (x_end, 1e6 / (us * x_end)), xytext=(-3, 3), textcoords="offset points",
                    fontsize=7, color="gray", ha="right", va="bottom",
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.8))
    # colour = configuration, shape = source: labels beside the points would pile up where several
    # configurations share a launch count
    palette = [c for i, c in enumerate(plt.cm.tab10.colors) if i != 7]  # tab10's grey is the legend's
    colors = dict(zip([label for label, _, _ in CONFIGS], palette))
    markers = dict(zip(points["source"].unique(), "os"))
    style = dict(markersize=8, markeredgecolor="black", markeredgewidth=0.5, linestyle="")
    # points that would cover one another (closer than a marker's width) are drawn side by side around
    # their middle, each joined by a short line to a black dot at its exact position
    where = ax.transData.transform(points[["launches per token", "tokens/s"]].to_numpy()) * 72 / fig.dpi
    groups = []  # lists of row positions whose points overlap, positions in points (1/72 inch) on the page
    for i, xy in enumerate(where):
        near = next((g for g in groups if min(np.hypot(*(where[k] - xy)) for k in g) < 9), None)
        if near is None:
            groups.append([i])
        else:
            near.append(i)
    moved = False
    for group in groups:
        middle = where[group].mean(axis=0)
        radius = 8 if len(group) <= 3 else 5 / np.sin(np.pi / len(group))
        # each point moves out from the middle in its own direction (coincident points: left, then around),
        # so the markers keep the order the points themselves have
        own = {k: np.arctan2(*(where[k] - middle)[::-1]) if np.hypot(*(where[k] - middle)) > 0.5 else np.pi
               for k in group}
        group = sorted(group, key=lambda k: own[k] % (2 * np.pi))
        for j, i in enumerate(group):
            row = points.iloc[i]
            x, y = row["launches per token"], row["tokens/s"]
            dx, dy = 0.0, 0.0
            if len(group) > 1:
                angle = own[group[0]] + 2 * np.pi * j / len(group)
                dx, dy = middle + radius * np.array([np.cos(angle), np.sin(angle)]) - where[i]
                ax.annotate("", (x, y), xytext=(dx, dy), textcoords="offset points", zorder=2,
                            arrowprops=dict(arrowstyle="-", color="black", linewidth=0.6, shrinkA=0, shrinkB=0))
                ax.plot(x, y, marker="o", markersize=2.5, color="black", linestyle="", zorder=4)
                moved = True
            ax.plot(x, y, marker=markers[row["source"]], color=colors[row["config"]], zorder=3,
                    transform=offset_copy(ax.transData, fig=fig, x=dx, y=dy, units="points"), **style)
    shown = set(points["config"])
    handles = [Patch(facecolor=c, edgecolor="black", linewidth=0.5, label=cfg)
               for cfg, c in colors.items() if cfg in shown]
    handles += [Line2D([], [], marker=m, color="lightgray", label=f"measured by: {src}", **style)
                for src, m in markers.items()]
    if moved:
        handles.append(Line2D([], [], marker="o", markersize=2.5, color="black", linestyle="",
                              label="exact position of a point\ndrawn beside it (overlap)"))
    ax.legend(handles=handles, title="colour: configuration, shape: source", fontsize=7, title_fontsize=8,
              loc="upper left", bbox_to_anchor=(1.01, 1))
    helpers.plain_log_ticks(ax)
ax.set_xlabel("kernel launches per generated token" + ("" if helpers.HAS_GPU else " (CPU mode: ours only)"))
ax.set_ylabel("tokens/s")
ax.set_title("The launch budget: what does one launch cost, configuration by configuration?")
ax.grid(True, which="both", alpha=0.3)
helpers.save_figure(fig, "lessons_launch_budget")
plt.show()

# %% [markdown]
# The re-measure cell also counted how many of the custom model's launches are ours. With that, the two
# prices can be separated: the original model's time per token divided by its launches is the cost of a
# PyTorch launch (an upper bound, since it also carries everything else the step does); whatever the
# custom model's time per token has left after its PyTorch launches are paid for, divided by our launches,
# is the cost of one of ours (a lower bound, since the PyTorch launches were priced high).

# %%
def launch_prices(source):
    """(µs per PyTorch launch, µs per launch of ours) from the re-measured decode profiles, or None."""
    ids = ("lessons.wall_ms_per_token_original", "lessons.launches_per_token_original",
           "lessons.wall_ms_per_token_custom", "lessons.launches_per_token_custom",
           "lessons.our_launches_per_token_custom")
    got = [value(source, i) for i in ids]
    if any(v is None for v in got) or not helpers.HAS_GPU and source == "yours":
        return None
    wo, lo_, wc, lc, ours = got
    if lo_ <= 0 or ours <= 0:
        return None
    torch_us = 1000 * wo / lo_
    ours_us = 1000 * (wc - (lc - ours) * torch_us / 1000) / ours
    return torch_us, ours_us if ours_us > 0 else None


lines = []
for source_key in MEASURED:
    label = SOURCES[source_key]
    sub = points[points["source"] == label]
    if len(sub) == 1:
        only = sub.iloc[0]
        lines.append(f"- **{label}**: one configuration so far, *{only['config']}*, at "
                     f"{only['µs per launch']:.1f} µs per launch on average.")
    elif len(sub):
        cheap, dear = sub.loc[sub["µs per launch"].idxmin()], sub.loc[sub["µs per launch"].idxmax()]
        lines.append(f"- **{label}**: the average launch cost ranged from {cheap['µs per launch']:.1f} µs "
                     f"(*{cheap['config']}*) to {dear['µs per launch']:.1f} µs (*{dear['config']}*).")
    prices = launch_prices(source_key)
    if prices and prices[1] is None:
        lines.append(f"  Separated: a PyTorch launch cost at most **{prices[0]:.1f} µs**; pricing the custom "
                     "model's PyTorch launches that high leaves nothing for ours, so this run cannot price them.")
    elif prices:
        t_us, o_us = prices
        lines.append(f"  Separated: a PyTorch launch cost at most **{t_us:.1f} µs** of wall time, "
                     f"one of ours at least **{o_us:.1f} µs**, {o_us / t_us:.1f}x as much or more. "
                     + ("So the custom model is slow twice over: more launches, and dearer ones."
                        if o_us > 1.2 * t_us else
                        "These bounds do not show ours to be dearer; the launch count is what they vouch for."))
if not lines:
    lines.append("No configuration has both a launch count and a tokens/s value yet: run chapters 1 to 6 (or the "
                 "re-measure cell) on this machine, or wait for the committed H200 results.")
elif not helpers.HAS_GPU:
    lines.append("In CPU mode only our own launches are counted and each runs in the interpreter, so these costs "
                 "describe the interpreter, not a GPU.")
helpers.md("\n".join(lines))

# %% [markdown]
# ## Lessons, with their evidence
#
# Each lesson below is built from the table: it uses your number where you have one, else the H200's,
# else the blog's, and says which.

# %%
def have(*ids):
    """(values, source label) from the first source that has every one of ``ids``: yours, then H200,
    then the blog; None when no single source has them all (a lesson never mixes machines)."""
    for s in SOURCES:
        got = [value(s, i) for i in ids]
        if all(v is not None for v in got):
            return got, SOURCES[s]
    return None


times = helpers.versus  # "12x slower" / "1.3x faster": time a against time b


lessons = []
if (g := have("add.ratio", "matmul.torch_ms", "matmul.triton_ms", "matmul.max_err")):
    (add_r, mt, mx, err), s = g
    title = ("A correct kernel is not a fast one." if add_r > 1 and mx > mt else
             "A correct kernel can be slower or faster than PyTorch's.")
    lessons.append(f"**{title}** The Triton add took {add_r:.2f}x PyTorch's time and the tiled matmul "
                   f"{mx / mt:.2f}x PyTorch's (cuBLAS on a GPU), with a max error of {err:.3g} ({s}).")
if (g := have("rmsnorm.two_pass_ratio")):
    (r,), s = g
    title, against_fused = "Un-fusing costs a launch and a second read.", ""
    if (h := have("rmsnorm.fused_ms", "rmsnorm.two_pass_ms")):
        (f, t), sf = h
        title = title if t > f else "Un-fusing cost nothing measurable here."
        against_fused = (f"Split in two (the input read twice, an intermediate written, two launches), our "
                         f"RMSNorm took {t / f:.2f}x the time of our fused one ({sf}). ")
    lessons.append(f"**{title}** {against_fused}Against PyTorch's own RMSNorm, a chain of small kernels, the two-pass "
                   f"kernel took {r:.2f}x the time ({s})"
                   + (": slower, as the blog found." if r > 1 else
                      ": faster, because that chain launches more kernels than our two."))
if (g := have("baseline.gpu_busy_ms_per_token", "baseline.wall_ms_per_token")):
    (b, w), s = g
    title = ("At batch size 1 the GPU mostly waits." if b < 0.5 * w else
             "At batch size 1 the GPU was busy most of the time on this machine.")
    lessons.append(f"**{title}** The unmodified model kept the GPU busy for "
                   f"{b:.2f} of {w:.2f} ms per token ({100 * b / w:.0f}%, {s}).")
if (g := have("attention.sdpa_ms", "attention.slow_ms", "attention.slow_launches")):
    (a, b, n), s = g
    lessons.append(f"**Launch count is a price list.** A Python loop over heads made attention "
                   f"{times(b, a)} than SDPA, with {n:.0f} launches per call ({s}).")
elif (g := have("attention.sdpa_ms", "attention.slow_ms")):
    (a, b), s = g
    lessons.append(f"**Launch count is a price list.** A Python loop over heads made attention "
                   f"{times(b, a)} than SDPA ({s}).")
if (g := have("matmul.tps_original", "matmul.tps_all_proj_rmsnorm", "attention.tps_original",
              "attention.tps_custom", "full.tps_original", "full.tps_custom")):
    (mo, mc, ao, ac, fo, fc), s = g
    part = (1000 / mc - 1000 / mo) + (1000 / ac - 1000 / ao)
    whole = 1000 / fc - 1000 / fo
    title = ("Costs add up in milliseconds per token." if abs(part - whole) < 0.25 * abs(whole) else
             "Costs did not simply add up in milliseconds per token.")
    lessons.append(f"**{title}** Projections plus RMSNorm added "
                   f"{1000 / mc - 1000 / mo:.1f} ms per token, the attention loop {1000 / ac - 1000 / ao:.1f} ms: "
                   f"{part:.1f} ms together, against {whole:.1f} ms measured with everything on ({s}).")
if context_lengths and (g := have(f"context.{context_lengths[0]}.ratio", f"context.{context_lengths[-1]}.ratio")):
    (r0, r1), s = g
    steady = abs(r1 - r0) < 0.25 * r0
    lessons.append(("**The slowdown held as the context grew.** " if steady else
                    "**The slowdown moved with the context.** ")
                   + f"From {context_lengths[0]} to {context_lengths[-1]} prompt tokens it went from {r0:.2f}x "
                   f"to {r1:.2f}x ({s}). "
                   + ("The custom kernels add about the same cost to every decode step, whatever the context."
                      if steady else "Chapter 7's prefill and decode split shows which phase moved it."))
if (g := have("full.first_divergence")):
    (d,), s = g
    lessons.append("**Same math, different bits.** "
                   + (f"The fully custom model's greedy text first differed at generated token {d:.0f} ({s}): "
                      "a different order of additions flipped a near-tie." if d >= 0 else
                      f"The fully custom model's greedy text never differed from the original's in that run ({s}), "
                      "though it could: the order of additions is not the same."))
if lessons:
    helpers.md("\n\n".join(f"{i}. {t}" for i, t in enumerate(lessons, 1)))
else:
    helpers.md("No lesson has its evidence yet: run the chapters first, or wait for the committed H200 results.")

# %% [markdown]
# ## The road ahead
#
# The blog's closing idea is to do the opposite next: start from this slow model and win the speed back,
# one fix at a time. The numbers say where to start. Two estimates, from measured values only:
#
# 1. **Fuse the attention loop into one kernel per layer.** Chapter 5 counted the launches of one call
#    of the loop; a fused kernel makes one. The launches saved per token, at the custom model's average
#    cost per launch, give the time saved, and so a predicted tokens/s.
# 2. **Stop paying for launches at all.** Capturing a whole decode step as a CUDA graph (PyTorch's
#    `torch.compile` with a static KV cache does this) replays every kernel with one launch. What is left
#    is the GPU-busy time per token, so its inverse is a ceiling on tokens/s for that set of kernels.
#    Better kernels can then shrink the GPU-busy time itself, down to chapter 1's weight-read floor: the
#    time it takes just to read every weight once.

# %%
rows = []
for s in MEASURED:
    fo, fc = value(s, "full.tps_original"), value(s, "full.tps_custom")
    lc = value(s, "full.launches_per_token_custom")
    per_call, modules = value(s, "attention.qwen_slow_launches"), value(s, "attention.modules_replaced")
    bo, bc = value(s, "full.gpu_busy_ms_per_token_original"), value(s, "full.gpu_busy_ms_per_token_custom")
    if not (fo and fc):
        continue
    row = {"source": SOURCES[s], "original tokens/s": fo, "custom tokens/s": fc}
    if lc and per_call and modules:
        saved = modules * (per_call - 1)  # launches per token: the loop's, less one fused kernel per layer
        ms_saved = saved * (1000 / fc) / lc  # at the custom model's average cost per launch
        row["launches saved per token"] = saved
        row["custom, attention fused (predicted)"] = 1000 / max(1000 / fc - ms_saved, 1e-9)
    if bc:
        row["custom, launches free (ceiling)"] = 1000 / bc
    if bo:
        row["original, launches free (ceiling)"] = 1000 / bo
    rows.append(row)
road = pd.DataFrame(rows)
if len(road):
    helpers.show(road.set_index("source"))
    lines = []
    for r in road.to_dict("records"):
        parts = []
        fused = r.get("custom, attention fused (predicted)")
        if fused is not None and fused == fused:
            parts.append(f"fusing the attention loop saves about {r['launches saved per token']:.0f} launches per "
                         f"token, which should take the custom model from {r['custom tokens/s']:.1f} to about "
                         f"{fused:.1f} tokens/s ({fused / r['custom tokens/s']:.2f}x"
                         + (f"; the original ran {r['original tokens/s']:.1f})." if fused < r["original tokens/s"]
                            else f", past the original's {r['original tokens/s']:.1f})."))
        ceil_c = r.get("custom, launches free (ceiling)")
        if ceil_c is not None and ceil_c == ceil_c:
            ceil_o = r.get("original, launches free (ceiling)")
            parts.append(f"With launches free, the custom kernels alone would allow {ceil_c:.0f} tokens/s, "
                         f"{ceil_c / r['original tokens/s']:.1f}x the eager original's speed"
                         + (f" (PyTorch's own kernels: {ceil_o:.0f} tokens/s)." if ceil_o is not None and ceil_o == ceil_o
                            else ".")
                         + (" Launch overhead is the first thing to remove; kernel quality comes after."
                            if ceil_c > r["original tokens/s"] else
                            " Here the kernels themselves already cost more than the launches: kernel quality first."))
        else:
            parts.append("The launch-free ceiling needs GPU-busy times, which only a GPU run records.")
        lines.append(f"- **{r['source']}**: " + " ".join(parts))
    helpers.md("\n".join(lines))
else:
    helpers.md("Chapter 6's numbers are missing for this machine and the H200, so the road ahead cannot be "
               "priced yet. The re-measure cell above gives the headline slowdown on your GPU.")

# %% [markdown]
# ## Every recorded result
#
# For reference, everything in your results file, the committed H200 file and the blog's numbers, by id
# (including the run times of each notebook when the series was run by its script).

# %%
helpers.show(every)

# %% [markdown]
# ## Takeaway
#
# - Put every measurement in one table, with the machine it came from. Ratios measured within one run
#   travel between machines; raw tokens/s do not.
# - A simple model of a token's time: launches x the average price of one launch. The launch-budget
#   plot tests that model on each machine and prices a launch.
# - The cheapest way to make a model slow is to multiply its launches; the first way to make it fast
#   again is to remove them, by fusing kernels or by capturing the whole step as one graph.
#
# That is the series. The kernels are in `kernels/`, the measurements in `helpers.py`, and every number
# above can be re-made by running the chapters in order.
