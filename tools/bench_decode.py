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
  transformers compiled ``generate(cache_implementation="static")``: transformers compiles the forward
                        (torch.compile, CUDA graphs); its first call compiles (tens of seconds, untimed)

Every round runs each configuration once in an order shuffled with a fixed seed, each an N-token and a
1-token generation back to back; decode tokens/s = (N - 1) / (t_N - t_1), so the prefill is left out, and
each configuration's per-round time is divided by the original's of the same round (the host's drift
cancels in a ratio). The clock is the host's wall clock, synchronised: what a user waits for. The fast
model keeps its patches for the whole run (a captured graph holds the fused weights it was captured with).
Greedy tokens of every configuration are compared with the original's; random weights (no hub) make
near-ties likely, so a few differing tokens late in a run are fp16 rounding, not a bug (the tests check
the graph against the eager step exactly). Needs a GPU for the graphs and the compile; in CPU mode the
graph configurations run their step eagerly and the compiled one is left out.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ORIGINAL_GRAPH, FAST, FAST_GRAPH, COMPILED = ("original, CUDA graph", "fast, eager", "fast, CUDA graph",
                                              "transformers compiled")


def runners(original, fast, ids, new_tokens: int) -> dict:
    """name -> run(n) returning (new token ids on the CPU, seconds) for an n-token greedy generation."""
    import torch

    import helpers

    max_len = ids.shape[1] + new_tokens
    graph_original = helpers.GraphDecoder(original, max_len)
    graph_fast = helpers.GraphDecoder(fast, max_len)

    def eager(model):
        def run(n):
            new, seconds = helpers._generate(model, ids, n)
            return new.to("cpu", copy=True), seconds
        return run

    def graphed(decoder):
        return lambda n: decoder.generate(ids, n)

    out = {helpers.ORIGINAL: eager(original), helpers.ORIGINAL_AGAIN: eager(original),
           ORIGINAL_GRAPH: graphed(graph_original), FAST: eager(fast), FAST_GRAPH: graphed(graph_fast)}
    if helpers.HAS_GPU:
        from transformers import GenerationConfig

        def compiled(n):
            config = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=True,
                                      cache_implementation="static",
                                      pad_token_id=original.config.eos_token_id or 0)
            with helpers._no_gc():
                helpers._sync()
                start = time.perf_counter()
                with torch.inference_mode():
                    new = original.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
                helpers._sync()
                seconds = time.perf_counter() - start
            return new[0, ids.shape[1]:].cpu(), seconds

        out[COMPILED] = compiled
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", action="store_true", help="write figures/<gpu>/bench_decode.csv (tracked)")
    parser.add_argument("--rounds", type=int, default=None, help="shuffled rounds (default: SIZES.rounds)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per timed generation "
                        "(default: 4 x SIZES.new_tokens)")
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
    original, tokenizer, desc = helpers.load_model()
    fast, _, _ = helpers.load_model()  # a second copy, patched for the whole run
    print(desc)
    ids = helpers.make_prompt(helpers.SIZES.prompt_len, tokenizer, original.config.vocab_size)
    start = time.perf_counter()
    with helpers.patched(fast, **helpers.ALL_FAST):
        run = runners(original, fast, ids, new_tokens)
        tokens = {}
        for name, fn in run.items():  # warm-up: compiles, captures, autotunes; untimed
            t0 = time.perf_counter()
            tokens[name] = fn(new_tokens)[0]
            fn(1)
            print(f"warm-up {name}: {time.perf_counter() - t0:.1f} s")
        full = {name: [] for name in run}
        first = {name: [] for name in run}
        for r in helpers.progress(range(rounds), desc="rounds"):
            for name in helpers._shuffled(run, r, seed=0):
                full[name].append(run[name](new_tokens)[1])
                first[name].append(run[name](1)[1])
    seconds = time.perf_counter() - start
    decode = {name: [(t - f) / (new_tokens - 1) for t, f in zip(full[name], first[name])] for name in run}
    ratios = helpers._ratios_to(decode, helpers.ORIGINAL)
    floor = ratios[helpers.ORIGINAL_AGAIN]
    base = statistics.median(decode[helpers.ORIGINAL])
    rows = []
    for name in run:
        r = ratios.get(name)
        ratio = r.median if r else 1.0
        v = helpers.verdict(r, None if name == helpers.ORIGINAL_AGAIN else floor) if r else None
        same = int((tokens[name] == tokens[helpers.ORIGINAL]).cumprod(0).sum())
        rows.append({"configuration": name,
                     "decode tokens/s": 1 / (base * ratio),  # the original's median, through the per-round ratio
                     "speed-up over the original": 1 / ratio,
                     "quartiles": f"{1 / r.high:.2f}-{1 / r.low:.2f}" if r else "-",
                     "verdict (time)": v.text if v else "reference",
                     "decode wall ms per token": 1e3 * base * ratio,
                     "tokens/s incl. prefill (median)": new_tokens / statistics.median(full[name]),
                     f"first tokens equal to the original's (of {new_tokens})": same})
    table = pd.DataFrame(rows)
    table["clock"] = f"host wall clock, synchronised; median of {rounds} shuffled rounds"
    helpers.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = helpers.RESULTS_DIR / "bench_decode.csv"
    helpers.write_csv_atomically(table.assign(new_tokens=new_tokens, prompt_len=ids.shape[1], model=desc), path)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(table.drop(columns="clock").to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"\n{len(run)} configurations, {rounds} rounds of {new_tokens} + 1 tokens in {seconds:.0f} s "
          f"({table['clock'][0]}); A/A floor {floor.median:.3f} ({floor.low:.2f}-{floor.high:.2f}); "
          f"written to {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
