"""The headline ratios again, in minutes: the kernel ratios on the GPU clock and the tokens/s ratios in one comparison,
each set beside the committed run (``reproduce``; ``tools/reproduce.py`` runs it)."""
from __future__ import annotations

from slower_harness import env  # first: it settles TRITON_INTERPRET before Triton loads

from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

import slower_kernels
from slower_harness.compare import Comparison, compare_calls, compare_configs
from slower_harness.model import load_model
from slower_harness.patching import ALL_CUSTOM, PROJECTION_GROUPS
from slower_harness.results import results
from slower_harness.timing_order import before_any_profile


# --- Reproduce: the headline ratios again, in minutes -------------------------------------------
# The tokens/s ratios come from one interleaved comparison; the kernel ratios from GPU time (CUDA-graph
# replay) at the chapters' shapes. ``reproduce`` measures them and sets them beside a committed run.
REPRODUCE_CONFIGS = {  # result id -> (configuration name, patched() arguments), as the chapters measure them
    "rmsnorm.tps_slowdown": ("two-pass RMSNorm", dict(rmsnorm="two_pass")),
    "matmul.attention_proj_slowdown": ("attention proj", dict(projections={"attention"})),
    "matmul.attention_mlp_slowdown": ("attention + MLP proj", dict(projections={"attention", "mlp"})),
    "matmul.all_proj_rmsnorm_slowdown": ("all proj + RMSNorm", dict(rmsnorm="two_pass",
                                                                   projections=set(PROJECTION_GROUPS))),
    "attention.slowdown": ("per-head attention", dict(attention="slow")),
    "full.slowdown": ("all custom", ALL_CUSTOM),
}
# Tokens/s effects near the noise floor (the two-pass RMSNorm measured 0.99 and 1.02 against the original on the
# H200): their chapter and ``reproduce`` compare them in SIZES.rounds_small rounds, the rest in SIZES.rounds
# (chapter 8 re-measures them all in its own one comparison of SIZES.rounds).
SMALL_EFFECTS = ("rmsnorm.tps_slowdown",)


KERNEL_RATIO_IDS = ("add.ratio", "rmsnorm.two_pass_ratio", "matmul.triton_ms/matmul.torch_ms",
                    "attention.slow_ms/attention.sdpa_ms")  # the headline kernel ratios ``reproduce`` re-measures


def _kernel_ratio_cases() -> dict:
    """result id (``KERNEL_RATIO_IDS``) -> (ours, reference): zero-argument calls on fresh random inputs at the
    chapters' shapes."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(env.DEVICE, env.DTYPE)

    x, y = rand(env.SIZES.add_n), rand(env.SIZES.add_n)
    rows = rand(env.SIZES.rmsnorm_rows, env.SIZES.rmsnorm_hidden)
    norm = Qwen3RMSNorm(env.SIZES.rmsnorm_hidden, eps=1e-6).to(env.DEVICE, env.DTYPE)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(env.SIZES.rmsnorm_hidden, generator=g))
    M, K, N = env.SIZES.matmul_shape
    a, w = rand(M, K), rand(N, K)
    s = env.SIZES.attention_blog_shape
    q, k, v = rand(s["B"], s["Hq"], s["S"], s["D"]), rand(s["B"], s["Hkv"], s["T"], s["D"]), rand(
        s["B"], s["Hkv"], s["T"], s["D"])
    scale = s["D"] ** -0.5
    cases = {
        "add.ratio": (lambda: slower_kernels.add(x, y), lambda: torch.add(x, y)),
        "rmsnorm.two_pass_ratio": (lambda: slower_kernels.rmsnorm_two_pass(rows, norm.weight, norm.variance_epsilon),
                                   lambda: norm(rows)),
        "matmul.triton_ms/matmul.torch_ms": (lambda: slower_kernels.matmul(a, w.t(), **slower_kernels.DEFAULT_TILE.kwargs()),
                                             lambda: a @ w.t()),
        "attention.slow_ms/attention.sdpa_ms": (
            lambda: slower_kernels.attention_slow(q, k, v, scale=scale, causal=True),  # as chapter 5 calls it
            lambda: F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=s["Hq"] != s["Hkv"])),
    }
    return {key: cases[key] for key in KERNEL_RATIO_IDS}


def _committed_value(table, key: str) -> float | None:
    """A committed result (or a ratio of two, ``a/b``) from a results table indexed by id."""
    try:
        if "/" in key:
            top, bottom = key.split("/")
            return float(table.loc[top, "value"]) / float(table.loc[bottom, "value"])
        return float(table.loc[key, "value"])
    except (KeyError, ValueError, ZeroDivisionError):
        return None


REPRODUCE_BAR = 0.10  # a re-measured headline ratio within 10% of the committed one reproduces it


def reproduce_configs(ids=None) -> dict:
    """The ``compare_configs`` configurations behind the tokens/s headline ratios (all, or those in ``ids``)."""
    return {name: kwargs for key, (name, kwargs) in REPRODUCE_CONFIGS.items() if ids is None or key in ids}


def reproduce(model=None, tokenizer=None, ids=None, rounds: int | None = None, committed: Path | None = None,
              comparison: "Comparison | None" = None):
    """Re-measure the headline ratios (all, or those in ``ids``) and set each beside the committed run.

    Kernel ratios (``KERNEL_RATIO_IDS``): GPU time in shuffled rounds against the PyTorch call with its own A/A
    floor (``compare_calls``), before any profile in this process (refused after one); tokens/s ratios: ``compare_configs`` runs of ``reproduce_configs(ids)``, one in
    ``SIZES.rounds_small`` rounds for the ``SMALL_EFFECTS`` and one in ``SIZES.rounds`` for the rest (``rounds``
    overrides both), or ``comparison`` when the caller already ran one with every configuration (chapter 8
    profiles and prices it too). Returns a DataFrame: id,
    what, clock, yours, quartiles, A/A floor, committed, deviation (%), verdict (yours); ``attrs["quartile bounds"]``
    holds each id's quartiles unrounded. The tokens/s
    ratios need ``model`` (the same model the chapters use; loaded here when None).
    """
    known = [*KERNEL_RATIO_IDS, *REPRODUCE_CONFIGS]
    ids = list(ids) if ids is not None else known
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"ids: {unknown} cannot be reproduced; choose from {known}")
    timed = [i for i in ids if i in KERNEL_RATIO_IDS]
    if timed:
        before_any_profile(f"reproduce times the kernel ratios {timed} in GPU time",
                            "tools/reproduce.py times them before any profile, and so must a re-measure set beside "
                            "it: on the H200, chapter 8's re-measure after its profiled comparison read the per-head "
                            "attention's GPU-time ratio 6-17% above chapter 5's and reproduce's in three runs.")
    cases = _kernel_ratio_cases() if timed else {}
    committed = committed or env.COMMITTED_DIR / env.SLUG / "results.csv"
    table = results(committed).set_index("id")
    rows = []
    for key in timed:
        ours, reference = cases[key]
        c = compare_calls({"ours": ours}, reference)
        r, f = c.ratios["ours"], c.floor
        rows.append({"id": key, "what": "kernel time ratio", "clock": c.clock, "yours": r.median,
                     "quartiles": r.quartiles, "A/A floor": f.median,
                     "verdict": c.verdict("ours").text, "bounds": (r.low, r.high)})
    wanted = [i for i in ids if i in REPRODUCE_CONFIGS]
    if wanted:
        if comparison is not None:
            missing = [REPRODUCE_CONFIGS[i][0] for i in wanted if REPRODUCE_CONFIGS[i][0] not in comparison.ratios]
            if missing:
                raise ValueError(f"comparison: has no {missing}; run compare_configs with reproduce_configs(ids)")
            comparisons = {key: comparison for key in wanted}
        else:
            if model is None:
                model, tokenizer, _ = load_model()
            comparisons, groups = {}, {}
            for key in wanted:  # more rounds where the effect is near the noise; one comparison per round count
                n = rounds if rounds is not None else env.SIZES.rounds_small if key in SMALL_EFFECTS else env.SIZES.rounds
                groups.setdefault(n, []).append(key)
            for n, group in groups.items():
                c = compare_configs(model, reproduce_configs(group), tokenizer=tokenizer, rounds=n)
                comparisons.update({key: c for key in group})
        for key in wanted:
            name, c = REPRODUCE_CONFIGS[key][0], comparisons[key]
            r = c.ratios[name]
            rows.append({"id": key, "what": f"time ratio to the original ({name})",
                         "clock": f"wall, {len(c.orders)} shuffled rounds", "yours": r.median,
                         "quartiles": r.quartiles, "A/A floor": c.floor.median, "verdict": c.verdict(name).text,
                         "bounds": (r.low, r.high)})
    out = pd.DataFrame(rows)
    out["committed"] = [_committed_value(table, k) for k in out["id"]]
    out["deviation %"] = 100 * (out["yours"] / out["committed"] - 1)
    out[f"within {100 * REPRODUCE_BAR:.0f}%"] = [
        "" if d != d else "yes" if abs(d) <= 100 * REPRODUCE_BAR else "no" for d in out["deviation %"]]
    table = out[["id", "what", "clock", "yours", "quartiles", "A/A floor", "committed", "deviation %",
                 f"within {100 * REPRODUCE_BAR:.0f}%", "verdict"]].copy()
    # the quartiles unrounded, by id: whether a value lies inside them is read from these, not from the text
    table.attrs["quartile bounds"] = dict(zip(out["id"], out["bounds"]))
    return table
