"""The modes a run can be in (full, quick, cpu) and how one is chosen, every size a chapter uses per mode, the
correctness tolerances, and pinning the process to CPU cores. Definitions only: nothing is resolved or pinned at
import (helpers does that, once)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

MODES = ("full", "quick", "cpu")


def resolve_mode(requested: str | None, gpu_available: bool) -> str:
    """The mode to run in, from ``SLOWER_MODE`` (``requested``) and whether a GPU is visible.

    Unset: ``full`` on a GPU, ``cpu`` without one. ``full`` or ``quick`` (small sizes on a GPU, e.g. a
    GPU CI runner) without a GPU is an error, never a silent switch to CPU mode; ``cpu`` forces
    Triton's interpreter even where a GPU exists.
    """
    requested = (requested or "").strip().lower()
    if requested and requested not in MODES:
        raise ValueError(f"SLOWER_MODE must be one of {', '.join(MODES)} (or unset), got {requested!r}")
    if requested in ("full", "quick") and not gpu_available:
        raise RuntimeError(f"SLOWER_MODE={requested} asks for a GPU, but PyTorch sees none "
                           f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}). "
                           "Attach a GPU (on Colab: Runtime > Change runtime type > T4 GPU), install a CUDA "
                           "build of PyTorch, or set SLOWER_MODE=cpu for Triton's interpreter.")
    return requested or ("full" if gpu_available else "cpu")


def parse_cpus(spec: str) -> set[int]:
    """'3' -> {3}; '2-5' -> {2, 3, 4, 5}; '0,2' -> {0, 2}: the form of ``taskset -c``."""
    cpus = set()
    try:
        for part in filter(None, (p.strip() for p in spec.split(","))):
            lo, dash, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi if dash else lo) + 1))
    except ValueError:
        cpus = set()
    if not cpus:
        raise ValueError(f"SLOWER_PIN_CPUS must list CPU cores like '3', '2-5' or '0,2', got {spec!r}")
    return cpus


def pin_cpus(spec: str | None) -> set[int] | None:
    """Pin this process to the cores in ``spec`` (``SLOWER_PIN_CPUS``); None (and nothing done) when unset.

    At batch size 1 the host sets the pace, and a process that the OS moves between cores runs at a
    less steady speed; pinning narrows the spread of tokens/s on some hosts and not on others.
    """
    if not spec:
        return None
    cpus = parse_cpus(spec)
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError("SLOWER_PIN_CPUS needs os.sched_setaffinity (Linux)")
    available = os.sched_getaffinity(0)
    if not cpus <= available:
        raise ValueError(f"SLOWER_PIN_CPUS={spec!r} names cores this process cannot use; it may use {sorted(available)}")
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))  # PyTorch's CPU thread pool, pinned too: one thread per core, never more
    return cpus


# Correctness tolerances, one place for the chapters (tests/ keep their own tables per dtype).
# "kernel": |ours - reference| / max|reference| for one kernel against a higher-precision reference;
# "attention": absolute error of attention outputs (they are averages of values, of order one);
# "model" / "full_stack": relative change of the logits after one kind of swap / after every swap.
TOLERANCE = {
    "kernel": {torch.float16: 2e-3, torch.float32: 1e-5},
    "attention": {torch.float16: 1e-2, torch.float32: 1e-4},
    "model": {torch.float16: 2e-2, torch.float32: 1e-4},
    "full_stack": {torch.float16: 5e-2, torch.float32: 1e-4},
}


@dataclass(frozen=True)
class Sizes:
    """Every size a chapter uses, per mode. Chapters read these; they never invent their own."""
    prompt_len: int            # tokens in the prompt for tokens/s runs
    new_tokens: int            # tokens generated per tokens/s run
    new_tokens_full_stack: int  # chapter 6: one greedy generation per model, for where the outputs diverge
    new_tokens_context: int    # chapter 7
    context_prompts: tuple     # chapter 7's prompt lengths
    rounds: int                # rounds of an interleaved comparison (compare_configs): every config once each
    rounds_small: int          # rounds where the effect is near the noise (chapter 3's swap, SMALL_EFFECTS)
    rounds_sweep: int          # rounds per point of chapter 7's sweep (a threshold tighter than the blog's ~18% trend); even, so
                               # that every round has its backward twin (_shuffled's counterbalanced pairs)
    rounds_kernel: int         # rounds of a kernel-against-kernel comparison (compare_calls)
    profile_tokens: int        # decode steps under torch.profiler (its bookkeeping is slow)
    add_n: int                 # elements for the headline add timing
    add_sweep: tuple           # element counts for the add sweep
    rmsnorm_hidden: int
    rmsnorm_rows: int          # the "prefill-like" RMSNorm shape
    rmsnorm_decode_rows: int   # the decode shape
    rmsnorm_sweep_rows: tuple  # chapter 3's sweep; on a GPU it goes past an H200's 63 MB L2 (16K rows and more)
    matmul_shape: tuple        # (M, K, N): x[M, K] @ W[N, K]^T
    matmul_decode_shape: tuple
    kv_lengths: tuple          # chapter 1's KV-cache steps: one decode step after this many generated tokens
    rounds_kv: int             # rounds of that sweep (even: every shuffled order also runs backwards)
    new_tokens_decode: int = 8  # chapter 10: tokens per timed generation, long enough that decode outweighs prefill
    rounds_decode: int = 2      # chapter 10's rounds: each holds the original's long eager generations twice
    attention_blog_shape: dict = field(default_factory=dict)
    attention_qwen_shape: dict = field(default_factory=dict)


# Short generations in many rounds: at batch size 1 the host's speed moves from one generation to the next (on the
# H200 the original's 24-token generations took 22-44 ms per token within one minute), so the closer in time two
# configurations run, the more of that a ratio cancels. On the H200, in one process, three comparisons of 8-token
# runs in 24 rounds (~35 s each) gave the attention + MLP swap 1.366-1.388 and all projections + RMSNorm
# 1.313-1.360; three of 24-token runs in 8 rounds (as long each) gave 1.371-1.495 and 1.317-1.465.
SIZES_BY_MODE = {
    "full": Sizes(
        prompt_len=32, new_tokens=8, new_tokens_full_stack=384, new_tokens_context=8,
        context_prompts=(128, 256, 512, 1024), rounds=24, rounds_small=48, rounds_sweep=16, rounds_kernel=5,
        profile_tokens=8,
        add_n=2**20, add_sweep=tuple(2**k for k in range(12, 27, 2)),
        rmsnorm_hidden=1024, rmsnorm_rows=512, rmsnorm_decode_rows=1,
        rmsnorm_sweep_rows=(1, 4, 16, 64, 256, 1024, 4096, 16384, 32768, 65536),
        matmul_shape=(128, 1024, 3072), matmul_decode_shape=(1, 1024, 3072),
        kv_lengths=(32, 128, 512), rounds_kv=4, new_tokens_decode=128, rounds_decode=8,
        attention_blog_shape=dict(B=1, Hq=16, Hkv=16, S=1, T=512, D=64),
        attention_qwen_shape=dict(B=1, Hq=16, Hkv=8, S=1, T=512, D=128)),
    "quick": Sizes(
        prompt_len=16, new_tokens=16, new_tokens_full_stack=32, new_tokens_context=8,
        context_prompts=(64, 128), rounds=3, rounds_small=4, rounds_sweep=4, rounds_kernel=3, profile_tokens=4,
        add_n=2**16, add_sweep=tuple(2**k for k in range(12, 21, 4)),
        rmsnorm_hidden=1024, rmsnorm_rows=64, rmsnorm_decode_rows=1, rmsnorm_sweep_rows=(1, 16, 256, 16384),
        matmul_shape=(64, 1024, 1024), matmul_decode_shape=(1, 1024, 1024), kv_lengths=(32, 128), rounds_kv=4,
        new_tokens_decode=32, rounds_decode=3,
        attention_blog_shape=dict(B=1, Hq=16, Hkv=16, S=1, T=128, D=64),
        attention_qwen_shape=dict(B=1, Hq=16, Hkv=8, S=1, T=128, D=128)),
    "cpu": Sizes(
        prompt_len=16, new_tokens=8, new_tokens_full_stack=12, new_tokens_context=4,
        context_prompts=(16, 32), rounds=2, rounds_small=2, rounds_sweep=2, rounds_kernel=2, profile_tokens=4,
        add_n=2**12, add_sweep=(2**8, 2**10, 2**12, 2**14),
        rmsnorm_hidden=64, rmsnorm_rows=16, rmsnorm_decode_rows=1, rmsnorm_sweep_rows=(1, 4, 16, 64, 256),
        matmul_shape=(16, 64, 128), matmul_decode_shape=(1, 64, 128), kv_lengths=(4, 16), rounds_kv=2,
        new_tokens_decode=8, rounds_decode=2,
        attention_blog_shape=dict(B=1, Hq=4, Hkv=4, S=1, T=32, D=16),
        attention_qwen_shape=dict(B=1, Hq=4, Hkv=2, S=1, T=32, D=16)),
}


# How to read a run's timings, one line per mode (show_env prints it; full mode names the GPU there)
MODE_NOTES = {"cpu": "CPU mode: Triton's interpreter on a tiny model; interpreter times, for the method, not for GPU conclusions.",
              "quick": "Quick mode: real GPU timings at reduced sizes, not comparable to full runs.",
              "full": "Full mode: GPU timings at the sizes the chapters were designed for."}
