"""Does a torch.profiler session slow the rest of the process down? Measure it on your GPU.

    python tools/profiler_aftereffect.py               # GPU only: about a minute
    python tools/profiler_aftereffect.py --rounds 16

Kineto, the engine under torch.profiler, leaves NVIDIA's CUPTI attached to the process after a profile
(pytorch/pytorch#144455), and CUPTI's callbacks then add host time to every kernel launch. That is why the
series times first and profiles after, and why ``helpers`` refuses a host-clock timing once a process has
profiled (``slower_harness.timing_order.host_clock_free``) and counts a call's kernels from a CUDA graph instead of a profile
(``helpers.launches_per_call``). This tool does, on purpose, what that check forbids, in its own process:

1. it times the original against the all-projections swap in shuffled rounds (``compare_configs``): the
   tokens/s ratio, its A/A floor and the original's wall ms per decoded token;
2. profiles a few calls and two decode generations, as a chapter's counting would (``count_decode``, the
   decode profile of ``profile_configs``), and checks that the counts repeat;
3. forgets that it profiled (``helpers.PROFILED_BY``) and times the same comparison again.

On the H200 the second comparison ran on a slower host: the original's wall ms per decoded token rose 16%
(28.8 to 33.5 ms) and the swap's ratio fell from 1.35 to 1.24, with the A/A floor within 2.4% of 1 both times.
(With Kineto's switch ``TEARDOWN_CUPTI=1`` set, which detaches CUPTI after each profile, test processes there
hung at exit after their tests had passed, so the series does not rely on it.)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SWAP_ID = "matmul.all_proj_rmsnorm_slowdown"  # the headline ratio that moved most between processes
PROFILES = 6  # profiler sessions of one op, back to back, as a chapter's sweep would make them


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8, help="shuffled rounds per comparison (default 8)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    import torch

    import helpers
    from slower_harness.clocks import kernel_stats
    from slower_harness.profiles import count_decode

    if not helpers.HAS_GPU:
        print("tools/profiler_aftereffect.py needs a CUDA GPU: CUPTI is NVIDIA's profiling interface", file=sys.stderr)
        return 1
    model, tokenizer, _ = helpers.load_model()
    configs = helpers.reproduce_configs([SWAP_ID])
    (name,) = configs

    def timed():
        c = helpers.compare_configs(model, configs, tokenizer=tokenizer, rounds=args.rounds)
        return c.ratios[name], c.floor, c.decode_ms(helpers.ORIGINAL)

    before = timed()
    x = torch.randn(4096, device=helpers.DEVICE, dtype=helpers.DTYPE)
    op_kernels = [kernel_stats(lambda: torch.add(x, x))[0] for _ in range(PROFILES)]
    ids = helpers.make_prompt(helpers.SIZES.prompt_len, tokenizer, model.config.vocab_size)
    decode_kernels = [count_decode(model, ids, 4)[0] for _ in range(2)]
    helpers.PROFILED_BY.clear()  # on purpose: time after the profiles, which the series never does
    after = timed()
    for when, (ratio, floor, ms) in (("before", before), ("after", after)):
        print(f"{when} the profiles: {SWAP_ID} {ratio.median:.3f} (quartiles {ratio.low:.3f}-{ratio.high:.3f}, "
              f"A/A floor {floor.median:.3f}); original {ms.median:.2f} wall ms per decoded token (quartiles "
              f"{ms.low:.2f}-{ms.high:.2f})")
    moved = after[2].median / before[2].median - 1
    print(f"the original's wall ms per decoded token moved {moved:+.1%} after the profiles")
    repeat = op_kernels == [1] * PROFILES and len(set(decode_kernels)) == 1
    print(f"kernels seen by {PROFILES} profiles of one torch.add: {op_kernels}; per decoded token, twice: "
          f"{decode_kernels} ({'they repeat' if repeat else 'THEY DIFFER'})")
    return 0 if repeat else 1


if __name__ == "__main__":
    raise SystemExit(main())
