"""Where a decoded token's time goes: its kernels and GPU-busy time per token (``count_decode``), by family of kernel
(``decode_breakdown``), one step on a time axis (``step_timeline``), and its weight bytes against the bandwidth
(``bandwidth``)."""
from __future__ import annotations

from slower_harness import env  # first: it settles TRITON_INTERPRET before Triton loads

import json
import shutil
import tempfile
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

import pandas as pd

import slower_kernels
from slower_harness.clocks import kernel_events, kernel_totals, sync
from slower_harness.decoders import GraphDecoder, decoder_for
from slower_harness.model import module_census
from slower_harness.specs import NOMINAL_GB_S
from slower_harness.timeline import timeline_from_trace
from slower_harness.timing_order import profiled


def _decode_runs(model, ids: torch.Tensor, n: int, use_cache: bool, decoder: str, warm: bool,
                 max_new_tokens: int | None) -> tuple:
    """An ``n``-token and a 1-token generation with ``decoder`` (built for ``max_new_tokens``, default n; after one
    untimed generation with ``warm``): ((their GPU kernels as (name, µs), or (None, None) without a GPU),
    (our Triton launches in each))."""
    run = decoder_for(model, ids, max(n, max_new_tokens or n), decoder, use_cache)
    if warm:
        run(n)  # every shape met once (and a graph captured, a compiled step compiled)
    events, project = [], []
    for k in (n, 1):
        with slower_kernels.count_launches() as c:
            if env.HAS_GPU:
                events.append(kernel_events(lambda k=k: run(k)))
            else:
                run(k)
                events.append(None)
        project.append(sum(c.values()))
    return events, project


def count_decode(model, ids: torch.Tensor, n: int, use_cache: bool = True, decoder: str = "generate",
                  warm: bool = True, max_new_tokens: int | None = None) -> tuple:
    """What one decoded token launches and keeps the GPU busy for, prefill excluded (an ``n``-token
    generation minus a 1-token one): (every CUDA kernel or None, GPU-busy ms or None, our Triton launches).
    Under a CUDA graph the kernels are the graph's (the profiler sees them run; the host launched one graph),
    and "our launches" counts the Python launcher calls, which a replay makes none of. Both counts come from
    the same two generations (our launch counter is Python, the profiler records the GPU's kernels).
    ``warm`` runs one untimed generation first (first compiles, an autotuner's trial launches, and a graph
    decoder's capture, which its first run makes); only ``generate()`` right after it has generated
    (``compare_configs``' rounds) may skip it. ``max_new_tokens``: the length a graph decoder's cache is built for
    (default ``n``), as in the timed runs.

    Counts only, no wall time: the profiler's bookkeeping slows the host, and wall time per token comes
    from ``compare_configs``' own shuffled rounds (``Comparison.profile``)."""
    profiled("a decode profile (profile_configs, count_decode)")
    (long, short), project = _decode_runs(model, ids, n, use_cache, decoder, warm, max_new_tokens)
    steps = n - 1
    ours = (project[0] - project[1]) / steps
    if not env.HAS_GPU:
        return None, None, ours
    (ln, gn), (l1, g1) = kernel_totals(long), kernel_totals(short)
    if not (0 < l1 < ln and 0 < g1 < gn):  # a longer generation runs more kernels, for longer
        raise RuntimeError(f"torch.profiler counted {ln} kernels ({gn:.3f} GPU ms) for {n} tokens and {l1} ({g1:.3f} "
                           "GPU ms) for 1: a profile lost GPU events (with TEARDOWN_CUPTI=1 set, a profile that starts "
                           "while the last one's teardown is pending can: pytorch/kineto#1554; unset it)")
    return (ln - l1) / steps, (gn - g1) / steps, ours


# --- A decoded token's kernels by family -------------------------------------------------------------
# (family, the kernel names it holds): our Triton kernels by what they do; every other kernel is PyTorch's
KERNEL_FAMILIES = (
    ("projections (gemv)", ("gemv_kernel", "decode_gemv_kernel")),
    ("attention", ("decode_attention_kernel", "decode_combine_kernel")),
    ("q/k norm + RoPE (+ cache write)", ("rmsnorm_rope_kernel", "rmsnorm_rope_cache_kernel")),
    ("RMSNorms, residual adds, SwiGLU", ("rmsnorm_fused_kernel", "add_rmsnorm_kernel", "swiglu_kernel")),
    ("next-token bookkeeping", ("advance_kernel",)),
)
PYTORCH_FAMILY = "PyTorch kernels (cache, adds, copies, argmax)"


def kernel_family(name: str) -> str:
    """The family (``KERNEL_FAMILIES``) of a kernel, by its name as the profiler reports it."""
    return next((family for family, names in KERNEL_FAMILIES if name in names), PYTORCH_FAMILY)


def decode_breakdown(model, ids: torch.Tensor, n: int, decoder: str = "generate",
                     max_new_tokens: int | None = None) -> pd.DataFrame:
    """Kernels and GPU µs per decoded token by family (``kernel_family``), rows in ``KERNEL_FAMILIES``' order: an
    ``n``-token generation with ``decoder`` minus a 1-token one, over n - 1, after one untimed generation (compiles,
    captures); a graph decoder's cache built for ``max_new_tokens`` (default n). GPU only (None in CPU mode): the
    interpreter's kernels leave no GPU trace."""
    if not env.HAS_GPU:
        return None
    profiled("a decode breakdown (decode_breakdown)")
    events, _ = _decode_runs(model, ids, n, True, decoder, True, max_new_tokens)
    per_token = []
    for kernels in events:
        df = pd.DataFrame(kernels, columns=["name", "us"])
        df["family"] = df["name"].map(kernel_family)
        per_token.append(df.groupby("family")["us"].agg(["count", "sum"]))
    diff = per_token[0].sub(per_token[1], fill_value=0) / (n - 1)
    order = [family for family, _ in KERNEL_FAMILIES] + [PYTORCH_FAMILY]
    return diff.reindex([f for f in order if f in diff.index]).rename(
        columns={"count": "kernels per token", "sum": "GPU µs per token"})


# --- One decode step on a time axis: the host's launches against the GPU's kernels ---------------
def step_timeline(model, ids: torch.Tensor, decoder: str = "generate", keep_trace: str | None = None):
    """One decode step after a prefill of ``ids``, traced by torch.profiler (host and GPU activity): the
    DataFrame of ``timeline_from_trace``. ``decoder="generate"``: one eager forward with a dynamic KV
    cache and the argmax, as ``generate()`` makes each step; ``"graph"``: one replay of ``GraphDecoder``'s
    captured step. Both after a warm-up step of the same shapes. GPU only (there is no GPU lane without one).
    ``keep_trace="name"`` keeps the profiler's Chrome trace as ``runs/traces/name.json`` (its path in the
    DataFrame's ``attrs["trace"]``): drop it on https://ui.perfetto.dev to see every kernel by name."""
    if not env.HAS_GPU:
        raise RuntimeError("step_timeline needs a CUDA GPU: in CPU mode there is no GPU timeline to trace")
    if decoder not in ("generate", "graph"):
        raise ValueError(f"decoder must be 'generate' or 'graph', got {decoder!r}")
    profiled("step_timeline")
    with torch.inference_mode():
        if decoder == "graph":
            graph = GraphDecoder(model, ids.shape[1] + 8)
            graph.generate(ids, 3)  # captures the step; leaves the position two steps past the prompt

            def step():
                graph.graph.replay()
        else:
            cache = DynamicCache(config=model.config)
            token = model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)

            def step():
                nonlocal token
                token = model(token, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        step()  # warm-up: the same shapes once more
        sync()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                step()
                sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        df = timeline_from_trace(json.loads(path.read_text()))
        if keep_trace:
            kept = env.TRACES_DIR / f"{keep_trace}.json"
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, kept)
            df.attrs["trace"] = kept
        return df


# --- The weight-read floor: a token's weight bytes against the data sheet's bandwidth ------------------
def bandwidth(model, tokens_per_s: float) -> dict:
    """Weight bytes read per second against the GPU's nominal bandwidth.

    Decoding one token reads every weight once, so ``model bytes / bandwidth`` is a floor on the time
    per token and ``model bytes x tokens/s`` is the weight bandwidth actually achieved.
    """
    model_bytes = module_census(model)["bytes"]
    nominal = NOMINAL_GB_S.get(env.SLUG) if env.HAS_GPU else None
    achieved = model_bytes * tokens_per_s / 1e9
    out = {"model_bytes": model_bytes, "achieved_gb_s": achieved, "nominal_gb_s": nominal,
           "floor_ms_per_token": None, "floor_fraction": None, "note": ""}
    if nominal:
        out["floor_ms_per_token"] = model_bytes / (nominal * 1e9) * 1e3
        out["floor_fraction"] = achieved / nominal
    else:
        out["note"] = ("no GPU: the floor needs a memory bandwidth" if not env.HAS_GPU else
                       f"nominal bandwidth of '{env._gpu_name()}' unknown: add it to slower_harness/specs.py (NOMINAL_GB_S)")
    return out
