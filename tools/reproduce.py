"""Re-measure the series' headline ratios on this GPU in a few minutes, beside the committed run.

    python tools/reproduce.py                 # every headline ratio; prints the table
    python tools/reproduce.py --ids full.slowdown add.ratio
    python tools/reproduce.py --commit        # also write figures/<gpu>/reproduce.csv (tracked)
    python tools/reproduce.py --processes 3   # three fresh processes, one after another: the spread between them

Kernel ratios are GPU time (CUDA-graph replay) at the chapters' shapes, against the PyTorch call and the PyTorch
call against itself (their A/A floor), in shuffled rounds; tokens/s ratios come from interleaved
comparisons in shuffled rounds with the original against itself (the A/A floor): SIZES.rounds_small rounds for
the effects near the noise (helpers.SMALL_EFFECTS), SIZES.rounds for the rest. Without
--commit the table goes to runs/<gpu>/reproduce.csv. Chapter 8's re-measure cell runs the same code.

At batch size 1 a tokens/s ratio depends on the host, and the host's speed differs from one process to the
next by more than the quartiles within one process show. ``--processes N`` runs the whole measurement in N
fresh processes, one after another (never side by side), and reports for each ratio the median of the N
processes' medians with the range between them.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_processes(args) -> list:
    """Run the measurement in ``args.processes`` fresh processes, one after another; their tables."""
    import subprocess
    import tempfile

    import pandas as pd

    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.processes):
            out = Path(tmp) / f"process_{i}.csv"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out)]
            cmd += ["--ids", *args.ids] if args.ids else []
            cmd += ["--rounds", str(args.rounds)] if args.rounds else []
            cmd += ["--against", str(args.against)] if args.against else []
            print(f"process {i + 1} of {args.processes}", flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            tables.append(pd.read_csv(out))
    return tables


def combine(tables: list, bar: float):
    """One row per ratio from several processes' tables: the median of their medians ("yours"), the range
    between the processes, the deviation of the median from the committed value and whether it is within
    ``bar``, and how many of the processes alone were within it."""
    import pandas as pd

    every = pd.concat([t.assign(process=i) for i, t in enumerate(tables)])
    rows = []
    for key, group in every.groupby("id", sort=False):
        first = group.iloc[0]
        yours = float(group["yours"].median())
        committed = first["committed"]
        deviation = 100 * (yours / committed - 1) if committed == committed else float("nan")
        alone = (100 * (group["yours"] / committed - 1)).abs() <= 100 * bar if committed == committed else []
        rows.append({"id": key, "what": first["what"], "clock": first["clock"], "yours": yours,
                     "between processes": f"{group['yours'].min():.3f}-{group['yours'].max():.3f}",
                     "processes": len(group), "committed": committed, "deviation %": deviation,
                     f"within {100 * bar:.0f}%": "" if deviation != deviation else
                     "yes" if abs(deviation) <= 100 * bar else "no",
                     "processes within": "" if deviation != deviation else f"{int(sum(alone))} of {len(group)}"})
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", nargs="*", default=None, help="result ids to reproduce (default: all)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds of every comparison (default: SIZES.rounds_small for helpers.SMALL_EFFECTS, "
                             "SIZES.rounds for the rest)")
    parser.add_argument("--commit", action="store_true", help="write figures/<gpu>/reproduce.csv")
    parser.add_argument("--against", type=Path, default=None,
                        help="the results.csv to compare with (default: figures/<gpu>/results.csv)")
    parser.add_argument("--processes", type=int, default=1,
                        help="fresh processes, one after another; the table gives the spread between them")
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)  # one process's table
    args = parser.parse_args()
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, got {args.processes}")
    if args.commit:
        os.environ["SLOWER_RESULTS_ROOT"] = str(ROOT / "figures")
    import pandas as pd

    import helpers

    helpers.show_env()
    start = time.perf_counter()
    if args.processes == 1:
        table = helpers.reproduce(ids=args.ids, rounds=args.rounds, committed=args.against)
        if args.out:  # a child of --processes: its table only
            table.to_csv(args.out, index=False)
            return 0
    else:
        table = combine(run_processes(args), helpers.REPRODUCE_BAR)
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
