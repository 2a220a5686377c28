"""Re-measure the series' headline ratios on this GPU in a few minutes, beside the committed run.

    python tools/reproduce.py                 # every headline ratio; prints the table
    python tools/reproduce.py --ids full.slowdown add.ratio
    python tools/reproduce.py --commit        # also write figures/<gpu>/reproduce.csv (tracked)

Kernel ratios are GPU time (CUDA-graph replay) at the chapters' shapes, against the PyTorch call and the PyTorch
call against itself (their A/A floor), in shuffled rounds; tokens/s ratios come from one
interleaved comparison in shuffled rounds with the original against itself (the A/A floor). Without
--commit the table goes to runs/<gpu>/reproduce.csv. Chapter 8's re-measure cell runs the same code.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", nargs="*", default=None, help="result ids to reproduce (default: all)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of the comparison (default: SIZES.rounds)")
    parser.add_argument("--commit", action="store_true", help="write figures/<gpu>/reproduce.csv")
    parser.add_argument("--against", type=Path, default=None,
                        help="the results.csv to compare with (default: figures/<gpu>/results.csv)")
    args = parser.parse_args()
    if args.commit:
        os.environ["SLOWER_RESULTS_ROOT"] = str(ROOT / "figures")
    import pandas as pd

    import helpers

    helpers.show_env()
    start = time.perf_counter()
    table = helpers.reproduce(ids=args.ids, rounds=args.rounds, committed=args.against)
    seconds = time.perf_counter() - start
    helpers.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = helpers.RESULTS_DIR / "reproduce.csv"
    helpers.write_csv_atomically(table.assign(seconds=round(seconds), **{k: v for k, v in helpers.env_info().items()
                                                                         if k in ("gpu", "mode", "pinned")}), path)
    with pd.option_context("display.width", 200, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    worst = table["deviation %"].abs().max()
    bar = f"within {100 * helpers.REPRODUCE_BAR:.0f}%"
    print(f"\n{len(table)} ratios in {seconds:.0f} s; largest deviation from the committed run: {worst:.1f}%; "
          f"{(table[bar] == 'yes').sum()} of {(table[bar] != '').sum()} {bar}" if worst == worst else
          f"\n{len(table)} ratios in {seconds:.0f} s; no committed run to compare with")
    print(f"written to {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
