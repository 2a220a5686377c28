"""Tokens/s end to end: the fast kernels eagerly and under a CUDA-graph decode step, against the original
eagerly and against transformers' own compiled static-cache generation, in one interleaved run.

    python tools/bench_decode.py              # prints the table, writes runs/<gpu>/bench_decode.csv
    python tools/bench_decode.py --commit     # writes figures/<gpu>/bench_decode.csv (tracked) instead
    python tools/bench_decode.py --new-tokens 128 --rounds 8

Configurations (greedy, batch size 1, the chapters' prompt):
  original              eager ``generate()``, as every chapter measures it
  original (again)      the same, again: the run's A/A floor
  original, CUDA graph  the original model, static KV cache, one decode step replayed from a CUDA graph
                        (``helpers.GraphDecoder``): the host's launches gone, the ~1,650 kernels kept
  fast, eager           ``patched(model, **helpers.ALL_FAST)``: fewer, fused kernels, launched from Python
  fast, CUDA graph      both: fused kernels in one graph launch per token
  6. own KV cache ... 9. tuned gemv tiles
                        the fast layers over our own KV cache and decode step (``helpers.OwnCacheDecoder``), one
                        fix at a time (``helpers.FLOOR_STAIRCASE``, chapter 10): no transformers cache or model
                        forward in the graph; then the cache write in the RoPE kernel; then the norms, residual
                        adds, SwiGLU and argmax folded into the projections; then gemv tiles measured on this GPU
  transformers compiled ``generate(cache_implementation="static")``: transformers compiles the forward
                        (torch.compile, CUDA graphs); its first call compiles (tens of seconds, untimed)

One ``helpers.compare_configs`` run: every round runs each configuration once in an order shuffled with a
fixed seed, each an N-token and a 1-token generation back to back, so decode tokens/s leave the prefill
out (``Comparison.wall_ms_per_token``), and each time is divided by the original's of the same round (the
host's drift cancels in a ratio). The clock is the host's wall clock, synchronised: what a user waits
for. A graph configuration builds its static cache and captures its step in every run, before the timed
part (``helpers.decoder_for``). Each row also gives the fraction of the weight-read floor its decode reaches
(the model's bytes over the GPU's nominal bandwidth, against its wall ms per token) and, on its own, its prefill
(the median wall ms of the 1-token generations). With ``--profile``, CUDA kernels and GPU-busy ms per decoded
token too.
Greedy tokens of every configuration are compared with the original's; random weights (no hub) make
near-ties likely, so a few differing tokens late in a run are fp16 rounding, not a bug (the tests check
the graph against the eager step exactly). In CPU mode the graph configurations run their step eagerly
and the compiled one is left out.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ORIGINAL_GRAPH, FAST, FAST_GRAPH, COMPILED = ("original, CUDA graph", "fast, eager", "fast, CUDA graph",
                                             "transformers compiled")


def configs() -> dict:
    """The configurations beside the original (``compare_configs`` adds it and its A/A copy)."""
    import helpers

    out = {ORIGINAL_GRAPH: dict(decoder="graph"), FAST: dict(helpers.ALL_FAST),
           FAST_GRAPH: dict(helpers.ALL_FAST, decoder="graph"), **helpers.FLOOR_STAIRCASE}
    if helpers.HAS_GPU:
        out[COMPILED] = dict(decoder="compiled")
    return out


def tokens(model, every: dict, ids, new_tokens: int) -> dict:
    """name -> the greedy tokens it generates (one untimed generation each, on the CPU)."""
    import helpers

    return {name: helpers.generate_with(model, config, ids, new_tokens)[0].to("cpu", copy=True)
            for name, config in every.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", action="store_true", help="write figures/<gpu>/bench_decode.csv (tracked)")
    parser.add_argument("--rounds", type=int, default=None, help="shuffled rounds (default: SIZES.rounds)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per timed generation "
                        "(default: 4 x SIZES.new_tokens)")
    parser.add_argument("--profile", action="store_true", help="also count kernels and GPU-busy ms per token")
    args = parser.parse_args()
    if args.commit:
        os.environ["SLOWER_RESULTS_ROOT"] = str(ROOT / "figures")
    import pandas as pd

    import helpers

    rounds = args.rounds or helpers.SIZES.rounds
    new_tokens = args.new_tokens or 4 * helpers.SIZES.new_tokens
    if rounds < 1 or new_tokens < 2:
        parser.error(f"--rounds must be >= 1 and --new-tokens >= 2, got {rounds} and {new_tokens}")
    helpers.show_env()
    model, tokenizer, desc = helpers.load_model()
    print(desc)
    start = time.perf_counter()
    every = configs()
    c = helpers.compare_configs(model, every, new_tokens=new_tokens, rounds=rounds, tokenizer=tokenizer)
    if args.profile:  # after the timed rounds
        helpers.profile_configs(c, model)
    ids = helpers.make_prompt(c.prompt_len, tokenizer, model.config.vocab_size)
    generated = tokens(model, {helpers.ORIGINAL: {}, **every}, ids, new_tokens)
    seconds = time.perf_counter() - start
    rows = []
    for name in c.tokens_per_s:
        wall, _ = c.wall_ms_per_token(name)
        r = c.ratios.get(name)
        same = int((generated[name] == generated[helpers.ORIGINAL]).cumprod(0).sum()) if name in generated else None
        row = {"configuration": name, "decode tokens/s": 1e3 / wall, "decode wall ms per token": wall,
               "speed-up over the original (whole generation)": 1 / r.median if r else 1.0,
               "quartiles": f"{1 / r.high:.2f}-{1 / r.low:.2f}" if r else "-",
               "verdict (time)": c.verdict(name).text if r else "reference",
               f"first tokens equal to the original's (of {new_tokens})": same,
               "fraction of the weight-read floor": helpers.bandwidth(model, 1e3 / wall)["floor_fraction"],
               "prefill wall ms": c.prefill_ms(name)}
        if name in c.counts:
            p = c.profile(name)
            row["kernels per token"], row["GPU-busy ms per token"] = p.launches, p.gpu_busy_ms_per_token
        rows.append(row)
    table = pd.DataFrame(rows)
    clock = f"host wall clock, synchronised; median of {rounds} shuffled rounds"
    helpers.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = helpers.RESULTS_DIR / "bench_decode.csv"
    helpers.write_csv_atomically(table.assign(clock=clock, new_tokens=new_tokens, prompt_len=c.prompt_len,
                                              model=desc), path)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    f = c.floor
    print(f"\n{len(c.tokens_per_s)} configurations, {rounds} rounds of {new_tokens} + 1 tokens in {seconds:.0f} s "
          f"({clock}); A/A floor {f.median:.3f} ({f.low:.2f}-{f.high:.2f}); written to {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
