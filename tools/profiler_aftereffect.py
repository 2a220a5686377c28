"""Does a torch.profiler session slow the rest of the process down? Measure it on your GPU.

    python tools/profiler_aftereffect.py               # GPU only: one fresh process, about a minute
    python tools/profiler_aftereffect.py --rounds 16

Kineto, the engine under torch.profiler, leaves NVIDIA's CUPTI attached to the process after a profile
(pytorch/pytorch#144455), and CUPTI's callbacks then add host time to every kernel launch. That is why the
series times first and profiles after, and why ``helpers`` refuses a host-clock timing once a process has
profiled (``helpers._host_clock_free``) and counts a call's kernels from a CUDA graph instead of a profile
(``helpers.launches_per_call``). This tool does, on purpose, what that check forbids. In one fresh process:

1. it times the original against the all-projections swap in shuffled rounds (``compare_configs``): the
   tokens/s ratio, its A/A floor and the original's wall ms per decoded token;
2. profiles a few calls and two decode generations, as a chapter's counting would (``_count_decode``, the
   decode profile of ``compare_configs(profile=...)``), and checks that the counts repeat;
3. forgets that it profiled (``helpers.PROFILED_BY``) and times the same comparison again.

On the H200 the second comparison ran on a slower host: the original's wall ms per decoded token rose 16%
(28.8 to 33.5 ms) and the swap's ratio fell from 1.35 to 1.24, with the A/A floor within 2.4% of 1 both times.
(With Kineto's switch ``TEARDOWN_CUPTI=1`` set, which detaches CUPTI after each profile, test processes there
hung at exit after their tests had passed, so the series does not rely on it.)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWAP_ID = "matmul.all_proj_rmsnorm_slowdown"  # the headline ratio that moved most between processes
PROFILES = 6  # profiler sessions of one op, back to back, as a chapter's sweep would make them

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
ops = [helpers._kernel_stats(lambda: torch.add(x, x))[0] for _ in range(PROFILES)]
ids = helpers.make_prompt(helpers.SIZES.prompt_len, tokenizer, model.config.vocab_size)
decode = [helpers._count_decode(model, ids, 4)[0] for _ in range(2)]
helpers.PROFILED_BY.clear()  # on purpose: time after the profiles, which the series never does
after = timed()
print("RESULT", json.dumps({"before": before, "after": after, "op_kernels": ops, "decode_kernels": decode}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8, help="shuffled rounds per comparison (default 8)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    code = (ONE.replace("SWAP_ID", repr(SWAP_ID)).replace("ROUNDS", str(args.rounds))
            .replace("PROFILES", str(PROFILES)))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        print(done.stdout[-2000:], done.stderr[-3000:], file=sys.stderr)
        return 1
    row = json.loads(line[len("RESULT "):])
    for when in ("before", "after"):
        m = row[when]
        print(f"{when} the profiles: {SWAP_ID} {m['ratio'][0]:.3f} (quartiles {m['ratio'][1]:.3f}-{m['ratio'][2]:.3f}, "
              f"A/A floor {m['floor']:.3f}); original {m['original_ms'][0]:.2f} wall ms per decoded token (quartiles "
              f"{m['original_ms'][1]:.2f}-{m['original_ms'][2]:.2f})")
    moved = row["after"]["original_ms"][0] / row["before"]["original_ms"][0] - 1
    print(f"the original's wall ms per decoded token moved {moved:+.1%} after the profiles")
    repeat = row["op_kernels"] == [1] * PROFILES and len(set(row["decode_kernels"])) == 1
    print(f"kernels seen by {PROFILES} profiles of one torch.add: {row['op_kernels']}; per decoded token, twice: "
          f"{row['decode_kernels']} ({'they repeat' if repeat else 'THEY DIFFER'})")
    return 0 if repeat else 1


if __name__ == "__main__":
    raise SystemExit(main())
