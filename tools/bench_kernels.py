"""Benchmark the fast kernels against their PyTorch equivalents, on the GPU clock.

    python tools/bench_kernels.py            # every case; prints the table, writes runs/<gpu>/bench_kernels.csv
    python tools/bench_kernels.py --commit   # writes figures/<gpu>/bench_kernels.csv (tracked) instead
    python tools/bench_kernels.py --gemv-sweep  # gemv tile configurations at the lm_head and gate/up shapes

Each case is timed with ``helpers.compare_calls``: GPU time from CUDA-graph replay, our call against the
PyTorch call (cuBLAS, SDPA or the eager ops it replaces) and the PyTorch call against itself (the A/A
floor), in shuffled rounds. Beside the ratio: the bytes the call must move at least (weights, inputs and
outputs read or written once), the bandwidth that implies, and its fraction of the GPU's nominal peak
(``helpers.NOMINAL_GB_S``). Targets (from the issue that asked for these kernels, H200): the
matrix-vector kernel at the lm_head shape at >= 70% of peak and no slower than cuBLAS; decode attention
at 1,024 keys no slower than SDPA; each fused elementwise kernel no slower than the ops it replaces.

``--gemv-sweep`` ranks gemv configurations (``slower_kernels.GemvConfig``) at the lm_head and fused gate/up
shapes by one GPU time each (printed as they come: the first run compiles some 60 configurations per
shape, minutes), then times the three fastest and ``gemv_config``'s own choice against cuBLAS in shuffled
rounds: the numbers to tune ``gemv_config`` from (writes gemv_sweep.csv).

Without a GPU the same cases run at tiny sizes in Triton's interpreter: a smoke test of this script,
timed on the interpreter's clock, meaningless as speed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cases(tiny: bool) -> list[dict]:
    """Every benchmark: name, shape text, our call, the PyTorch call (the same result), bytes moved at
    least, target (or None). ``tiny``: interpreter-sized shapes."""
    import torch
    import torch.nn.functional as F
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm, apply_rotary_pos_emb

    import helpers
    import slower_kernels
    from slower_kernels.fast_attention import decode_attention, prefill_attention

    dev, dt = helpers.DEVICE, helpers.DTYPE
    size = 2 if dt == torch.float16 else 4
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return randn(g, *shape)

    # Qwen3-0.6B (or a tiny stand-in in CPU mode)
    H, I, V, Hq, Hkv, D = (64, 128, 512, 4, 2, 16) if tiny else (1024, 3072, 151936, 16, 8, 128)
    long_rows, keys, prefill = (8, (16, 64), 16) if tiny else (4096, (128, 1024, 4096), 512)
    out = []

    def case(name, shape, ours, theirs, bytes_, target=None):
        out.append(dict(name=name, shape=shape, ours=ours, theirs=theirs, bytes=bytes_, target=target))

    for what, n, k in (("lm_head", V, H), ("q,k,v fused", (Hq + 2 * Hkv) * D, H), ("o_proj", H, Hq * D),
                       ("gate,up fused", 2 * I, H), ("down_proj", H, I)):
        x, w = rand(1, k), rand(n, k)
        case(f"gemv {what}", f"[1, {k}] x [{n}, {k}]^T", lambda x=x, w=w: slower_kernels.gemv(x, w),
             lambda x=x, w=w: F.linear(x, w), (n * k + k + n) * size,
             "<= cuBLAS, >= 70% of peak" if what == "lm_head" else None)
    for T in keys:
        q, kk, vv = rand(1, Hq, 1, D), rand(1, Hkv, T, D), rand(1, Hkv, T, D)
        case(f"decode attention, {T} keys", f"q [1,{Hq},1,{D}], k/v [1,{Hkv},{T},{D}]",
             lambda q=q, k=kk, v=vv: decode_attention(q, k, v),
             lambda q=q, k=kk, v=vv: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
             (2 * Hkv * T * D + 2 * Hq * D) * size, "<= SDPA" if T == 1024 or (tiny and T == keys[-1]) else None)
    q, kk, vv = rand(1, Hq, prefill, D), rand(1, Hkv, prefill, D), rand(1, Hkv, prefill, D)
    case(f"prefill attention, {prefill} tokens", f"q [1,{Hq},{prefill},{D}], k/v [1,{Hkv},{prefill},{D}]",
         lambda q=q, k=kk, v=vv: prefill_attention(q, k, v, causal=True),
         lambda q=q, k=kk, v=vv: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
         (2 * Hq * prefill * D + 2 * Hkv * prefill * D) * size)
    for rows in (1, long_rows):
        gate, up = rand(rows, I), rand(rows, I)
        case(f"swiglu, {rows} rows", f"[{rows}, {I}]", lambda g_=gate, u=up: slower_kernels.swiglu(g_, u),
             lambda g_=gate, u=up: F.silu(g_) * u, 3 * rows * I * size, "<= PyTorch ops")
        x, r = rand(rows, H), rand(rows, H)
        norm = Qwen3RMSNorm(H, eps=1e-6).to(dev, dt)
        case(f"residual add + RMSNorm, {rows} rows", f"[{rows}, {H}]",
             lambda x=x, r=r, n=norm: slower_kernels.add_rmsnorm(x, r, n.weight, n.variance_epsilon),
             lambda x=x, r=r, n=norm: (lambda s: (n(s), s))(r + x),  # both outputs: the norm and the new residual
             (4 * rows * H + H) * size, "<= PyTorch ops")
    q1, k1 = rand(1, Hq, 1, D), rand(1, Hkv, 1, D)
    cos, sin = rand(1, 1, D), rand(1, 1, D)
    qn, kn = Qwen3RMSNorm(D, eps=1e-6).to(dev, dt), Qwen3RMSNorm(D, eps=1e-6).to(dev, dt)
    case("q_norm/k_norm + RoPE, decode", f"q [1,{Hq},1,{D}], k [1,{Hkv},1,{D}]",
         lambda: slower_kernels.rmsnorm_rope(q1, k1, qn.weight, kn.weight, qn.variance_epsilon, cos, sin),
         lambda: apply_rotary_pos_emb(qn(q1), kn(k1), cos, sin), (2 * (Hq + Hkv) * D + 2 * D + 2 * D) * size,
         "<= PyTorch ops")
    return out


def gemv_configs(M: int = 1, tiny: bool = False) -> list:
    """Every power-of-two gemv configuration worth a try at M rows (within the kernel's tile limit)."""
    from slower_kernels.gemv import GemvConfig

    block_m = 1 << (M - 1).bit_length()
    out = []
    for block_n in ((16, 32) if tiny else (4, 8, 16, 32, 64)):
        for block_k in ((16, 32) if tiny else (128, 256, 512, 1024)):
            for num_warps in ((1,) if tiny else (2, 4, 8)):
                try:
                    out.append(GemvConfig(block_m, block_n, block_k, num_warps))
                except ValueError:  # over the tile limit
                    pass
    return out


def gemv_sweep(tiny: bool, rounds: int | None = None):
    """Rank gemv configurations by one GPU time each, then the best three and the default in rounds."""
    import pandas as pd
    import torch
    import torch.nn.functional as F

    import helpers
    import slower_kernels
    from slower_kernels.gemv import gemv_config

    g = torch.Generator().manual_seed(0)
    shapes = {"lm_head": (96, 32), "gate,up fused": (64, 32)} if tiny else {
        "lm_head": (151936, 1024), "gate,up fused": (6144, 1024)}
    rows = []
    for what, (n, k) in shapes.items():
        x, w = randn(g, 1, k), randn(g, n, k)
        default = gemv_config(1, n, k)
        ranked = []
        for c in gemv_configs(1, tiny):  # printed as it goes: the first run compiles every configuration
            ranked.append((helpers.ms_per_call(lambda c=c: slower_kernels.gemv(x, w, config=c)), c))
            print(f"{what} {c.name}: {ranked[-1][0]:.4f} ms ({'GPU time' if helpers.HAS_GPU else 'interpreter'}, "
                  "one reading)", flush=True)
        ranked.sort(key=lambda tc: tc[0])
        finalists = {c.name: c for _, c in ranked[:3]}
        finalists.setdefault(default.name, default)
        comparison = helpers.compare_calls({name: (lambda c=c: slower_kernels.gemv(x, w, config=c))
                                            for name, c in finalists.items()}, lambda: F.linear(x, w), rounds=rounds)
        once = {c.name: ms for ms, c in ranked}
        if default.name not in once:  # gemv_config's choice may lie outside the grid
            once[default.name] = helpers.ms_per_call(lambda: slower_kernels.gemv(x, w, config=default))
        for name in finalists:
            r = comparison.ratios[name]
            ms = comparison.ms[name]
            rows.append({"shape": what, "config": name, "default": name == default.name,
                         "one reading ms": once[name], "ms (rounds)": ms,
                         "F.linear ms": comparison.ms[helpers.REFERENCE],
                         "ratio to F.linear": r.median, "quartiles": f"{r.low:.2f}-{r.high:.2f}",
                         "verdict": comparison.verdict(name).text,
                         "GB/s": (n * k + k + n) * x.element_size() / (ms * 1e-3) / 1e9, "clock": comparison.clock})
    return pd.DataFrame(rows)


def randn(g, *shape):
    """Fresh random numbers from generator ``g``, on the harness's device and dtype."""
    import torch

    import helpers

    return torch.randn(*shape, generator=g).to(helpers.DEVICE, helpers.DTYPE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", action="store_true", help="write figures/<gpu>/bench_kernels.csv (tracked)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (default: SIZES.rounds_kernel)")
    parser.add_argument("--gemv-sweep", action="store_true", help="rank gemv configurations instead (gemv_sweep.csv)")
    args = parser.parse_args()
    if args.commit:
        os.environ["SLOWER_RESULTS_ROOT"] = str(ROOT / "figures")
    import pandas as pd

    import helpers

    helpers.show_env()
    if args.gemv_sweep:
        start = time.perf_counter()
        table = gemv_sweep(tiny=not helpers.HAS_GPU, rounds=args.rounds)
        helpers.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = helpers.RESULTS_DIR / "gemv_sweep.csv"
        helpers.write_csv_atomically(table, path)
        with pd.option_context("display.width", 250, "display.max_columns", None):
            print(table.drop(columns="clock").to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"\n{time.perf_counter() - start:.0f} s, {table['clock'][0]}; written to {os.path.relpath(path, ROOT)}")
        return 0
    peak = helpers.NOMINAL_GB_S.get(helpers.SLUG) if helpers.HAS_GPU else None
    rows = []
    start = time.perf_counter()
    for c in cases(tiny=not helpers.HAS_GPU):
        comparison = helpers.compare_calls({"ours": c["ours"]}, c["theirs"], rounds=args.rounds)
        r, ms = comparison.ratios["ours"], comparison.ms["ours"]
        gb_s = c["bytes"] / (ms * 1e-3) / 1e9
        verdict = comparison.verdict("ours").text
        row = {"kernel": c["name"], "shape": c["shape"], "ours ms": ms, "PyTorch ms": comparison.ms[helpers.REFERENCE],
               "ratio (ours / PyTorch)": r.median, "quartiles": f"{r.low:.2f}-{r.high:.2f}",
               "A/A floor": comparison.floor.median, "verdict": verdict, "GB/s (ours)": gb_s,
               "% of peak": 100 * gb_s / peak if peak else None, "target": c["target"] or ""}
        if c["target"] and helpers.HAS_GPU:  # the interpreter's clock says nothing about a target
            no_slower = r.median <= 1 or verdict == "within noise"
            bandwidth_ok = "70%" not in c["target"] or (peak is not None and gb_s >= 0.7 * peak)
            row["met"] = "yes" if no_slower and bandwidth_ok else "no"
        rows.append(row)
    table = pd.DataFrame(rows)
    table["clock"] = comparison.clock
    helpers.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = helpers.RESULTS_DIR / "bench_kernels.csv"
    helpers.write_csv_atomically(table, path)
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(table.drop(columns="clock").to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"\n{len(table)} cases in {time.perf_counter() - start:.0f} s, {comparison.clock}; "
          f"written to {os.path.relpath(path, ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
