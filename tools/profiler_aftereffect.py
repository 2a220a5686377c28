"""Does a torch.profiler session slow the rest of the process down? Measure it, with and without teardown.

    python tools/profiler_aftereffect.py               # GPU only: two fresh processes, about two minutes
    python tools/profiler_aftereffect.py --rounds 12

Kineto, the engine under torch.profiler, leaves NVIDIA's CUPTI attached to the process after a profile
unless ``TEARDOWN_CUPTI=1`` (pytorch/pytorch#144455); ``helpers`` sets it (``helpers.PROFILER_TEARDOWN``).
This tool shows what that is worth. Each of two fresh processes, one with ``TEARDOWN_CUPTI=0`` (Kineto's
default) and one with ``helpers``' setting, does what a chapter does:

1. times the original against the all-projections swap in shuffled rounds (``compare_configs``), before
   any profile: tokens/s ratio, A/A floor and the original's wall ms per decoded token;
2. counts launches with the profiler, as chapters 2-5 do before their rounds (``launches_per_call``, several
   sessions back to back, then a CUDA-graph decoder's profile, ``_count_decode``, twice), and checks every
   count: one kernel per add, and the graph's kernels per token equal to those of the process that never tears
   CUPTI down (a profile that lost its GPU events after a teardown would count otherwise);
3. times the same comparison again.

Both processes print the two comparisons side by side. Without teardown the second comparison runs on a
host slowed by CUPTI's callbacks; with it the two should agree within their quartiles.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWAP_ID = "matmul.all_proj_rmsnorm_slowdown"  # the headline ratio that moved most between processes
PROFILES = 6  # profiler sessions back to back, as a chapter's sweep makes them

ONE = """
import json, torch, helpers
if not helpers.HAS_GPU:
    raise SystemExit("tools/profiler_aftereffect.py needs a CUDA GPU: CUPTI is NVIDIA's profiling interface")
model, tokenizer, _ = helpers.load_model()
configs = helpers.reproduce_configs([SWAP_ID])
(name,) = configs


def timed():
    c = helpers.compare_configs(model, configs, tokenizer=tokenizer, rounds=ROUNDS)
    r, f, d = c.ratios[name], c.floor, c.decode_ms(helpers.ORIGINAL)
    return {"ratio": [r.median, r.low, r.high], "floor": f.median, "original_ms": [d.median, d.low, d.high]}


before = timed()
x = torch.randn(4096, device=helpers.DEVICE, dtype=helpers.DTYPE)
ops = [helpers.launches_per_call(lambda: torch.add(x, x)) for _ in range(PROFILES)]
ids = helpers.make_prompt(helpers.SIZES.prompt_len, tokenizer, model.config.vocab_size)
graph = [helpers._count_decode(model, ids, 4, decoder="graph")[0] for _ in range(2)]
after = timed()
print("RESULT", json.dumps({"teardown": helpers.PROFILER_TEARDOWN, "before": before, "after": after,
                            "op_launches": ops, "graph_kernels": graph}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8, help="shuffled rounds per comparison (default 8)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    code = (ONE.replace("SWAP_ID", repr(SWAP_ID)).replace("ROUNDS", str(args.rounds))
            .replace("PROFILES", str(PROFILES)))
    failed, reference = False, None
    for setting in ("0", None):  # Kineto's default (the reference counts: nothing torn down), then helpers' choice
        env = {k: v for k, v in os.environ.items() if k != "TEARDOWN_CUPTI"}
        if setting is not None:
            env["TEARDOWN_CUPTI"] = setting
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if done.returncode != 0 or line is None:
            print(done.stdout[-2000:], done.stderr[-3000:], file=sys.stderr)
            return 1
        row = json.loads(line[len("RESULT "):])
        print(f"TEARDOWN_CUPTI={setting or '(helpers)'}: profiles detach CUPTI: {'yes' if row['teardown'] else 'no'}")
        for when in ("before", "after"):
            m = row[when]
            print(f"  {when} the profiles: {SWAP_ID} {m['ratio'][0]:.3f} (quartiles {m['ratio'][1]:.3f}-"
                  f"{m['ratio'][2]:.3f}, A/A floor {m['floor']:.3f}); original {m['original_ms'][0]:.2f} wall ms per "
                  f"decoded token (quartiles {m['original_ms'][1]:.2f}-{m['original_ms'][2]:.2f})")
        counts = (row["op_launches"], row["graph_kernels"])
        reference = reference or counts
        # every profile must see every kernel: one per torch.add, and the graph's per-token count of the process
        # that never tears CUPTI down (a profile that lost its events after a teardown counts fewer, or skews the
        # n-token minus 1-token difference)
        counts_agree = row["op_launches"] == [1.0] * PROFILES and len(set(row["graph_kernels"])) == 1 \
            and counts == reference
        failed |= not counts_agree
        print(f"  launches counted by {PROFILES} profiles of one torch.add: {row['op_launches']}; kernels per decoded "
              f"token under a CUDA graph, twice: {row['graph_kernels']} "
              f"({'agree' if counts_agree else 'DISAGREE'} with one per add and with TEARDOWN_CUPTI=0's counts)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
