"""Write the generated parts of README.md and RESULTS.md from the committed results; nothing in them is typed
by hand.

    python tools/make_readme.py          # rewrite the marked sections of README.md and RESULTS.md
    python tools/make_readme.py --check  # exit 1 if either is stale (the tests run this)

Sources: figures/h200/results.csv (the committed full H200 run, run times included),
figures/h200/reproduce.csv (its re-measurement by tools/reproduce.py --commit), figures/cpu/runtimes.csv
(CPU-mode run times) and data/catalogue.csv (labels, headline rows and the blog's T4 figures).
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import colab_setup  # noqa: E402

README = ROOT / "README.md"
RESULTS = ROOT / "RESULTS.md"
H200 = ROOT / "figures" / "h200" / "results.csv"
REPRODUCED = H200.parent / "reproduce.csv"
CPU_RUNTIMES = ROOT / "figures" / "cpu" / "runtimes.csv"
BLOG = ROOT / "data" / "catalogue.csv"  # every result id: label, unit, headline, the blog's value

CHAPTERS = {
    "01_setup": "The question, the model, and the baseline: tokens/s with and without the KV cache, and where the time goes",
    "02_add_kernel": "A first Triton kernel (vector add) against torch.add: launch overhead versus bandwidth",
    "03_rmsnorm_unfusing": "RMSNorm fused, then un-fused into two passes on purpose; all 113 swapped into the model",
    "04_matmul_tiles": "A tiled matmul, a tile-size sweep on the decode shape, and the 197 projections swapped",
    "05_attention": "Attention three ways: SDPA, PyTorch ops, and a per-head loop of tiny launches",
    "06_full_stack": "Every custom kernel at once: the slowdown, the launch count, and where the outputs diverge",
    "07_context_sweep": "Does the slowdown hold from 128 to 1024 prompt tokens? Prefill versus decode",
    "08_lessons": "What the numbers taught, side by side with the blog's T4, and what to optimise first",
    "09_faster_on_purpose": "Faster on purpose: the speed won back one fix at a time, against the original and transformers' compiled path",
    "10_close_to_the_floor": "Close to the floor: our own KV cache and decode step, the small kernels folded into the projections, tiles measured per shape",
}



def _read(path: Path) -> dict:
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["id"]: r for r in rows}


def headline_rows() -> list[tuple[str, str]]:
    """(id, label) of the results table's rows: the catalogue's rows marked headline, in its order."""
    return [(rid, row["label"]) for rid, row in _read(BLOG).items() if row["headline"] == "yes"]


def _fmt(value: str) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return value or "-"
    if x != x:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}" if abs(x) >= 0.01 else f"{x:.2g}"


def chapters_table() -> str:
    h200, cpu, blog = _read(H200), _read(CPU_RUNTIMES), _read(BLOG)
    # Rough T4 estimate: the H200 time scaled by how much slower the blog's T4 generated tokens.
    factor = None
    if "full.tps_original" in h200 and blog.get("full.tps_original", {}).get("blog_value"):
        factor = float(h200["full.tps_original"]["value"]) / float(blog["full.tps_original"]["blog_value"])
    has_memory = any(rid.endswith("_gib") for rid in h200)  # a run that recorded each chapter's peak memory
    lines = ["| chapter | what it shows | open | minutes: H200 / CPU mode / T4 (estimate) |"
             + (" peak memory, H200: GPU / host |" if has_memory else ""),
             "|---|---|---|---|" + ("---|" if has_memory else "")]
    for name, what in CHAPTERS.items():
        key = f"runtime.{name}_s"
        t_h200 = float(h200[key]["value"]) if key in h200 else None
        t_cpu = float(cpu[key]["value"]) if key in cpu else None
        t_t4 = t_h200 * factor if (t_h200 and factor) else None
        cell = lambda t: f"{t / 60:.1f}" if t else "-"  # noqa: E731
        gib = [h200.get(f"runtime.{name}_{where}_gib", {}).get("value") for where in ("gpu", "host")]
        memory = " / ".join(f"{float(g):.1f} GiB" for g in gib) if all(gib) else "-"
        lines.append(f"| [{name}](notebooks/{name}.ipynb) | {what} | {colab_setup.badge(name)} | "
                     f"{cell(t_h200)} / {cell(t_cpu)} / {cell(t_t4)} |" + (f" {memory} |" if has_memory else ""))
    note = ("T4 estimate = H200 time x (H200 / blog's T4 tokens/s of the original model"
            + (f", {factor:.1f}x" if factor else "") + "): a rough guide, not a measurement.")
    if has_memory:
        note += (" Peak memory: what PyTorch's allocator reserved on the GPU (the CUDA context, about half a GiB, comes "
                 "on top) and the chapter's host process; a T4 has 15 GB, Colab's free runtime about 12 GB of host "
                 "memory.")
    return "\n".join(lines) + "\n\n" + note


def results_table() -> str:
    h200, blog = _read(H200), _read(BLOG)
    if not h200:
        return "_No H200 run is committed yet: run `python tools/run_series.py --commit --write-outputs` on an H200._"
    any_row = next(iter(h200.values()))
    head = (f"H200 run: {any_row.get('gpu', '?')}, {any_row.get('mode', '?')} mode, torch {any_row.get('torch', '?')}, "
            f"triton {any_row.get('triton', '?')}, transformers {any_row.get('transformers', '?')}; "
            f"model: {any_row.get('model', '?')}.")
    lines = [head, "", "Each chapter ran in its own process, and at batch size 1 the host's pace differs between processes: "
             "compare rows of different chapters through their ratios (each from one process, with its quartiles), "
             "not their absolute tokens/s.", "",
             "| result | chapter | H200 (this repo) | quartiles | verdict (H200) | blog's T4 | unit |",
             "|---|---|---|---|---|---|---|"]
    for rid, label in headline_rows():
        if rid not in h200 and rid not in blog:
            continue
        row = h200.get(rid, {})
        unit = (row or blog.get(rid))["unit"]
        spread = f"{_fmt(row['low'])}-{_fmt(row['high'])}" if row.get("low") and row.get("high") else "-"
        lines.append(f"| {label} | {blog.get(rid, {}).get('chapter', '')[:2] or '-'} | {_fmt(row.get('value', ''))} | "
                     f"{spread} | {row.get('verdict') or '-'} | "
                     f"{blog.get(rid, {}).get('blog_value') or '-'} | {unit} |")  # the blog's figures as printed
    ran = [name for name in CHAPTERS if f"runtime.{name}_s" in h200]
    if len(ran) < len(CHAPTERS):
        lines += ["", f"The committed H200 run covers {', '.join(ran) or 'no chapter'} so far; a dash marks a "
                      "result it does not hold yet."]
    return "\n".join(lines)


def _sizes(h200: dict) -> tuple[int, int] | None:
    """(new tokens, rounds) of the run's tokens/s comparisons, from the note chapter 1 recorded with them."""
    note = h200.get("baseline.tps_kv", {}).get("note", "")
    match = re.search(r"(\d+) new tokens, median of (\d+) shuffled rounds", note)
    return (int(match[1]), int(match[2])) if match else None


def run_section() -> str:
    """When the committed run ran, how long each chapter took, and what its re-measurement brought back."""
    h200 = _read(H200)
    runs = sorted((row for rid, row in h200.items() if rid.startswith("runtime.") and rid.endswith("_s")),
                  key=lambda row: row["time"])
    if not runs:
        return "_No H200 run is committed yet._"
    ends = [datetime.fromisoformat(row["time"]) for row in runs]
    start = ends[0] - timedelta(seconds=float(runs[0]["value"]))
    seconds = {row["id"].removeprefix("runtime.").removesuffix("_s"): float(row["value"]) for row in runs}
    span = (f"{start:%Y-%m-%d}, {start:%H:%M} to {ends[-1]:%H:%M} UTC" if start.date() == ends[-1].date() else
            f"{start:%Y-%m-%d %H:%M} to {ends[-1]:%Y-%m-%d %H:%M} UTC (chapters re-run on different days: see when "
            "each finished)")
    lines = [f"The committed run, on {runs[0]['gpu']}: {span}, the chapters one after another in this order:", "",
             "| chapter | wall time | finished (UTC) |", "|---|---|---|"]
    lines += [f"| {name} | {s:.0f} s | {end:%Y-%m-%d %H:%M} |" for (name, s), end in zip(seconds.items(), ends)]
    main = [s for name, s in seconds.items() if name[:2] < "09"]
    later = [f"chapter {name[:2].lstrip('0')}: {s:.0f} s more" for name, s in seconds.items() if name[:2] >= "09"]
    lines += ["", f"Chapters 1-8: {sum(main):.0f} s" + "".join(f"; {x}" for x in later) + "."]
    sizes = _sizes(h200)
    if sizes:
        lines[-1] += (f" Its tokens/s comparisons timed {sizes[0]}-token generations in {sizes[1]} shuffled rounds"
                      + (" (chapter 10's decode staircase: longer ones, SIZES.new_tokens_decode)." if later[1:] else "."))
        sys.path.insert(0, str(ROOT))
        import helpers  # the sizes the code uses now, to say when the committed run predates them

        full = helpers.SIZES_BY_MODE["full"]
        now = (full.new_tokens, full.rounds)
        if now != sizes:
            lines[-1] += (f" **The code now times {now[0]}-token generations in {now[1]} rounds** "
                          "(`helpers.SIZES_BY_MODE`): these figures, results and notebooks predate that.")
    reproduced = list(_read(REPRODUCED).values())
    if reproduced:
        bar = next(c for c in reproduced[0] if c.startswith("within "))  # "within 10%": helpers.REPRODUCE_BAR
        judged = [r for r in reproduced if r[bar]]
        ratio = lambda x: f"{float(x):.3f}" if abs(float(x)) < 10 else f"{float(x):.1f}"  # noqa: E731
        lines += ["", f"After the chapters it ran with, `python tools/reproduce.py --commit` re-measured the headline ratios in one "
                      f"process ({reproduced[0]['seconds']} s; `figures/h200/reproduce.csv`): "
                      f"{sum(r[bar] == 'yes' for r in judged)} of {len(judged)} came back {bar} of the values the "
                      "chapters recorded.", "",
                  "| result | what | clock | the chapters | reproduce (quartiles) | A/A floor | deviation | verdict |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| `{r['id']}` | {r['what']} | {r['clock']} | {ratio(r['committed'])} | {ratio(r['yours'])} "
                  f"({r['quartiles']}) | {ratio(r['A/A floor'])} | {float(r['deviation %']):+.1f}% | {r['verdict']} |"
                  for r in reproduced]
    return "\n".join(lines)


# (file in figures/h200/, caption): the figures that tell the story, shown once the H200 run has made them
FIGURES = [
    ("full_stack_time_per_token.png", "Where a decoded token's time goes, original against all-custom (chapter 6)"),
    ("lessons_launch_budget.png", "The launch budget: predicted against measured wall ms per decoded token, every "
     "configuration (chapter 8)"),
    ("context_sweep.png", "The slowdown as the prompt grows from 128 to 1024 tokens (chapter 7)"),
]


# The two figures on the front page: where the speed went, and how it came back
FRONT = [
    ("faster_staircase.png", "Decoded tokens per second, one fix at a time, against transformers' compiled path "
     "(chapter 9)"),
    ("full_stack_time_per_token.png", "Where a decoded token's time goes, original against all-custom (chapter 6)"),
]


def _figures(figures) -> str:
    present = [(f, c) for f, c in figures if (H200.parent / f).exists()]
    if not present:
        return "_The figures appear here once a full H200 run of the series is committed._"
    return "\n\n".join(f"**{c}**\n\n![{c}](figures/h200/{f})" for f, c in present)


def front_section() -> str:
    return _figures(FRONT) + "\n\nOn an NVIDIA H200 (the committed run; every result: [RESULTS.md](RESULTS.md))."


def figures_section() -> str:
    return _figures(FRONT[:1] + FIGURES)


# file -> its generated sections, each between <!-- name:start --> and <!-- name:end -->
SECTIONS = {README: {"front": front_section, "chapters": chapters_table},
            RESULTS: {"run": run_section, "results": results_table, "figures": figures_section}}


def render(text: str, sections: dict | None = None) -> str:
    for name, make in (sections or SECTIONS[README]).items():
        pattern = re.compile(rf"(<!-- {name}:start -->).*?(<!-- {name}:end -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"the file lacks the markers <!-- {name}:start --> ... <!-- {name}:end -->")
        text = pattern.sub(lambda m: f"{m.group(1)}\n{make()}\n{m.group(2)}", text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = []
    for path, sections in SECTIONS.items():
        text = path.read_text()
        new = render(text, sections)
        if new != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"{', '.join(stale)} stale: run python tools/make_readme.py")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
