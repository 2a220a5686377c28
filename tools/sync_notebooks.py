"""Keep the notebooks in step with their sources.

For each ``notebooks/NN_name.py`` (the source of truth, jupytext percent format):
1. rewrite its setup cell and its "Open in Colab" badge from ``colab_setup.py`` (where REPO_URL lives), and
   give the .ipynb Colab's GPU (T4) runtime metadata;
2. regenerate ``NN_name.ipynb`` from it with jupytext, keeping the outputs already stored there for the
   code cells that have not changed (a changed cell loses its outputs: they came from other code).

    python tools/sync_notebooks.py          # fix everything
    python tools/sync_notebooks.py --check  # exit 1 if anything would change (used by the tests)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import colab_setup  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
SETUP_MARK = "colab_setup.prepare()"
CELL = re.compile(r"^# %%.*$", re.M)


SETUP_HEADER = '# %% tags=["hide-input"]\n'  # the setup cell's jupytext header: MyST-NB folds its code


def notebook_sources() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def synced_source(path: Path) -> str:
    """The source text with the current setup cell and badge."""
    text = path.read_text()
    badge = "# " + colab_setup.badge(path.stem)
    text = re.sub(r"^# \[!\[Open In Colab\].*$", lambda _: badge, text, flags=re.M)
    starts = [m.start() for m in CELL.finditer(text)] + [len(text)]
    for a, b in zip(starts, starts[1:]):
        if SETUP_MARK in text[a:b]:
            # folded where a reader meets it: a Colab form (its #@title line) and, on the site, a hidden input
            return text[:a] + SETUP_HEADER + colab_setup.SETUP_CELL + "\n\n" + text[b:].lstrip("\n")
    raise SystemExit(f"{path.name}: no setup cell (a code cell calling {SETUP_MARK})")


def pair_differences(path: Path) -> list[str]:
    """Cells where NN_name.ipynb disagrees with NN_name.py, outputs aside."""
    import jupytext

    ipynb = path.with_suffix(".ipynb")
    if not ipynb.exists():
        return [f"{ipynb.name} is missing"]
    src, gen = jupytext.read(path), jupytext.read(ipynb)
    a = [(c.cell_type, c.source.strip()) for c in src.cells]
    b = [(c.cell_type, c.source.strip()) for c in gen.cells]
    problems = [f"{path.stem}: no Colab GPU metadata in {ipynb.name}"
                for k, v in colab_setup.COLAB_METADATA.items() if gen.metadata.get(k) != v][:1]
    if len(a) != len(b):
        return problems + [f"{path.stem}: {len(a)} cells in .py, {len(b)} in .ipynb"]
    return problems + [f"{path.stem}: cell {i} differs" for i, (x, y) in enumerate(zip(a, b)) if x != y]


def drop_stale_outputs(nb, stored) -> list[int]:
    """Clear the outputs of code cells in ``nb`` whose source differs from that of the ``stored`` cell
    jupytext took their outputs from; returns their indices.

    Outputs stay only under the exact code that made them. They record the last execution of the
    notebook: an unchanged cell keeps its outputs even where ``helpers`` or ``slower_kernels`` changed since.
    """
    from jupytext.combine import map_outputs_to_inputs

    cleared = []
    for i, (cell, j) in enumerate(zip(nb.cells, map_outputs_to_inputs(nb.cells, stored.cells))):
        if cell.cell_type != "code" or (j is not None and stored.cells[j].source == cell.source):
            continue
        if cell.get("outputs") or cell.get("execution_count") is not None:
            cell.outputs, cell.execution_count = [], None
            cleared.append(i)
    return cleared


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report drift, change nothing")
    args = parser.parse_args()
    import jupytext

    problems = []
    for path in notebook_sources():
        text = synced_source(path)
        if text != path.read_text():
            if args.check:
                problems.append(f"{path.name}: setup cell or badge is out of date")
            else:
                path.write_text(text)
        if args.check:
            problems += pair_differences(path)
            continue
        ipynb = path.with_suffix(".ipynb")
        nb = jupytext.read(path)
        if ipynb.exists():  # keep stored outputs (jupytext's --update), except under changed code
            stored = jupytext.read(ipynb)
            nb = jupytext.combine.combine_inputs_with_outputs(nb, stored)
            cleared = drop_stale_outputs(nb, stored)
            if cleared:
                print(f"{ipynb.name}: cleared the outputs of changed cells {cleared}")
        nb.metadata.update(colab_setup.COLAB_METADATA)  # open on a GPU runtime from a badge
        jupytext.write(nb, ipynb)
    for p in problems:
        print(p)
    if problems:
        print("fix with: python tools/sync_notebooks.py")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
