"""List the numbers that the chapters' hand-written text quotes from the committed run and that their outputs no
longer show: the stale quotes a new committed run leaves behind.

    python tools/check_quotes.py          # every chapter; exit 1 if any quote is unmatched
    python tools/check_quotes.py 04 05    # some chapters

A chapter's markdown (its .py source) sometimes quotes the committed run ("in the committed H200 run ...").
Those sentences are typed by hand, so a new run can leave them behind. For every such sentence, each number
with a decimal point must be shown, at the precision quoted, in the text outputs of that chapter's committed
notebook or of a chapter the sentence names ("chapter 2"); an approximation ("about 0.4") is not checked.
Figures are not read: a number taken from a plot shows up here, to be checked by eye. Run it after a committed
run, beside ``make_readme.py``.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
MARKER = "committed H200 run"  # how the chapters introduce a quote of the committed run
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
# not quotes: code, maths, tile and target names, and approximations ("about 0.4": worked out, not shown)
NOT_QUOTES = re.compile(r"`[^`]*`|\$[^$]*\$|\b[mnk]\d+_\w+|\bsm_\d+|\b(?:about|roughly) \d[\d,.]*")


def output_text(notebook: Path) -> str:
    """Every text output of a notebook's code cells (streams, markdown and plain-text results) as one string."""
    parts = []
    for cell in json.loads(notebook.read_text())["cells"]:
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append("".join(out["text"]))
            for kind in ("text/markdown", "text/plain"):
                if kind in out.get("data", {}):
                    parts.append("".join(out["data"][kind]))
    return "\n".join(parts)


def numbers(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in NUMBER.findall(text)}


def shown(quoted: str, pool: set[float]) -> bool:
    """Whether a number of ``pool`` rounds to ``quoted`` at the precision it is quoted with."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    value = float(quoted.replace(",", ""))
    return any(abs(x - value) <= 0.5 * 10 ** -decimals + 1e-12 for x in pool)


def markdown_sentences(source: str) -> list[str]:
    """The sentences of a jupytext percent-format source's markdown cells, each on one line."""
    cells = re.split(r"^# %%", source, flags=re.M)
    paragraphs = [" ".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in cell.splitlines()[1:])
                  for cell in cells if cell.startswith(" [markdown]")]
    return [s for p in paragraphs for s in re.split(r"(?<=[.;])\s+(?=[A-Z(*])", p)]


def unmatched(chapter: str, pools: dict) -> list[tuple[str, str]]:
    """(number, sentence) for each decimal number a committed-run sentence of ``chapter`` quotes and no output
    of that chapter, or of the chapters the sentence names, shows."""
    source = next(NOTEBOOKS.glob(f"{chapter}_*.py")).read_text()
    missing = []
    for sentence in markdown_sentences(source):
        if MARKER not in sentence:
            continue
        named = {chapter} | {f"{int(n):02d}" for n in re.findall(r"\bchapters? (\d)\b", sentence)}
        pool = set().union(*(pools[c] for c in named if c in pools))
        for quoted in NUMBER.findall(NOT_QUOTES.sub("", sentence)):
            if "." in quoted and not shown(quoted, pool):
                missing.append((quoted, sentence))
    return missing


def committed_notebooks() -> dict:
    """Chapter number ("04") -> its committed notebook."""
    return {p.name[:2]: p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}


def stale(chapters=None) -> dict:
    """Chapter -> ``unmatched`` of each chapter in ``chapters`` (default: all), every notebook's outputs read once."""
    notebooks = committed_notebooks()
    pools = {c: numbers(output_text(p)) for c, p in notebooks.items()}
    return {c: unmatched(c, pools) for c in chapters or sorted(notebooks)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", help="chapter numbers (default: all)")
    args = parser.parse_args()
    notebooks = committed_notebooks()
    unknown = [c for c in args.chapters if c not in notebooks]
    if unknown:
        parser.error(f"chapters: {unknown} are not chapters here; choose from {sorted(notebooks)}")
    found = 0
    for chapter, missing in stale(args.chapters).items():
        for quoted, sentence in missing:
            found += 1
            print(f"{notebooks[chapter].stem}: {quoted} is not in the outputs: {sentence[:300]}")
    print(f"{found} quoted number{'s' if found != 1 else ''} of the committed run not found in the outputs"
          + (" (a number read off a figure is listed too: check those by eye)" if found else ""))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
