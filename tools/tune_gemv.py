"""Measure ``decode_gemv``'s tiles on this GPU, shape by shape, and keep the fastest: the table the decode step reads.

    python tools/tune_gemv.py            # sweep; rows of this GPU into slower_kernels/gemv_tuned.csv,
                                         # the bandwidth table into runs/<gpu>/gemv_bandwidth.csv
    python tools/tune_gemv.py --commit   # the bandwidth table into figures/<gpu>/ (tracked) instead

The shapes are the projections of one decode step of Qwen3-0.6B (``decode_projections``), each with what the
step folds into it. For each, every candidate tile (``candidates``) is first checked against a float64 reference,
then timed; the fastest goes into the table, keyed by the GPU's name: another GPU keeps ``gemv``'s rule until this
is run on it.

Clock: GPU time (``helpers.cold_gpu_us``): one CUDA graph of launches back to back over copies of the weight that
fill the L2 cache four times, so every launch reads its weight from memory, as in a decode step, where 1.2 GB pass
between two reads of one matrix; the gaps between launches included, as a graph of the decode step pays them. The
same graph of copies that move as many bytes (read half, write half, ``helpers.copy_gpu_us``) gives the copy
bandwidth at that size; copies of 256 MiB give the large-copy bandwidth.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BLOCK_NS = (1, 2, 4, 8, 16, 32, 64)
BLOCK_KS = (128, 256, 512, 1024, 2048, 4096)
TABLE_FIELDS = ("gpu", "variant", "N", "K", "block_n", "block_k", "num_warps", "num_stages", "prefetch", "us", "GB/s")


def candidates(N: int, K: int, variant: str, sm_count: int) -> list:
    """The tiles tried for N outputs over K: a program tile of 1 Ki to 16 Ki weight elements, 16 to 32 of them per
    thread, BLOCK_K no longer than K needs, at least one program per SM; each with and without the prefetch of w.
    (Triton's num_stages changed no time here by more than 2%: it stays 1.)"""
    import triton

    from slower_kernels.folded_gemv import DecodeGemvConfig

    rows = 2 if "gated" in variant else 1
    out = []
    for bn in BLOCK_NS:
        for bk in BLOCK_KS:
            tile = rows * bn * bk
            if bk > triton.next_power_of_2(K) or not 1024 <= tile <= 16384 or triton.cdiv(N, bn) < sm_count:
                continue
            for warps in (1, 2, 4, 8):
                if 16 <= tile // (32 * warps) <= 32:
                    for prefetch in (False, True):
                        out.append(DecodeGemvConfig(bn, bk, warps, prefetch=prefetch))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", action="store_true", help="write figures/<gpu>/gemv_bandwidth.csv (tracked)")
    args = parser.parse_args()
    if args.commit:
        os.environ["SLOWER_RESULTS_ROOT"] = str(ROOT / "figures")
    import torch

    import helpers
    from slower_kernels import gemv
    from slower_kernels.folded_gemv import (ARGMAX_EMPTY, TUNED_TABLE, argmax_index, decode_gemv, decode_projections,
                                            rule_config, variant_flags)

    if not helpers.HAS_GPU:
        print("tools/tune_gemv.py measures a GPU: it needs CUDA (the interpreter's timings say nothing).")
        return 2
    helpers.show_env()
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    gpu = torch.cuda.get_device_name(device)
    spec = helpers.QWEN3_0_6B
    shapes = decode_projections(spec["hidden_size"], spec["intermediate_size"], spec["num_attention_heads"],
                                spec["num_key_value_heads"], spec["head_dim"], spec["vocab_size"])
    dtype, elem = torch.float16, 2
    gen = torch.Generator(device).manual_seed(0)
    started = time.perf_counter()
    best_rows, report, sweep = [], [], []
    large_copy = 2**29 / helpers.copy_gpu_us(2**29, device) / 1e3  # GB/s: copies of 256 MiB (512 MiB moved)
    for name, (variant, N, K) in shapes.items():
        flags = variant_flags(variant)
        rows = 2 * N if flags["GATED"] else N
        weight_bytes = rows * K * elem
        ws = helpers.cold_copies(torch.randn(rows, K, generator=gen, device=device, dtype=dtype) / K**0.5)
        x = torch.randn(1, K, generator=gen, device=device, dtype=dtype)
        norm = (torch.rand(K, generator=gen, device=device, dtype=dtype) + 0.5) if flags["NORM"] else None
        res = torch.randn(N, generator=gen, device=device, dtype=dtype) if flags["RESIDUAL"] else None
        key = torch.full((1,), ARGMAX_EMPTY, dtype=torch.long, device=device) if flags["ARGMAX"] else None
        kw = dict(norm_weight=norm, residual=res, gated=flags["GATED"], argmax_key=key)
        # the float64 reference of the first copy, for every candidate's check
        xr = x.double()
        if norm is not None:
            xr = (norm * (x.float() * torch.rsqrt(x.float().pow(2).mean() + 1e-6)).to(dtype)).double()
        ref = xr @ ws[0].double().T
        if flags["GATED"]:
            ref = torch.nn.functional.silu(ref[:, :N]) * ref[:, N:]
        if res is not None:
            ref = ref + res.double()

        def measure(config) -> float:
            if key is not None:
                key.fill_(ARGMAX_EMPTY)
            got = decode_gemv(x, ws[0], config=config, **kw).double()
            if not torch.allclose(got, ref, atol=2e-2, rtol=2e-2):
                raise AssertionError(f"{name} {config.name}: off the float64 reference by "
                                     f"{(got - ref).abs().max().item():.3g}")
            if key is not None and argmax_index(key).item() != got.argmax().item():
                raise AssertionError(f"{name} {config.name}: argmax {argmax_index(key).item()}, "
                                     f"the logits' {got.argmax().item()}")
            return helpers.cold_gpu_us(lambda w: decode_gemv(x, w, config=config, **kw), ws)

        rule = rule_config(N, K)
        timed = {rule: measure(rule)}
        for config in candidates(N, K, variant, props.multi_processor_count):
            if config not in timed:
                timed[config] = measure(config)
        for config, us in timed.items():
            sweep.append(dict(projection=name, variant=variant, N=N, K=K, tile=config.name, us=us,
                              **{"GB/s": weight_bytes / us / 1e3, "rule": config == rule}))
        best = min(timed, key=timed.get)
        # chapter 9's gemv over the same (fused) weight, nothing folded
        ch9 = helpers.cold_gpu_us(lambda w: gemv(x, w), ws)
        copy_us = helpers.copy_gpu_us(weight_bytes, device)
        best_rows.append(dict(gpu=gpu, variant=variant, N=N, K=K, block_n=best.block_n, block_k=best.block_k,
                              num_warps=best.num_warps, num_stages=best.num_stages, prefetch=best.prefetch, us=round(timed[best], 3),
                              **{"GB/s": round(weight_bytes / timed[best] / 1e3, 1)}))
        gbs = weight_bytes / timed[best] / 1e3
        report.append({"projection": name, "folded in": variant, "N": N, "K": K, "weight MiB": weight_bytes / 2**20,
                       "tiles tried": len(timed), "tuned tile": best.name, "tuned us": timed[best], "tuned GB/s": gbs,
                       "rule tile": rule.name, "rule us": timed[rule], "rule GB/s": weight_bytes / timed[rule] / 1e3,
                       "chapter 9 gemv us": ch9, "same-bytes copy us": copy_us,
                       "same-bytes copy GB/s": weight_bytes / copy_us / 1e3,
                       "tuned / same-bytes copy": gbs / (weight_bytes / copy_us / 1e3),
                       "large copy GB/s": large_copy, "tuned / large copy": gbs / large_copy})
        print(f"{name:8s} {variant:12s} {len(timed):3d} tiles: best {best.name} {timed[best]:.2f} us "
              f"({gbs:.0f} GB/s), rule {rule.name} {timed[rule]:.2f} us, chapter 9 gemv {ch9:.2f} us, "
              f"same-bytes copy {copy_us:.2f} us", flush=True)
    # the table: this GPU's rows replaced, other GPUs' kept
    kept = []
    if TUNED_TABLE.exists():
        with open(TUNED_TABLE, newline="") as f:
            kept = [row for row in csv.DictReader(f) if row["gpu"] != gpu]
    with open(TUNED_TABLE, "w", newline="") as f:
        writer = csv.DictWriter(f, TABLE_FIELDS)
        writer.writeheader()
        writer.writerows(kept + best_rows)
    import pandas as pd

    clock = "GPU time: CUDA-graph replay of launches back to back over weights that do not fit the L2 cache"
    helpers.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(report)
    helpers.write_csv_atomically(table.assign(clock=clock, gpu=gpu), helpers.RESULTS_DIR / "gemv_bandwidth.csv")
    helpers.write_csv_atomically(pd.DataFrame(sweep).assign(gpu=gpu), helpers.RESULTS_DIR / "gemv_sweep.csv")
    with pd.option_context("display.width", 250, "display.max_columns", None):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"\nlarge copy {large_copy:.0f} GB/s; {sum(r['tiles tried'] for r in report)} tiles in "
          f"{time.perf_counter() - started:.0f} s; table {os.path.relpath(TUNED_TABLE, ROOT)}, report "
          f"{os.path.relpath(helpers.RESULTS_DIR / 'gemv_bandwidth.csv', ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
