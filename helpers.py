"""The experiment harness every chapter imports.

It answers the questions each chapter asks, the same way every time:

* where am I running (``MODE``, ``SLUG``, ``show_env``) and how big should things be (``SIZES``);
* which model (``load_model``: the hub checkpoint, or the same architecture with random weights);
* how fast does it generate, and where does the time go (``compare_configs``, with ``profile=True``);
* what happens when our kernels replace PyTorch's (``patched``);
* what did we measure, and what did the blog measure (``record``, ``compare``).

Imports point one way: notebooks import ``helpers`` and ``slower_kernels``; ``helpers`` imports ``slower_harness``
(the modules its code is moving into, re-exported here; ``slower_harness/__init__.py`` says which owns what) and
``slower_kernels``.
"""
from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from slower_harness.specs import GPU_SPECS, NOMINAL_GB_S, NOMINAL_TFLOPS, QWEN3_0_6B, TINY_QWEN3  # noqa: F401
from slower_harness.stats import (MIN_EFFECT, Ratio, Trend, Verdict, _bytes_label, count_label, fmt,  # noqa: F401
                                   noise_threshold, noisier_floor, places_apart, read_trend, table_number,
                                   threshold_pct, verdict, verdict_line, versus)
from slower_harness.modes import (MODE_NOTES, MODES, SIZES_BY_MODE, TOLERANCE, Sizes, parse_cpus,  # noqa: F401
                                   pin_cpus, resolve_mode)
from slower_harness.env import (COMMITTED_DIR, DEVICE, DTYPE, HAS_GPU, IN_NOTEBOOK, MODE, PINNED_CPUS,  # noqa: F401
                                 RESULTS_DIR, RESULTS_ROOT, ROOT, SIZES, SLUG, TRACES_DIR, _gpu_name, env_info,
                                 hardware_slug, show_env, tolerance)
from slower_harness.budget import (PREDICTION_BAR, TOO_LITTLE_SWAPPED, DecodeProfile, LaunchBudget,  # noqa: F401
                                    ModuleBudget, ModuleCall, ModulePrice, fit_module_budget, graph_step_ms)
from slower_harness.display import (_plain_number, generation_progress, launch_note, md, plain_log_ticks,  # noqa: F401
                                     progress, save_figure, save_sweep, show)
from slower_harness.machine import (_COMPILER_TABLE, _PTX, _aot, _nominal_rows, compiler_table,  # noqa: F401
                                     gpu_specs, gpu_table, plot_memory_hierarchy, plot_roofline, ptx_excerpt)
from slower_harness.exercises import ANSWERS, check_answer  # noqa: F401
from slower_harness.timeline import (BUSY_US, HOST_LAUNCH_NAMES, SPAN_US, TIMELINE_LANES,  # noqa: F401
                                      plot_timelines, timeline_from_trace, timeline_summary)
from slower_harness.results import (CATALOGUE_PATH, CHAPTER_OF_PREFIX, MODEL, RESULT_COLUMNS,  # noqa: F401
                                     UNIT_WORDS, _chapter_of_prefix, _locked, blog, blog_numbers, catalogue,
                                     catalogue_entry, compare, describe_model, record, results, results_path,
                                     summary_table, write_csv_atomically)

# --- Time first, profile after -------------------------------------------------------------------
# Kineto, torch.profiler's engine, leaves NVIDIA's CUPTI attached to the process after a profile ends
# (pytorch/pytorch#144455): its callbacks then add host time to every later kernel launch. Measured on the H200,
# ten short profiles (six of one add, four of decode generations) made the original model's wall time per decoded
# token 16% longer (28.8 -> 33.5 ms) and the all-projections swap's tokens/s ratio 8% smaller (1.35 -> 1.24) in the
# same process. With Kineto's switch to detach it (TEARDOWN_CUPTI=1) set, test processes there hung at exit after
# their tests had passed, so the series does not rely on it. It times first and profiles after: every host-clock
# timing below refuses to run once this process has profiled (``_profiled``), in every mode, so that the CPU run
# of the notebooks checks the order a GPU run needs.
PROFILED_BY: list[str] = []  # what profiled in this process, in order (on a GPU; in CPU mode, what would have)


def _profiled(what: str) -> None:
    """Note that ``what`` ran torch.profiler in this process (or would have, on a GPU)."""
    if what not in PROFILED_BY:
        PROFILED_BY.append(what)


def _before_any_profile(what: str, why: str) -> None:
    """Refuse a timing (``what`` says what it times) once this process has profiled; ``why`` says what the
    profile would do to it."""
    if PROFILED_BY:
        raise RuntimeError(
            f"{what}, but this process has already run torch.profiler ({', '.join(PROFILED_BY)}). {why} "
            "Time first, profile after: move the profiling below this timing (checked in every mode, CPU too), or, "
            "to time again after a chapter has run, restart the runtime (Colab: Runtime > Restart session).")


def _host_clock_free(what: str) -> None:
    """Refuse a host-clock timing (``what``) once this process has profiled: CUPTI would slow what it times."""
    _before_any_profile(f"{what} times the host's clock",
                        "After a profile NVIDIA's CUPTI stays attached and adds host time to every launch "
                        "(pytorch/pytorch#144455), so the timing would be slower than in a process that never profiled.")


import slower_kernels  # noqa: E402  (after TRITON_INTERPRET is settled)


# --- Model --------------------------------------------------------------------------------------
def _hub_reachable(host: str = "huggingface.co", timeout_s: float = 3.0) -> bool:
    """A short TCP probe, so a machine without network falls back in seconds instead of hanging."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    import socket

    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def random_qwen3(config_kwargs: dict = QWEN3_0_6B, seed: int = 0):
    """Qwen3ForCausalLM from a config dict, with seeded random weights, on DEVICE in DTYPE."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(**config_kwargs, attn_implementation="sdpa")
    torch.manual_seed(seed)
    with torch.device(DEVICE):
        model = Qwen3ForCausalLM(config)
    return model.to(DTYPE).eval()


def load_model(name_or_path: str = "Qwen/Qwen3-0.6B"):
    """Return ``(model, tokenizer or None, description)``.

    * a local checkpoint directory, or the hub when reachable: that checkpoint and its tokenizer;
    * a GPU without the hub: the exact Qwen3-0.6B architecture with seeded random weights (same speed,
      meaningless text), announced;
    * CPU mode: a tiny Qwen3 (two layers, hidden 64), since the interpreter runs kernels in numpy.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local = Path(name_or_path).is_dir()
    if local or (MODE != "cpu" and _hub_reachable()):
        tokenizer = None
        has_tokenizer = not local or any((Path(name_or_path) / f).exists()
                                         for f in ("tokenizer.json", "tokenizer_config.json"))
        if has_tokenizer:  # a checkpoint saved without one still loads (prompts are then random ids)
            tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=DTYPE, attn_implementation="sdpa")
        model = model.to(DEVICE).eval()
        describe_model(f"{name_or_path} ({'local checkpoint' if local else 'hub weights'}, {str(DTYPE)[6:]})")
        return model, tokenizer, MODEL["description"]
    if MODE == "cpu":
        model = random_qwen3(TINY_QWEN3)
        describe_model("tiny Qwen3 (CPU mode: 2 layers, hidden 64, random weights)")
        return model, None, MODEL["description"]
    model = random_qwen3(QWEN3_0_6B)
    describe_model(f"Qwen3-0.6B architecture, seeded random weights ({str(DTYPE)[6:]}; hub unreachable)")
    md(f"**Notice:** the model hub could not be reached, so `{name_or_path}` was built from its exact "
       "configuration with seeded random weights. Timings are real (they depend on shapes, not values); "
       "generated text is meaningless.")
    return model, None, MODEL["description"]


def module_census(model) -> dict:
    """How many of each module the patches can replace, and the model's size in bytes."""
    names = [type(m).__name__ for m in model.modules()]
    params = {id(p): p for p in model.parameters()}.values()  # tied weights counted once
    return {"rmsnorm": sum(n.endswith("RMSNorm") for n in names),
            "linear": sum(isinstance(m, torch.nn.Linear) for m in model.modules()),
            "attention": sum(n.endswith("Attention") for n in names),
            "parameters": sum(p.numel() for p in params),
            "bytes": sum(p.numel() * p.element_size() for p in params)}


# --- Tokens per second --------------------------------------------------------------------------
PROMPT_TEXT = (
    "A graphics processor is a machine for moving numbers. Thousands of small cores wait for data to "
    "arrive from memory, do a little arithmetic on it, and write the answer back. When the work is large "
    "and regular, the cores stay busy and the memory system runs near its limit. When the work is small "
    "and scattered, most of the time goes to waiting: for the next instruction from the host, for the "
    "next launch, for bytes that were just written and must be read again. ")


def make_prompt(prompt_len: int, tokenizer=None, vocab_size: int | None = None) -> torch.Tensor:
    """``[1, prompt_len]`` token ids on DEVICE: real text with a tokenizer, seeded random ids without."""
    if tokenizer is not None:
        ids = tokenizer(PROMPT_TEXT, return_tensors="pt").input_ids[0]
        ids = ids.repeat(prompt_len // len(ids) + 1)[:prompt_len]
    else:
        if vocab_size is None:
            raise ValueError("make_prompt: pass vocab_size when there is no tokenizer")
        ids = torch.randint(0, vocab_size, (prompt_len,), generator=torch.Generator().manual_seed(0))
    return ids[None].to(DEVICE)


def _sync() -> None:
    if HAS_GPU:
        torch.cuda.synchronize()


@contextmanager
def _no_gc():
    """Python's garbage collector off inside a timed region (as ``timeit`` does): a generation-2 collection
    in the middle of one run adds tens of ms to it alone. Re-enabled after (a full collection before each
    region would cost more than it saves: ~0.1 s with a model loaded)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def generate(model, ids: torch.Tensor, new_tokens: int, use_cache: bool = True,
              cache_implementation: str | None = None):
    """Greedy, exactly ``new_tokens`` new tokens; returns (new ids, seconds). ``cache_implementation="static"``
    is transformers' own fast path: it compiles the decode step (torch.compile with CUDA graphs; the first
    call compiles, tens of seconds)."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              use_cache=use_cache, cache_implementation=cache_implementation,
                              pad_token_id=model.config.eos_token_id or 0)
    with _no_gc():
        _sync()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
        _sync()
        seconds = time.perf_counter() - start
    new = out[0, ids.shape[1]:]
    if new.numel() != new_tokens:
        raise RuntimeError(f"asked for {new_tokens} new tokens, generate() returned {new.numel()}")
    return new, seconds


DECODERS = ("generate", "graph", "compiled")  # how a configuration generates (compare_configs' ``decoder`` key)


def _check_decoder(decoder: str, use_cache: bool = True) -> None:
    """``decoder`` is one of DECODERS and can run here, with ``use_cache``."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
    if decoder != "generate" and not use_cache:
        raise ValueError(f"decoder={decoder!r} decodes with a static KV cache: use_cache=False does not apply")
    if decoder == "compiled" and not HAS_GPU:
        raise ValueError("decoder='compiled' compiles transformers' decode step with CUDA graphs: it needs a GPU")


def decoder_for(model, ids: torch.Tensor, new_tokens: int, decoder: str = "generate", use_cache: bool = True):
    """A function ``run(n) -> (new ids, seconds)`` generating greedily with ``decoder`` (``DECODERS``):
    "generate" (transformers' eager ``generate()``, what every chapter times), "graph" (``GraphDecoder``:
    a static cache and one CUDA-graph replay per decoded token; eager in CPU mode) or "compiled"
    (transformers' ``generate(cache_implementation="static")``, compiled; GPU only). ``new_tokens``: the
    most ``run`` will be asked for. Build it inside the ``patched`` block it runs in: a captured graph
    holds the weights it was captured with."""
    _check_decoder(decoder, use_cache)
    if decoder == "graph":
        graph = GraphDecoder(model, ids.shape[1] + max(new_tokens, 4))  # capture writes 3 steps past the prompt
        return lambda n: graph.generate(ids, n)
    if decoder == "compiled":
        return lambda n: generate(model, ids, n, cache_implementation="static")
    return lambda n: generate(model, ids, n, use_cache)


def split_config(config: dict) -> tuple[dict, str, bool]:
    """A ``compare_configs`` configuration as (``patched`` arguments, decoder, use_cache)."""
    kwargs = dict(config)
    return kwargs, kwargs.pop("decoder", "generate"), kwargs.pop("use_cache", True)


def generate_with(model, config: dict, ids: torch.Tensor, new_tokens: int):
    """One greedy generation of ``new_tokens`` by a ``compare_configs`` configuration (``patched`` arguments,
    plus ``decoder`` and ``use_cache``): (new ids, seconds). Patched for this generation only."""
    kwargs, decoder, use_cache = split_config(config)
    with patched(model, **kwargs):
        return decoder_for(model, ids, new_tokens, decoder, use_cache)(new_tokens)


# --- Patching -----------------------------------------------------------------------------------
ATTENTION_NAMES = {"slow": "slower_triton_slow", "fast": "slower_triton_fast"}  # ours in AttentionInterface
PROJECTION_GROUPS = ("attention", "mlp", "lm_head")
# Every swap at once: the fully custom model of chapters 6 to 8 (``patched(model, **ALL_CUSTOM)``).
ALL_CUSTOM = dict(rmsnorm="two_pass", projections=set(PROJECTION_GROUPS), attention="slow")
# The fast kernels at once (issue "faster on purpose"): fused decoder layers (q/k/v in one projection, q/k norm
# + RoPE in one launch, residual add + RMSNorm, the MLP in three launches), flash-decoding attention, the final
# RMSNorm fused and lm_head as a matrix-vector product.
ALL_FAST = dict(layer="fused", attention="fast", rmsnorm="fused", projections={"lm_head"}, linear="gemv")


# Chapter 9's staircase: from the all-custom model, one fix at a time (each step's patched() arguments and
# decoder; compare_configs takes them as they are). The last step is the fast model replayed from a graph.
STAIRCASE = {
    "all custom": dict(ALL_CUSTOM),
    "1. fast attention": dict(ALL_CUSTOM, attention="fast"),
    "2. fused RMSNorm": dict(ALL_CUSTOM, attention="fast", rmsnorm="fused"),
    "3. matrix-vector projections": dict(ALL_CUSTOM, attention="fast", rmsnorm="fused", linear="gemv"),
    "3b. fused MLP": dict(ALL_CUSTOM, attention="fast", rmsnorm="fused", linear="gemv", mlp="fused"),
    "4. fused layers (the fast model)": dict(ALL_FAST),
    "5. CUDA graph": dict(ALL_FAST, decoder="graph"),
}
# Beside the staircase: what the original gets from a graph alone, and transformers' own compiled path (GPU).
BESIDE_STAIRCASE = {"original, CUDA graph": dict(decoder="graph"), "transformers compiled": dict(decoder="compiled")}


def _prompt_keys(query, key, value):
    """The keys and values a prompt sees when transformers passes no mask: with more keys than queries, a
    prompt written into an empty static cache (its SDPA path aligns ``is_causal`` to the upper left, where
    the prompt's keys come first; the rest of the cache is not written yet). One query is a decode step,
    which sees every key it is given."""
    S = query.shape[-2]
    if S > 1 and key.shape[-2] > S:
        return key[:, :, :S], value[:, :, :S]
    return key, value


def _slow_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: q [B, Hq, S, D], k/v [B, Hkv, T, D] -> ([B, S, Hq, D], None).

    With sdpa-style masks, ``attention_mask`` is None whenever plain causality suffices (an unpadded
    prefill, or decode): causality is then ours to apply. Otherwise the boolean mask is honoured.
    """
    if attention_mask is not None:
        attention_mask = attention_mask[..., : key.shape[-2]]
    else:
        key, value = _prompt_keys(query, key, value)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = slower_kernels.attention_slow(query, key, value, scale=scale, causal=attention_mask is None,
                                 attn_mask=attention_mask)
    return out.transpose(1, 2).contiguous(), None


def _fast_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function through ``slower_kernels.decode_attention`` / ``slower_kernels.prefill_attention``.

    Without a mask (an unpadded prefill, or decode over every cached key) plain causality holds. With an
    sdpa-style boolean mask at batch size 1, a decode step's visible keys are a prefix of the cache (a
    static cache longer than what is written): their count is summed from the mask ON the device and read
    by the kernel, so nothing syncs and the step can be captured in a CUDA graph. A prefill into an empty
    static cache attends causally to the first S keys, the prompt's; the rest of the cache is not written
    yet. transformers drops the mask for that prefill too (its SDPA path aligns ``is_causal`` to the upper
    left, where those keys come first), so more keys than queries with no mask means the same. Anything
    else (padding, batches) is refused rather than silently wrong.
    """
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    S = query.shape[-2]
    if attention_mask is not None and query.shape[0] != 1:
        raise ValueError("the fast attention handles batch size 1 with a mask (a static cache); got batch "
                         f"{query.shape[0]} with a mask")
    if S == 1:
        kv_len = None if attention_mask is None else attention_mask[0, 0, -1, : key.shape[-2]].sum()
        out = slower_kernels.decode_attention(query, key, value, scale=scale, kv_len=kv_len)
    else:
        if attention_mask is not None:  # the prompt into an empty static cache, masked: its keys first
            key, value = key[:, :, :S], value[:, :, :S]
        key, value = _prompt_keys(query, key, value)
        out = slower_kernels.prefill_attention(query, key, value, scale=scale, causal=True)
    return out.transpose(1, 2).contiguous(), None


_ATTENTION_FUNCTIONS = {"slow": _slow_attention, "fast": _fast_attention}
_CAPTURES: list = []  # active capture_module_calls() blocks: each sees the attention calls made through the registry


def _attention_kind(name: str) -> str:
    """The kind an attention function is captured and priced under: "attention (fast)", "attention (sdpa)"."""
    return f"attention ({name})"


def _attention_entry(kind: str):
    """What transformers calls for ``attention=kind``: the attention function, seen by any active capture."""
    fn = _ATTENTION_FUNCTIONS[kind]

    def entry(module, query, key, value, attention_mask, **kwargs):
        for capture in _CAPTURES:
            capture.attention(_attention_kind(kind), query,
                              lambda: fn(module, query, key, value, attention_mask, **kwargs))
        return fn(module, query, key, value, attention_mask, **kwargs)

    entry.__name__ = fn.__name__
    return entry


_ATTENTION_ENTRIES = {kind: _attention_entry(kind) for kind in _ATTENTION_FUNCTIONS}


def _register_attention(kind: str) -> str:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    name = ATTENTION_NAMES[kind]
    AttentionInterface.register(name, _ATTENTION_ENTRIES[kind])
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)  # same masks as "sdpa"
    return name


def _projection_group(parent: torch.nn.Module, child_name: str) -> str | None:
    if child_name == "lm_head":
        return "lm_head"
    kind = type(parent).__name__
    if kind.endswith("Attention"):
        return "attention"
    if kind.endswith("MLP"):
        return "mlp"
    return None


@contextmanager
def patched(model, rmsnorm: str | None = None, projections=(), attention: str | None = None,
            tile: "slower_kernels.TileConfig" = slower_kernels.DEFAULT_TILE, linear: str = "matmul", mlp: str | None = None,
            layer: str | None = None):
    """Swap the model's modules for the Triton ones inside a ``with`` block; restore them on exit.

    rmsnorm: None, "fused" or "two_pass" -- every ``*RMSNorm`` (q_norm and k_norm included).
    projections: any subset of {"attention", "mlp", "lm_head"} -- those ``nn.Linear``s use our kernels:
      ``linear="matmul"`` the tiled ``slower_kernels.matmul`` (with ``tile``), ``linear="gemv"`` the
      matrix-vector ``slower_kernels.GemvLinear`` (a tiled matmul above ``slower_kernels.GEMV_MAX_M`` rows).
    mlp: None or "fused" -- every ``*MLP`` becomes ``slower_kernels.FastMLP`` (fused gate/up, SwiGLU, down: 3
      launches); its projections then need no ``projections`` entry.
    attention: None, "slow" (``slower_kernels.attention_slow``, per head) or "fast" (``slower_kernels.decode_attention``
      and ``slower_kernels.prefill_attention``).
    layer: None or "fused" -- every ``*DecoderLayer`` becomes ``slower_kernels.FastDecoderLayer``: q/k/v in one
      projection, q_norm/k_norm + RoPE in one launch, the residual add fused with the post-attention
      RMSNorm, ``FastMLP``; needs ``attention="fast"``. Its norms and projections then need no
      ``rmsnorm``/``projections``/``mlp`` entry (the final norm and lm_head still do).
    Yields the counts replaced. Weights are shared, never copied (``FastMLP`` concatenates gate and up once);
    on exit the original module objects and attention implementation are back, so outputs are bit-identical
    to before.
    """
    if rmsnorm not in (None, "fused", "two_pass"):
        raise ValueError(f"rmsnorm must be None, 'fused' or 'two_pass', got {rmsnorm!r}")
    projections = set(projections or ())
    if not projections <= set(PROJECTION_GROUPS):
        raise ValueError(f"projections must be a subset of {PROJECTION_GROUPS}, got {sorted(projections)}")
    if attention not in (None, *ATTENTION_NAMES):
        raise ValueError(f"attention must be None, 'slow' or 'fast', got {attention!r}")
    if linear not in ("matmul", "gemv"):
        raise ValueError(f"linear must be 'matmul' or 'gemv', got {linear!r}")
    if mlp not in (None, "fused"):
        raise ValueError(f"mlp must be None or 'fused', got {mlp!r}")
    if layer not in (None, "fused"):
        raise ValueError(f"layer must be None or 'fused', got {layer!r}")
    if layer and attention != "fast":
        raise ValueError(f"layer='fused' runs the fast attention inside it: pass attention='fast', got {attention!r}")

    counts = {"rmsnorm": 0, "attention_proj": 0, "mlp_proj": 0, "lm_head": 0, "attention": 0, "mlp": 0, "layer": 0}
    swapped = []  # (parent, name, original module), undone in reverse order
    original_attn = model.config._attn_implementation

    def swap(parent, name, child, new, key):
        new.replaces = _module_kind(child)  # the kind of the original's module, for the launch budget's prices
        setattr(parent, name, new)
        swapped.append((parent, name, child))
        counts[key] += 1

    try:
        if layer:  # first: the modules inside a replaced layer are not visited below
            for parent in list(model.modules()):
                for name, child in list(parent.named_children()):
                    if type(child).__name__.endswith("DecoderLayer"):
                        swap(parent, name, child, slower_kernels.FastDecoderLayer.from_hf(child, _fast_attention), "layer")
        if mlp:  # before the projections, so that those inside a replaced MLP are not visited below
            for parent in list(model.modules()):
                for name, child in list(parent.named_children()):
                    if type(child).__name__.endswith("MLP"):
                        swap(parent, name, child, slower_kernels.FastMLP.from_hf(child), "mlp")
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if rmsnorm and type(child).__name__.endswith("RMSNorm"):
                    swap(parent, name, child, slower_kernels.TritonRMSNorm.from_hf(child, mode=rmsnorm), "rmsnorm")
                elif isinstance(child, torch.nn.Linear):
                    group = _projection_group(parent, name)
                    if group in projections:
                        new = (slower_kernels.GemvLinear.from_linear(child) if linear == "gemv" else
                               slower_kernels.TritonLinear.from_linear(child, tile=tile))
                        swap(parent, name, child, new,
                             {"attention": "attention_proj", "mlp": "mlp_proj", "lm_head": "lm_head"}[group])
        if attention:
            model.set_attn_implementation(_register_attention(attention))
            counts["attention"] = sum(type(m).__name__.endswith("Attention") for m in model.modules())
        yield counts
    finally:
        if model.config._attn_implementation != original_attn:
            model.set_attn_implementation(original_attn)
        for parent, name, child in reversed(swapped):
            setattr(parent, name, child)


# --- Where the time goes ------------------------------------------------------------------------
def _device_kernels(prof) -> list[tuple[str, float]]:
    """(name, GPU µs) of each device-side kernel of a torch.profiler run (copies and memsets left out), read from
    the profiler's raw Kineto events where this PyTorch has them: ``prof.events()`` builds a Python object per
    event, with the CPU side's tree, which on an H200 took 2.96 s for the 26,194 kernels of an 8-token all-custom
    generation against 0.17 s from the raw events (the same kernels, the same count)."""
    skip = ("Memcpy", "Memset")
    raw = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    try:
        return [(e.name(), e.duration_ns() / 1e3) for e in raw.events()
                if e.device_type() == torch.autograd.DeviceType.CUDA and not e.name().startswith(skip)]
    except AttributeError:  # no raw events here (raw is None), or an older event API: the profiler's own list
        pass
    return [(e.name, e.time_range.elapsed_us()) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(skip)]


def _kernel_stats(fn) -> tuple[int, float]:
    """(kernels launched, summed GPU ms) while ``fn`` runs, from torch.profiler's CUDA activity."""
    from torch.profiler import ProfilerActivity, profile

    if not PROFILED_BY:  # the callers name themselves (``_profiled``); a caller that did not is still noted
        _profiled("torch.profiler")
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": expected here
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:  # device activity only: cheap bookkeeping
            fn()
            _sync()
    events = _device_kernels(prof)
    return len(events), sum(us for _, us in events) / 1e3


def _count_decode(model, ids: torch.Tensor, n: int, use_cache: bool = True, decoder: str = "generate",
                  warm: bool = True) -> tuple:
    """What one decoded token launches and keeps the GPU busy for, prefill excluded (an ``n``-token
    generation minus a 1-token one): (every CUDA kernel or None, GPU-busy ms or None, our Triton launches).
    Under a CUDA graph the kernels are the graph's (the profiler sees them run; the host launched one graph),
    and "our launches" counts the Python launcher calls, which a replay makes none of. Both counts come from
    the same two generations (our launch counter is Python, the profiler records the GPU's kernels).
    ``warm`` runs one untimed generation first (first compiles, an autotuner's trial launches, and a graph
    decoder's capture, which its first run makes); only ``generate()`` right after it has generated
    (``compare_configs``' rounds) may skip it.

    Counts only, no wall time: the profiler's bookkeeping slows the host, and wall time per token comes
    from ``compare_configs``' own shuffled rounds (``Comparison.profile``)."""
    _profiled("a decode profile (compare_configs' profile=, _count_decode)")
    run = decoder_for(model, ids, n, decoder, use_cache)
    if warm:
        run(n)  # every shape met once (and a graph captured, a compiled step compiled)
    steps = n - 1
    project, stats = [], []
    for k in (n, 1):
        with slower_kernels.count_launches() as c:
            if HAS_GPU:
                stats.append(_kernel_stats(lambda k=k: run(k)))
            else:
                run(k)
        project.append(sum(c.values()))
    ours = (project[0] - project[1]) / steps
    if not HAS_GPU:
        return None, None, ours
    (ln, gn), (l1, g1) = stats
    if not (0 < l1 < ln and 0 < g1 < gn):  # a longer generation runs more kernels, for longer
        raise RuntimeError(f"torch.profiler counted {ln} kernels ({gn:.3f} GPU ms) for {n} tokens and {l1} ({g1:.3f} "
                           "GPU ms) for 1: a profile lost GPU events (with TEARDOWN_CUPTI=1 set, a profile that starts "
                           "while the last one's teardown is pending can: pytorch/kineto#1554; unset it)")
    return (ln - l1) / steps, (gn - g1) / steps, ours


# --- One decode step on a time axis: the host's launches against the GPU's kernels ---------------
def step_timeline(model, ids: torch.Tensor, decoder: str = "generate", keep_trace: str | None = None):
    """One decode step after a prefill of ``ids``, traced by torch.profiler (host and GPU activity): the
    DataFrame of ``timeline_from_trace``. ``decoder="generate"``: one eager forward with a dynamic KV
    cache and the argmax, as ``generate()`` makes each step; ``"graph"``: one replay of ``GraphDecoder``'s
    captured step. Both after a warm-up step of the same shapes. GPU only (there is no GPU lane without one).
    ``keep_trace="name"`` keeps the profiler's Chrome trace as ``runs/traces/name.json`` (its path in the
    DataFrame's ``attrs["trace"]``): drop it on https://ui.perfetto.dev to see every kernel by name."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile
    from transformers import DynamicCache

    if not HAS_GPU:
        raise RuntimeError("step_timeline needs a CUDA GPU: in CPU mode there is no GPU timeline to trace")
    if decoder not in ("generate", "graph"):
        raise ValueError(f"decoder must be 'generate' or 'graph', got {decoder!r}")
    _profiled("step_timeline")
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
        _sync()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                step()
                _sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        df = timeline_from_trace(json.loads(path.read_text()))
        if keep_trace:
            kept = TRACES_DIR / f"{keep_trace}.json"
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
    nominal = NOMINAL_GB_S.get(SLUG) if HAS_GPU else None
    achieved = model_bytes * tokens_per_s / 1e9
    out = {"model_bytes": model_bytes, "achieved_gb_s": achieved, "nominal_gb_s": nominal,
           "floor_ms_per_token": None, "floor_fraction": None, "note": ""}
    if nominal:
        out["floor_ms_per_token"] = model_bytes / (nominal * 1e9) * 1e3
        out["floor_fraction"] = achieved / nominal
    else:
        out["note"] = ("no GPU: the floor needs a memory bandwidth" if not HAS_GPU else
                       f"nominal bandwidth of '{_gpu_name()}' unknown: add it to helpers.NOMINAL_GB_S")
    return out


# --- Two clocks ---------------------------------------------------------------------------------
# Every kernel timing names its clock:
# * GPU time: how long the GPU works on one call, from replaying the call in a CUDA graph
#   (``triton.testing.do_bench_cudagraph``): the host is out of the loop, so microsecond kernels are
#   timed, not the launches that start them.
# * host time: the host's wall clock per call when calls run back to back, synchronised before and after
#   the loop. For a microsecond kernel this is the price of launching it, not of running it.
# In CPU mode there is one clock: the interpreter's wall time (numpy doing the kernel's work).
CLOCK_LABELS = {"gpu": "GPU time (CUDA-graph replay)", "host": "host time per call (back to back, synchronised)",
                "interpreter": "interpreter wall time (CPU mode)"}


def host_ms_per_call(fn, calls: int | None = None, repeats: int = 5) -> float:
    """Median host wall time of one call, from ``repeats`` synchronised loops of ``calls`` calls (before any
    profile in this process: ``_host_clock_free``)."""
    _host_clock_free("host_ms_per_call")
    return _loop_ms(fn, calls, repeats)


def _loop_ms(fn, calls: int | None = None, repeats: int = 5) -> float:
    """``host_ms_per_call`` without the order check: the interpreter's clock in CPU mode (``ms_per_call``), and
    ``compare_calls``' host clock, which checks the order itself."""
    calls = calls or (200 if HAS_GPU else 2)
    fn()  # warm-up: compilation and caches
    _sync()
    loops = []
    with _no_gc():
        for _ in range(repeats if HAS_GPU else 3):
            _sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            _sync()
            loops.append((time.perf_counter() - start) / calls)
    return statistics.median(loops) * 1e3


GPU_REP_MS = 10  # do_bench_cudagraph's graph: about this many ms of calls, replayed 10 times (Triton's default: 20)


def gpu_ms_per_call(fn) -> float | None:
    """GPU time of one call from CUDA-graph replay (median); None in CPU mode, where there is no GPU.
    Each graph holds about ``GPU_REP_MS`` ms of calls (thousands of a microsecond kernel), so one timing
    averages over that many calls ten times; half Triton's default window halves the time every timing
    takes (capture and replays), and the chapters time several hundred calls this way."""
    if not HAS_GPU:
        return None
    import triton.testing

    fn()  # compile outside the graph capture
    _sync()
    return triton.testing.do_bench_cudagraph(fn, rep=GPU_REP_MS, return_mode="median")


def ms_per_call(fn) -> float:
    """The clock ``compare_calls`` uses: GPU time (``gpu_ms_per_call``) on a GPU, interpreter wall time
    (one synchronised loop) in CPU mode."""
    return gpu_ms_per_call(fn) if HAS_GPU else _loop_ms(fn, repeats=1)


GRAPH_GAP_KERNELS = 200  # one-element adds in a row: the graph that graph_kernel_gap_us times


def graph_kernel_gap_us(kernels: int = GRAPH_GAP_KERNELS) -> float | None:
    """GPU µs per kernel that a CUDA-graph replay spends beyond the kernels' own run time: from one kernel's end
    to the next one's start, with no host launch in between. None in CPU mode, where there is no GPU.

    Replayed from a graph, a decode step's 500-1,850 kernels still start one after another on the GPU; their
    summed kernel time (the profiler's GPU-busy ms) leaves these gaps out. Measured on ``kernels`` one-element
    in-place adds in a row: their GPU time per call (``gpu_ms_per_call``, CUDA-graph replay) minus their summed
    kernel time (``torch.profiler``), over ``kernels``. A negative value says the profiler's kernel times already
    cover what the graph spends (no gap to add)."""
    if not isinstance(kernels, int) or kernels < 1:
        raise ValueError(f"kernels must be a positive int, got {kernels!r}")
    _profiled("graph_kernel_gap_us")  # in CPU mode too, where it returns at once: the order is checked there
    if not HAS_GPU:
        return None
    x = torch.zeros(1, device=DEVICE, dtype=DTYPE)

    def adds():
        for _ in range(kernels):
            x.add_(1)

    with torch.no_grad():
        replay_ms = gpu_ms_per_call(adds)
        counted, busy_ms = _kernel_stats(adds)
    if counted != kernels:
        raise RuntimeError(f"graph_kernel_gap_us: the profiler saw {counted} kernels for {kernels} adds")
    return 1e3 * (replay_ms - busy_ms) / kernels


CU_GRAPH_NODE_TYPE_KERNEL = 0  # the CUDA driver's CUgraphNodeType of a kernel (cuda.h)


def _graph_kernels(fn) -> int:
    """Kernels one call of ``fn`` launches, read from a CUDA graph of that call (its kernel nodes), without
    the profiler: a profile would leave CUPTI attached and slow every later launch (``_host_clock_free``).
    The call is captured, never run; copies and memsets are left out, as ``_device_kernels`` leaves them out."""
    import ctypes

    try:
        graph = torch.cuda.CUDAGraph(keep_graph=True)  # keeps the captured graph to read (PyTorch 2.8)
    except TypeError:
        raise RuntimeError("launches_per_call reads a CUDA graph's nodes, which needs PyTorch 2.8 or newer "
                           f"(torch.cuda.CUDAGraph(keep_graph=True)); this is {torch.__version__}") from None

    def check(status: int, call: str) -> None:
        if status != 0:
            raise RuntimeError(f"launches_per_call: the CUDA driver's {call} returned error {status}")

    try:
        with torch.cuda.graph(graph):
            fn()
        driver = ctypes.CDLL("libcuda.so.1")
        handle, n, kind = ctypes.c_void_p(graph.raw_cuda_graph()), ctypes.c_size_t(0), ctypes.c_int(0)
        check(driver.cuGraphGetNodes(handle, None, ctypes.byref(n)), "cuGraphGetNodes")
        nodes = (ctypes.c_void_p * n.value)()
        check(driver.cuGraphGetNodes(handle, nodes, ctypes.byref(n)), "cuGraphGetNodes")
        count = 0
        for node in nodes[:n.value]:
            check(driver.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType")
            count += kind.value == CU_GRAPH_NODE_TYPE_KERNEL
        return count
    finally:
        graph.reset()  # the captured graph and its memory pool go back


def launches_per_call(fn) -> float:
    """CUDA kernels one call launches on a GPU, read from a CUDA graph of the call (``_graph_kernels``: no
    profiler, so host timings may follow); our Triton kernels in CPU mode."""
    if HAS_GPU:
        fn()  # compiled and warm outside the capture, as gpu_ms_per_call's
        _sync()
        return float(_graph_kernels(fn))
    with slower_kernels.count_launches() as counted:
        fn()
    return float(sum(counted.values()))


def host_us_alone(fn, calls: int | None = None, repeats: int = 3, reset=None) -> float:
    """Host µs to issue one call of ``fn`` on its own: the median of ``repeats`` loops of ``calls`` calls, each
    loop timed from a synchronised start to its last call returning, without waiting for the GPU to finish
    (the wait comes after the clock stops). What the host pays per call before the GPU does anything; in CPU
    mode the interpreter runs the kernels inside the call, so it is the interpreter's time. ``reset`` (if
    given) runs before each loop, untimed: it puts back what the calls change (a KV cache they append to).
    Before any profile in this process (``_host_clock_free``)."""
    _host_clock_free("host_us_alone")
    calls = calls or (20 if HAS_GPU else 1)
    reset = reset or (lambda: None)
    reset()
    fn()  # warm-up: compilation and caches
    _sync()
    loops = []
    with _no_gc():
        for _ in range(repeats):
            reset()
            _sync()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            loops.append((time.perf_counter() - start) / calls)
            _sync()
    return statistics.median(loops) * 1e6


def _module_kind(module) -> str:
    mode = getattr(module, "mode", None)
    return type(module).__name__ + (f"({mode})" if isinstance(mode, str) else "")


def _is_ours(module) -> bool:
    return type(module).__module__.split(".")[0] == "slower_kernels"


class _Capture:
    """Counts and captures module calls (see capture_module_calls): ours that no other module of ours makes,
    or, with ``nested``, every call of the hooked kinds, inside one another or not."""

    def __init__(self, nested: bool = False, attention_twin: str | None = None):
        self.depth, self.forwards, self.counting, self.nested = 0, 0, False, nested
        self.attention_twin = attention_twin  # what the attention function seen here replaced (None: it is the model's)
        self.counts: dict = {}
        self.replays: dict = {}
        self.resets: dict = {}
        self.twins: dict = {}

    def _seen(self, kind: str, is_decode: bool, replay, twin: str | None) -> None:
        if not self.counting or (self.depth and not self.nested):
            return
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.twins.setdefault(kind, twin)  # from a counted call (a norm inside a fused layer replaced nothing itself)
        if is_decode and self.forwards > 1 and kind not in self.replays:  # a decode step, not the prefill
            self.replays[kind] = replay

    def attention(self, kind: str, query, replay) -> None:
        self._seen(kind, query.shape[-2] == 1, replay, self.attention_twin)

    def pre(self, module, args, kwargs) -> None:
        call_kwargs = dict(kwargs)
        kind = _module_kind(module)
        fresh = kind not in self.replays
        self._seen(kind, True, lambda: module(*args, **call_kwargs), getattr(module, "replaces", None))
        if fresh and kind in self.replays:
            self.resets[kind] = _cache_reset(slower_kernels.layer_cache(call_kwargs.get("cache"),
                                                                 call_kwargs.get("past_key_values")))
        self.depth += 1

    def post(self, module, args, output) -> None:
        self.depth -= 1


def _cache_reset(cache):
    """A function putting ``cache`` (a transformers cache, or None) back to its state now; None if there is nothing
    to put back. Its layers' keys and values are replaced on every update, never written in place, so holding
    on to the tensors it has now keeps the state it has now."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return None
    saved = [(layer, layer.keys, layer.values) for layer in layers if hasattr(layer, "keys")]

    def reset():
        for layer, keys, values in saved:
            layer.keys, layer.values = keys, values

    return reset


def capture_module_calls(model, ids: torch.Tensor, new_tokens: int, use_cache: bool = True,
                         kinds=None, original_attention: str = "sdpa") -> dict:
    """kind -> ``ModuleCall``: one captured decode-step call of each kind of module, with its calls per token.

    Ours (``kinds`` None; call inside a ``patched`` block): every kind of module of ours that a decoded token
    calls from outside another of ours (a ``FastDecoderLayer``, not the ``GemvLinear`` inside it), and the
    attention function where transformers calls it; each call's ``twin`` names the original's kind it
    replaced (``original_attention``, the model's own attention implementation, ``load_model``'s "sdpa" unless
    given, names the attention function's).
    The original's (``kinds``: names such as "Linear", "Qwen3RMSNorm", "attention (sdpa)"; call on the
    unpatched model): every call of those kinds, each counted on its own, inside one another or not (a
    ``Qwen3MLP`` call and the three ``Linear`` calls inside it), so that each can be priced against the
    module of ours that replaces it.

    Calls per token come from a ``new_tokens``-token generation minus a 1-token one (prefill excluded);
    each kind's replay is its first call of a decode step, made again with the same arguments under
    ``torch.inference_mode``. A replay of a block that appends to the KV cache (a decoder layer) appends one
    more position to the captured cache (the captured generation's own); its ``reset`` puts the cache back
    as it was at the captured call, so that replays start from the keys the decode step saw (more keys can
    change the kernels: the decode attention splits long ones). Kinds are counted by the module's class, so
    two shapes of one class (q_norm and the layer norm) share one price, the first one met."""
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if new_tokens < 2:
        raise ValueError(f"new_tokens must be at least 2 (one decoded token past the prefill), got {new_tokens}")
    twin_mode = kinds is not None
    kinds = set(kinds or ())
    impl = model.config._attn_implementation
    attention_kind = _attention_kind(impl)
    wrapped = None
    if twin_mode and attention_kind in kinds:  # the model's own attention function, seen where transformers calls it
        if impl not in ALL_ATTENTION_FUNCTIONS:  # refused before any hook is in place
            raise ValueError(f"kinds: {attention_kind!r} is not a registered attention function; capture it with "
                             "a model that uses one (load_model() uses 'sdpa')")
        wrapped = ALL_ATTENTION_FUNCTIONS[impl]
    capture = _Capture(nested=twin_mode, attention_twin=None if twin_mode else _attention_kind(original_attention))
    mods = [m for m in model.modules() if (_module_kind(m) in kinds and not _is_ours(m) if twin_mode else _is_ours(m))]
    hooks = [m.register_forward_pre_hook(capture.pre, with_kwargs=True) for m in mods]
    hooks += [m.register_forward_hook(capture.post) for m in mods]

    def forward(_module, _args):
        capture.forwards += 1

    hooks.append(model.register_forward_pre_hook(forward))
    if wrapped is not None:
        def entry(module, query, key, value, attention_mask, **kwargs):
            capture.attention(attention_kind, query, lambda: wrapped(module, query, key, value, attention_mask, **kwargs))
            return wrapped(module, query, key, value, attention_mask, **kwargs)

        AttentionInterface.register(impl, entry)
    elif not twin_mode:
        _CAPTURES.append(capture)
    counts = []
    try:
        for n in (new_tokens, 1):
            capture.counts, capture.forwards, capture.counting = {}, 0, True
            generate(model, ids, n, use_cache)
            capture.counting = False
            counts.append(capture.counts)
    finally:
        if wrapped is not None:
            AttentionInterface.register(impl, wrapped)
        if capture in _CAPTURES:
            _CAPTURES.remove(capture)
        for h in hooks:
            h.remove()
    many, one = counts

    def in_inference(replay):
        def call():
            with torch.inference_mode():
                return replay()
        return call

    out = {}
    for kind, n in many.items():
        per_token = (n - one.get(kind, 0)) / (new_tokens - 1)
        if per_token > 0 and kind in capture.replays:
            out[kind] = ModuleCall(kind, per_token, in_inference(capture.replays[kind]),
                                   reset=capture.resets.get(kind), twin=capture.twins.get(kind))
    return out


def count_module_calls(calls: dict) -> None:
    """Fill each ``ModuleCall``'s kernels per call (torch.profiler, on a GPU) and our launches per call."""
    _profiled("count_module_calls")
    for call in calls.values():
        reset = call.reset or (lambda: None)
        reset()
        call.replay()
        _sync()
        reset()
        with slower_kernels.count_launches() as counted:
            call.replay()
        call.ours = float(sum(counted.values()))
        reset()
        call.kernels = float(_kernel_stats(call.replay)[0]) if HAS_GPU else None
        reset()


@dataclass
class LaunchPrices:
    """Host time of one launch that does no work: what every kernel costs before it runs."""
    triton_us: float  # an empty Triton kernel (slower_kernels.empty): our launcher's Python and Triton's dispatch
    torch_us: float   # a one-element PyTorch op (x.add_(1)): PyTorch's dispatcher and the CUDA launch
    calls: int        # launches per synchronised loop

    @property
    def clock(self) -> str:
        return CLOCK_LABELS["host" if HAS_GPU else "interpreter"]


def launch_prices(calls: int | None = None) -> LaunchPrices:
    """The price of one launch on this host: an empty Triton kernel against a one-element PyTorch op."""
    _host_clock_free("launch_prices")
    calls = calls or (3000 if HAS_GPU else 5)
    x = torch.zeros(1, device=DEVICE, dtype=DTYPE)
    triton_ms = host_ms_per_call(lambda: slower_kernels.empty(x), calls)
    torch_ms = host_ms_per_call(lambda: x.add_(1), calls)
    return LaunchPrices(triton_ms * 1e3, torch_ms * 1e3, calls)


# --- A decode step without the host: a static KV cache and one CUDA graph per step -------------
class GraphDecoder:
    """Greedy generation with a static KV cache, one whole decode step replayed from a CUDA graph.

    Eager ``generate()`` launches every kernel of a decode step from Python, ~1,650 of them per token for
    Qwen3-0.6B; here the step is captured once (``torch.cuda.graph``) and each token costs one graph
    launch. The step is self-contained on the GPU: it reads the current token and position from static
    tensors, writes the next token into the output buffer at its index, and advances both, so no value
    goes back to the host until the end. The prefill runs eagerly (its length varies).

    transformers' ``StaticCache`` keeps its own write position per layer (``cumulative_length``, a GPU
    tensor advanced by every ``update``), so warm-up and capture advance it too: ``generate`` resets the
    cache before each generation. ``max_len`` bounds prompt + new tokens (past it the cache's
    ``index_copy_`` fails on the GPU). Without a GPU the same step runs eagerly (``graphed`` is False):
    the tokens are the same, the speed is not the point there.
    """

    def __init__(self, model, max_len: int, use_graph: bool | None = None):
        from transformers import StaticCache

        if not isinstance(max_len, int) or max_len < 2:
            raise ValueError(f"max_len must be an int >= 2 (prompt + new tokens), got {max_len!r}")
        self.model, self.max_len = model, max_len
        self.graphed = HAS_GPU if use_graph is None else bool(use_graph)
        if self.graphed and not HAS_GPU:
            raise ValueError("use_graph=True needs a CUDA GPU; CPU mode runs the decode step eagerly")
        device = next(model.parameters()).device
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)     # the token the step reads
        self.position = torch.zeros(1, 1, dtype=torch.long, device=device)  # its position in the sequence
        self.out = torch.zeros(max_len, dtype=torch.long, device=device)    # every generated token, by position
        self.graph = None

    def _step(self) -> None:
        """One decode step, entirely on the device: forward, argmax, store, advance."""
        logits = self.model(input_ids=self.token, position_ids=self.position, past_key_values=self.cache,
                            use_cache=True).logits
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
        self.position.add_(1)
        self.out.index_copy_(0, self.position[0], nxt[0])
        self.token.copy_(nxt)

    def _prefill(self, ids: torch.Tensor) -> None:
        """Reset the cache, run the prompt eagerly, and leave its next token and position in place."""
        self.cache.reset()
        p = ids.shape[1]
        logits = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True).logits
        self.token.copy_(logits[:, -1].argmax(dim=-1, keepdim=True))
        self.position.fill_(p)
        self.out.zero_()
        self.out[p] = self.token[0, 0]

    def _capture(self, ids: torch.Tensor) -> None:
        """Warm up on a side stream (as torch.cuda.graphs asks), then capture one step."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    @torch.inference_mode()
    def generate(self, ids: torch.Tensor, new_tokens: int) -> tuple[torch.Tensor, float]:
        """Greedy: exactly ``new_tokens`` new ids (1-D, on the CPU) and the wall seconds it took (prefill
        included, capture excluded: the first call captures the step before its timed part)."""
        if ids.dim() != 2 or ids.shape[0] != 1:
            raise ValueError(f"ids must be [1, prompt_len] (batch size 1), got shape {tuple(ids.shape)}")
        p = ids.shape[1]
        if new_tokens < 1 or p + new_tokens > self.max_len:
            raise ValueError(f"new_tokens must be in [1, max_len - prompt_len] = [1, {self.max_len - p}], "
                             f"got {new_tokens}")
        if self.graphed and self.graph is None:
            self._prefill(ids)
            self._capture(ids)
        with _no_gc():
            _sync()
            start = time.perf_counter()
            self._prefill(ids)
            for _ in range(new_tokens - 1):
                if self.graphed:
                    self.graph.replay()
                else:
                    self._step()
            new = self.out[p:p + new_tokens].to("cpu", copy=True)  # read back; a copy: .cpu() aliases on a CPU
            seconds = time.perf_counter() - start
        return new, seconds


# --- Interleaved comparisons and the verdict ----------------------------------------------------
ORIGINAL, ORIGINAL_AGAIN = "original", "original (again)"  # the A/A pair: the original against itself


def _shuffled(names, r: int, seed: int) -> list:
    """Round ``r``'s order of ``names``: shuffled with a fixed seed (every run sees the same orders), and
    counterbalanced: each pair of rounds runs one shuffled order forwards, then backwards (ABBA). Over a pair
    every name sits at the same mean position, so a host that drifts steadily within a round slows no name
    more than another, and the original and its A/A copy swap places."""
    order = list(names)
    random.Random(seed * 10_007 + r // 2).shuffle(order)
    return order[::-1] if r % 2 else order


def _ratios_to(times: dict, base: str) -> dict:
    """name -> Ratio of its per-round times over ``base``'s time in the same round (``base`` left out)."""
    return {name: Ratio.of([t / b for t, b in zip(ts, times[base])]) for name, ts in times.items() if name != base}


def _record_ratio(id: str, ratio: Ratio, floor: Ratio, v: Verdict, method: str, note: str) -> Verdict:
    """Record a time ratio ("x slower") with its quartiles, its verdict and the run's A/A floor."""
    record(id, ratio.median, "x slower", (note + "; " if note else "") + f"{method}, A/A floor "
           f"{floor.median:.3f} ({floor.quartiles})", spread=ratio, verdict=v.text)
    return v


@dataclass
class Comparison:
    """Configurations of one model measured in shuffled rounds, against the original in each round."""
    tokens_per_s: dict     # name -> median tokens/s over the rounds
    seconds: dict          # name -> the per-round seconds of one generation of ``new_tokens``
    ratios: dict           # name -> Ratio of its time to the original's, round by round (ORIGINAL_AGAIN too)
    orders: list           # the order of each round
    prompt_len: int
    new_tokens: int
    first_seconds: dict = field(default_factory=dict)  # name -> per-round seconds of a 1-token generation
    counts: dict = field(default_factory=dict)  # name -> (launches, GPU-busy ms, our launches) per decoded token
    profiled_tokens: int = 0  # new tokens of each profiled generation (profile=...)
    module_calls: dict = field(default_factory=dict)  # name -> {kind: ModuleCall} (prices=...)
    module_us: dict = field(default_factory=dict)     # name -> {kind: [host µs per call alone, one per round]}

    @property
    def floor(self) -> Ratio:
        """The A/A floor of this very run: the original against itself."""
        return self.ratios[ORIGINAL_AGAIN]

    def verdict(self, name: str) -> Verdict:
        """``name`` against this run's A/A floor; the floor itself against the minimum effect alone (judged
        against itself it could never stand out, and a floor that does says the host was noisy)."""
        return verdict(self.ratios[name], None if name == ORIGINAL_AGAIN else self.floor)

    def prefill_ms(self, name: str) -> float:
        """Median wall ms of a 1-token generation (one forward pass over the prompt) in the same rounds."""
        if not self.first_seconds:
            raise ValueError("prefill_ms: this comparison generated one token per run (new_tokens=1); "
                             "its seconds are the prefill times")
        return statistics.median(self.first_seconds[name]) * 1e3

    def decode_ms(self, name: str) -> Ratio:
        """Wall ms per decoded token, prefill excluded: (N-token time - 1-token time) / (N - 1), round by round.

        The one definition of time per token in the series: both runs of a round are back to back, in the
        same shuffled rounds as the ratios, so the host's drift hits every configuration alike."""
        if not self.first_seconds:
            raise ValueError("decode_ms: needs new_tokens > 1 (a 1-token generation is all prefill)")
        steps = self.new_tokens - 1
        return Ratio.of([(t - f) * 1e3 / steps for t, f in zip(self.seconds[name], self.first_seconds[name])])

    def decode_ratio(self, name: str) -> Ratio:
        """Wall ms per decoded token of ``name`` over the original's, round by round (above 1: slower)."""
        return Ratio.of([a / b for a, b in zip(self.decode_ms(name).values, self.decode_ms(ORIGINAL).values)])

    def wall_ms_per_token(self, name: str) -> tuple[float, str]:
        """(wall ms per decoded token, how it was read): the original's median over the rounds, times
        ``name``'s median per-round ratio to it. The host's speed drifts between rounds (on the H200 by a
        quarter) and a ratio within a round cancels the drift, so every configuration is read against the
        same original."""
        base = self.decode_ms(ORIGINAL).median
        wall = base * (self.decode_ratio(name).median if name != ORIGINAL else 1.0)
        if base > 0 and wall > 0:
            return wall, f"original's median of {len(self.orders)} shuffled rounds x the per-round ratio to it"
        # timing noise larger than the decode steps (tiny models in CPU mode): the average over all steps
        return (statistics.median(self.seconds[name]) * 1e3 / self.new_tokens,
                f"decode too short to isolate: wall per token averaged over all {self.new_tokens} steps")

    def profile(self, name: str) -> DecodeProfile:
        """Launches, GPU-busy and wall ms per decoded token for ``name`` (compare_configs(profile=...));
        the wall time as ``wall_ms_per_token`` reads it."""
        if name not in self.counts:
            raise KeyError(f"profile: {name!r} was not profiled; pass profile=True (or its name) to compare_configs")
        launches, busy, ours = self.counts[name]
        wall, note = self.wall_ms_per_token(name)
        if not HAS_GPU:
            note += "; CPU mode: launches are our Triton kernels only, wall is interpreter time"
        idle = None if busy is None else max(0.0, 1 - busy / wall)
        return DecodeProfile(launches, busy, wall, idle, ours, self.profiled_tokens, note, self.module_prices(name))

    def module_prices(self, name: str) -> dict:
        """kind -> ``ModulePrice`` for ``name``'s modules of ours, or for the original the kinds of its own modules
        that ours replace (compare_configs(prices=True)); empty if unpriced."""
        out = {}
        for kind, call in self.module_calls.get(name, {}).items():
            r = Ratio.of(self.module_us[name][kind])
            out[kind] = ModulePrice(call.per_token, r.median, call.kernels, r.quartiles, call.twin)
        return out

    def record(self, name: str, id: str, note: str = "") -> Verdict:
        """Record the time ratio of ``name`` to the original under ``id`` ("x slower"), with its quartiles
        and verdict; returns the verdict."""
        return _record_ratio(id, self.ratios[name], self.floor, self.verdict(name),
                             f"median of {len(self.orders)} shuffled rounds", note)

    def table(self, per_token: bool = False):
        """One row per configuration: median tokens/s, ratio to the original with its quartiles, verdict;
        with ``per_token``, also wall ms per decoded token (``wall_ms_per_token``) and, where profiled,
        launches and GPU-busy ms."""
        import pandas as pd

        rows = []
        for name, tps in self.tokens_per_s.items():
            r = self.ratios.get(name)
            row = {"configuration": name, "tokens/s (median)": tps,
                   "time ratio to original (median)": r.median if r else 1.0,
                   "quartiles": r.quartiles if r else "-",
                   "verdict": (self.verdict(name).text if name != ORIGINAL_AGAIN else
                               f"A/A floor: {100 * abs(r.median - 1):.1f}% off 1") if r else "reference"}
            if per_token and self.first_seconds:
                row["wall ms per decoded token"] = self.wall_ms_per_token(name)[0]
                if name in self.counts:
                    p = self.profile(name)
                    row["launches per token"] = p.launches
                    row["GPU-busy ms per token"] = p.gpu_busy_ms_per_token
            rows.append(row)
        return pd.DataFrame(rows)


def compare_configs(model, configs: dict, prompt_len: int | None = None, new_tokens: int | None = None,
                    rounds: int | None = None, tokenizer=None, seed: int = 0, profile=False,
                    prices=False) -> Comparison:
    """Tokens/s of several configurations of ``model``, interleaved so that host noise hits all alike.

    ``configs`` maps a name to the keyword arguments of ``patched`` (``{}`` is the original; a key
    ``use_cache=False`` generates without the KV cache, a key ``decoder`` picks how it generates:
    ``DECODERS``, see ``decoder_for``; "graph" and "compiled" build their static cache, capture or compile
    in every run before the timed part). The original
    and its copy ``ORIGINAL_AGAIN`` are always added: their ratio is the run's A/A noise floor. Each of
    ``rounds`` rounds times one greedy generation of every configuration, in an order shuffled with a fixed
    seed and counterbalanced (``_shuffled``: each pair of rounds runs one order forwards, then backwards);
    each configuration's time is divided by the original's time of the same round. When
    ``new_tokens`` > 1, each generation is followed by a 1-token one, so that the wall time per decoded token
    (``Comparison.decode_ms``) comes from the same rounds. ``profile`` (True, or names) also counts launches
    and GPU-busy time per decoded token after the rounds (``Comparison.profile``). ``prices`` (True, or names;
    configurations that ``generate()`` eagerly) also prices their modules of ours and, in the original, the
    original's modules that those replace: the warm-up captures one decode-step call of each kind
    (``capture_module_calls``), and in every round, right after the configuration's generations, each kind's
    call is timed on its own (``host_us_alone``), so the prices see the same host as the wall times
    (``DecodeProfile.modules``, ``ModuleBudget``).
    """
    prompt_len = SIZES.prompt_len if prompt_len is None else prompt_len
    new_tokens = SIZES.new_tokens if new_tokens is None else new_tokens
    rounds = SIZES.rounds if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if new_tokens < 1:
        raise ValueError(f"new_tokens must be at least 1, got {new_tokens}")
    reserved = {ORIGINAL, ORIGINAL_AGAIN} & set(configs)
    if reserved:
        raise ValueError(f"configs: {sorted(reserved)} are added by compare_configs itself; use other names")
    every = {ORIGINAL: {}, ORIGINAL_AGAIN: {}, **configs}
    for name, kwargs in every.items():
        if not isinstance(kwargs, dict):
            raise TypeError(f"configs[{name!r}] must be a dict of patched() arguments, got {type(kwargs).__name__}")
    to_profile = [n for n in every if n != ORIGINAL_AGAIN] if profile is True else list(profile or ())
    unknown = [n for n in to_profile if n not in every]
    if unknown:
        raise ValueError(f"profile: {unknown} are not configurations here; choose from {list(every)}")
    if to_profile and new_tokens < 2:
        raise ValueError("profile: counting per decoded token needs new_tokens >= 2")
    # priced: generate() with the KV cache, as the original's modules are priced (a decode step's one-row calls)
    eager = [n for n in every
             if n not in (ORIGINAL, ORIGINAL_AGAIN) and split_config(every[n])[1:] == ("generate", True)]
    to_price = eager if prices is True else [n for n in prices or () if n != ORIGINAL]
    bad = [n for n in to_price if n not in eager]
    if bad:
        raise ValueError(f"prices: {bad} are not configurations here that generate() eagerly with the KV cache; "
                         f"choose from {eager}")
    if to_price and new_tokens < 2:
        raise ValueError("prices: counting calls per decoded token needs new_tokens >= 2")
    _host_clock_free("compare_configs")  # its rounds are wall time; its own profiles come after them
    ids = make_prompt(prompt_len, tokenizer, model.config.vocab_size)

    for name, config in every.items():  # bad decoders fail here, before any run
        _, decoder, use_cache = split_config(config)
        try:
            _check_decoder(decoder, use_cache)
        except ValueError:
            raise ValueError(f"configs[{name!r}]: decoder must be one of {DECODERS} ('compiled' on a GPU "
                             f"only, none but 'generate' without the KV cache), got {decoder!r}") from None

    def run(name, n):
        return generate_with(model, every[name], ids, n)[1]

    per_token = new_tokens > 1
    calls = {}
    own_attention = model.config._attn_implementation  # what our attention function replaces
    warmed = []  # warm-up: every shape and specialisation met once, untimed (and the calls to price captured)
    for name in every:
        if name in to_price:
            kwargs, _, use_cache = split_config(every[name])
            with patched(model, **kwargs):
                calls[name] = capture_module_calls(model, ids, new_tokens, use_cache,
                                                   original_attention=own_attention)
        elif every[name] not in warmed:  # a copy of a configuration already warmed (the A/A copy) is warm too
            run(name, new_tokens)
        warmed.append(every[name])
    twins = {c.twin for name in to_price for c in calls[name].values() if c.twin}
    if twins:  # the original's modules that ours replace, each priced the same way, in the original's rounds
        calls = {ORIGINAL: capture_module_calls(model, ids, new_tokens, kinds=twins), **calls}
    seconds = {name: [] for name in every}
    first = {name: [] for name in every} if per_token else {}
    alone = {name: {kind: [] for kind in calls[name]} for name in calls}
    orders = []
    for r in progress(range(rounds), desc="rounds"):
        order = _shuffled(every, r, seed)
        orders.append(order)
        for name in order:
            seconds[name].append(run(name, new_tokens))
            if per_token:
                first[name].append(run(name, 1))
            for kind, call in calls.get(name, {}).items():  # the same host, right after its generations
                alone[name][kind].append(host_us_alone(call.replay, reset=call.reset))
    ratios = _ratios_to(seconds, ORIGINAL)
    tps = {name: new_tokens / statistics.median(ts) for name, ts in seconds.items()}
    counts = {}
    n = max(2, min(new_tokens, SIZES.profile_tokens))  # per-token counts do not depend on how many are profiled
    for name in to_profile:
        kwargs, decoder, use_cache = split_config(every[name])
        with patched(model, **kwargs):
            # generate() is warm from the rounds; a graph decoder is built afresh here, and its first run captures
            # (the warm-up kernels of a capture would count in the n-token run and not in the 1-token one)
            counts[name] = _count_decode(model, ids, n, use_cache, decoder, warm=decoder != "generate")
    for name in calls:  # after the rounds: the profiler's bookkeeping stays out of the timed part
        count_module_calls(calls[name])
    return Comparison(tps, seconds, ratios, orders, prompt_len, new_tokens, first, counts, n if counts else 0,
                      calls, alone)


# --- Kernel against kernel, on one clock, with its own A/A floor ---------------------------------
REFERENCE, REFERENCE_AGAIN = "reference", "reference (again)"


@dataclass
class CallComparison:
    """Calls timed in shuffled rounds against a reference call and the reference against itself."""
    ms: dict        # name -> median ms per call (REFERENCE and REFERENCE_AGAIN included)
    ratios: dict    # name -> Ratio of its time to the reference's, round by round (REFERENCE_AGAIN too)
    clock: str      # CLOCK_LABELS value: GPU time on a GPU, interpreter wall time in CPU mode
    rounds: int

    @property
    def floor(self) -> Ratio:
        return self.ratios[REFERENCE_AGAIN]

    def verdict(self, name: str) -> Verdict:
        """As ``Comparison.verdict``: the floor itself is judged against the minimum effect alone."""
        return verdict(self.ratios[name], None if name == REFERENCE_AGAIN else self.floor)

    def record(self, name: str, id: str, note: str = "") -> Verdict:
        return _record_ratio(id, self.ratios[name], self.floor, self.verdict(name),
                             f"{self.clock}, median of {self.rounds} shuffled rounds", note)


CALL_CLOCKS = ("gpu", "host")  # compare_calls' clocks: CUDA-graph replay, or host time per call


def compare_calls(calls: dict, reference, rounds: int | None = None, seed: int = 0,
                  clock: str = "gpu", after_profile: bool = False) -> CallComparison:
    """Time each call in ``calls`` against ``reference``, in shuffled rounds, on one clock.

    Like ``compare_configs`` for kernels: every round times each call, the reference and the reference
    again (the A/A floor: what a ~2 µs kernel's GPU time does between two replays of the same graph) in a
    shuffled order. ``clock`` "gpu": GPU time (``ms_per_call``: CUDA-graph replay); "host": host time per
    call (``host_ms_per_call``: back to back, synchronised), the price of issuing the call. In CPU mode
    either clock is the interpreter's wall time. The host clock refuses to run once the process has
    profiled (``_host_clock_free``) unless ``after_profile`` says that is known (an exercise at a chapter's
    end, comparing calls that launch alike): its clock label then says that CUPTI was attached.
    """
    rounds = SIZES.rounds_kernel if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if clock not in CALL_CLOCKS:
        raise ValueError(f"clock must be one of {CALL_CLOCKS}, got {clock!r}")
    reserved = {REFERENCE, REFERENCE_AGAIN} & set(calls)
    if reserved or not calls:
        raise ValueError(f"calls: give at least one call, none named {sorted({REFERENCE, REFERENCE_AGAIN})}")
    every = {REFERENCE: reference, REFERENCE_AGAIN: reference, **calls}
    for name, fn in every.items():
        if not callable(fn):
            raise TypeError(f"calls[{name!r}] must be a zero-argument callable, got {type(fn).__name__}")
    attached = clock == "host" and HAS_GPU and bool(PROFILED_BY) and after_profile
    if clock == "host" and not after_profile:
        _host_clock_free("compare_calls(clock='host')")
    time_one = ms_per_call if clock == "gpu" else _loop_ms
    label = CLOCK_LABELS[clock if HAS_GPU else "interpreter"] + (", after a profile (CUPTI attached)" if attached else "")
    times = {name: [] for name in every}
    for r in range(rounds):
        for name in _shuffled(every, r, seed):
            times[name].append(time_one(every[name]))
    ratios = _ratios_to(times, REFERENCE)
    return CallComparison({name: statistics.median(ts) for name, ts in times.items()}, ratios, label, rounds)


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
    import torch.nn.functional as F
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(*shape, generator=g).to(DEVICE, DTYPE)

    x, y = rand(SIZES.add_n), rand(SIZES.add_n)
    rows = rand(SIZES.rmsnorm_rows, SIZES.rmsnorm_hidden)
    norm = Qwen3RMSNorm(SIZES.rmsnorm_hidden, eps=1e-6).to(DEVICE, DTYPE)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(SIZES.rmsnorm_hidden, generator=g))
    M, K, N = SIZES.matmul_shape
    a, w = rand(M, K), rand(N, K)
    s = SIZES.attention_blog_shape
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
    import pandas as pd

    known = [*KERNEL_RATIO_IDS, *REPRODUCE_CONFIGS]
    ids = list(ids) if ids is not None else known
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"ids: {unknown} cannot be reproduced; choose from {known}")
    timed = [i for i in ids if i in KERNEL_RATIO_IDS]
    if timed:
        _before_any_profile(f"reproduce times the kernel ratios {timed} in GPU time",
                            "tools/reproduce.py times them before any profile, and so must a re-measure set beside "
                            "it: on the H200, chapter 8's re-measure after its profiled comparison read the per-head "
                            "attention's GPU-time ratio 6-17% above chapter 5's and reproduce's in three runs.")
    cases = _kernel_ratio_cases() if timed else {}
    committed = committed or COMMITTED_DIR / SLUG / "results.csv"
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
                n = rounds if rounds is not None else SIZES.rounds_small if key in SMALL_EFFECTS else SIZES.rounds
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


