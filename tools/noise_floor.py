"""Measure this host's noise floor: the original model against itself, unpinned and pinned to one core.

    python tools/noise_floor.py                    # 2 processes each way, SIZES.rounds rounds each
    python tools/noise_floor.py --processes 3 --core 3

At batch size 1 the host sets the pace, and two runs of the same model differ. compare_configs measures
the original against itself (the A/A pair) in every comparison; this tool does only that, in fresh
processes, with and without SLOWER_PIN_CPUS, and prints each process's A/A median and quartiles, so you can
decide whether pinning helps on your machine (set SLOWER_PIN_CPUS for the series if it does).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = """
import json, helpers
model, tokenizer, _ = helpers.load_model()
c = helpers.compare_configs(model, {}, tokenizer=tokenizer, rounds=ROUNDS)
f = c.floor
print("RESULT", json.dumps({"pinned": helpers.env_info()["pinned"], "median": f.median, "low": f.low,
                            "high": f.high, "min": min(f.values), "max": max(f.values),
                            "tokens_per_s": c.tokens_per_s["original"]}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=2, help="fresh processes per setting")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per process (default: SIZES.rounds)")
    parser.add_argument("--core", type=int, default=None, help="the core to pin to (default: the last one usable)")
    args = parser.parse_args()
    core = args.core if args.core is not None else max(os.sched_getaffinity(0))
    rounds = "None" if args.rounds is None else str(args.rounds)
    rows = []
    for setting in ("", str(core)):
        for _ in range(args.processes):
            env = {k: v for k, v in os.environ.items() if k != "SLOWER_PIN_CPUS"}
            if setting:
                env["SLOWER_PIN_CPUS"] = setting
            done = subprocess.run([sys.executable, "-c", ONE.replace("ROUNDS", rounds)], cwd=ROOT, env=env,
                                  capture_output=True, text=True)
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if done.returncode != 0 or line is None:
                print(done.stdout[-2000:], done.stderr[-3000:], file=sys.stderr)
                return 1
            row = json.loads(line[len("RESULT "):])
            rows.append(row)
            print(f"pinned {row['pinned']:>8}: A/A median {row['median']:.3f}, quartiles {row['low']:.3f}-"
                  f"{row['high']:.3f}, pairs {row['min']:.2f}-{row['max']:.2f}, original {row['tokens_per_s']:.1f} tokens/s",
                  flush=True)
    for label, pinned in (("unpinned", False), ("pinned", True)):
        mine = [r for r in rows if (r["pinned"] != "no") == pinned]
        worst = max(abs(r["median"] - 1) for r in mine)
        iqr = max(r["high"] - r["low"] for r in mine)
        print(f"{label}: worst |A/A median - 1| {100 * worst:.1f}%, widest quartile range {100 * iqr:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
