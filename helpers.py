"""The experiment harness every chapter imports.

It answers the questions each chapter asks, the same way every time:

* where am I running (``MODE``, ``SLUG``, ``show_env``) and how big should things be (``SIZES``);
* which model (``load_model``: the hub checkpoint, or the same architecture with random weights);
* how fast does it generate (``measure_tps``) and where does the time go (``profile_decode``);
* what happens when our kernels replace PyTorch's (``patched``);
* what did we measure, and what did the blog measure (``record``, ``compare``).

Imports point one way: notebooks import ``helpers`` and ``kernels``; ``helpers`` imports ``kernels``.
"""
from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent

# --- Mode -------------------------------------------------------------------------------------
# SLOWER_MODE=quick: small sizes on a GPU (e.g. nbmake on a GPU CI runner).
# SLOWER_MODE=cpu: force the interpreter even where a GPU exists.
_FORCED = os.environ.get("SLOWER_MODE", "").strip().lower()
if _FORCED not in ("", "full", "quick", "cpu"):
    raise ValueError(f"SLOWER_MODE must be 'full', 'quick' or 'cpu', got {_FORCED!r}")
HAS_GPU = torch.cuda.is_available() and _FORCED != "cpu"
if not HAS_GPU:  # must happen before any @triton.jit function is defined
    os.environ.setdefault("TRITON_INTERPRET", "1")
MODE = "cpu" if not HAS_GPU else ("quick" if _FORCED == "quick" else "full")

import kernels  # noqa: E402  (after TRITON_INTERPRET is settled)

DEVICE = torch.device("cuda" if HAS_GPU else "cpu")
DTYPE = torch.float16 if HAS_GPU else torch.float32  # a T4 has no bf16; the interpreter prefers fp32

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


def tolerance(kind: str, dtype: torch.dtype = DTYPE) -> float:
    """The chapters' tolerance of ``kind`` (a key of ``TOLERANCE``) for ``dtype``."""
    return TOLERANCE[kind][dtype]


IN_NOTEBOOK = "ipykernel" in sys.modules
if not IN_NOTEBOOK:
    import matplotlib

    matplotlib.use("Agg")  # scripts and nbmake-less runs never open windows


def _gpu_name() -> str:
    return torch.cuda.get_device_name(0) if HAS_GPU else "cpu"


def hardware_slug(gpu_name: str | None = None) -> str:
    """'Tesla T4' -> 't4', 'NVIDIA H200' -> 'h200', 'NVIDIA A100-SXM4-80GB' -> 'a100'; no GPU -> 'cpu'."""
    name = (gpu_name if gpu_name is not None else _gpu_name()).lower()
    if name == "cpu":
        return "cpu"
    for known in ("h200", "h100", "gh200", "a100", "a10g", "a10", "l40s", "l4", "t4", "v100", "p100"):
        if re.search(rf"\b{known}\b", name.replace("-", " ")):
            return known
    name = re.sub(r"^(nvidia|tesla|geforce)\s+", "", name).replace("geforce ", "")
    return re.sub(r"[^a-z0-9]+", "", name) or "gpu"


SLUG = hardware_slug()
RESULTS_DIR = ROOT / "figures" / (SLUG if MODE == "full" else "cpu" if MODE == "cpu" else f"{SLUG}-quick")

# Nominal memory bandwidth in GB/s (vendor datasheets), for the weight-read floor.
NOMINAL_GB_S = {"t4": 320, "l4": 300, "a10": 600, "a10g": 600, "v100": 900, "p100": 732, "a100": 1555,
                "l40s": 864, "h100": 3350, "gh200": 4000, "h200": 4800}


# --- Sizes: the one table -----------------------------------------------------------------------
@dataclass(frozen=True)
class Sizes:
    """Every size a chapter uses, per mode. Chapters read these; they never invent their own."""
    prompt_len: int            # tokens in the prompt for tokens/s runs
    new_tokens: int            # tokens generated per tokens/s run
    new_tokens_full_stack: int  # chapter 6
    new_tokens_context: int    # chapter 7
    context_prompts: tuple     # chapter 7's prompt lengths
    repeats: int               # timed generations per measurement (the median is reported)
    profile_tokens: int        # decode steps under torch.profiler (its bookkeeping is slow)
    add_n: int                 # elements for the headline add timing
    add_sweep: tuple           # element counts for the add sweep
    rmsnorm_hidden: int
    rmsnorm_rows: int          # the "prefill-like" RMSNorm shape
    rmsnorm_decode_rows: int   # the decode shape
    rmsnorm_sweep_rows: tuple
    matmul_shape: tuple        # (M, K, N): x[M, K] @ W[N, K]^T
    matmul_decode_shape: tuple
    attention_blog_shape: dict = field(default_factory=dict)
    attention_qwen_shape: dict = field(default_factory=dict)


SIZES_BY_MODE = {
    "full": Sizes(
        prompt_len=32, new_tokens=128, new_tokens_full_stack=512, new_tokens_context=32,
        context_prompts=(128, 256, 512, 1024), repeats=3, profile_tokens=16,
        add_n=2**20, add_sweep=tuple(2**k for k in range(12, 27, 2)),
        rmsnorm_hidden=1024, rmsnorm_rows=512, rmsnorm_decode_rows=1,
        rmsnorm_sweep_rows=(1, 4, 16, 64, 256, 1024, 4096),
        matmul_shape=(128, 1024, 3072), matmul_decode_shape=(1, 1024, 3072),
        attention_blog_shape=dict(B=1, Hq=16, Hkv=16, S=1, T=512, D=64),
        attention_qwen_shape=dict(B=1, Hq=16, Hkv=8, S=1, T=512, D=128)),
    "quick": Sizes(
        prompt_len=16, new_tokens=16, new_tokens_full_stack=32, new_tokens_context=8,
        context_prompts=(64, 128), repeats=2, profile_tokens=4,
        add_n=2**16, add_sweep=tuple(2**k for k in range(12, 21, 4)),
        rmsnorm_hidden=1024, rmsnorm_rows=64, rmsnorm_decode_rows=1, rmsnorm_sweep_rows=(1, 16, 256),
        matmul_shape=(64, 1024, 1024), matmul_decode_shape=(1, 1024, 1024),
        attention_blog_shape=dict(B=1, Hq=16, Hkv=16, S=1, T=128, D=64),
        attention_qwen_shape=dict(B=1, Hq=16, Hkv=8, S=1, T=128, D=128)),
    "cpu": Sizes(
        prompt_len=16, new_tokens=8, new_tokens_full_stack=12, new_tokens_context=4,
        context_prompts=(16, 32), repeats=1, profile_tokens=4,
        add_n=2**12, add_sweep=(2**8, 2**10, 2**12, 2**14),
        rmsnorm_hidden=64, rmsnorm_rows=16, rmsnorm_decode_rows=1, rmsnorm_sweep_rows=(1, 4, 16, 64),
        matmul_shape=(16, 64, 128), matmul_decode_shape=(1, 64, 128),
        attention_blog_shape=dict(B=1, Hq=4, Hkv=4, S=1, T=32, D=16),
        attention_qwen_shape=dict(B=1, Hq=4, Hkv=2, S=1, T=32, D=16)),
}
SIZES = SIZES_BY_MODE[MODE]

# Qwen3-0.6B's exact architecture (its config.json on the hub), and the tiny CPU stand-in.
QWEN3_0_6B = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
                  tie_word_embeddings=True, hidden_act="silu", attention_bias=False,
                  bos_token_id=151643, eos_token_id=151645)
TINY_QWEN3 = dict(QWEN3_0_6B, vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                  bos_token_id=None, eos_token_id=None)


# --- Environment --------------------------------------------------------------------------------
def env_info() -> dict:
    """Hardware, mode and library versions: recorded beside every number."""
    import transformers
    import triton

    info = {"gpu": _gpu_name(), "slug": SLUG, "mode": MODE}
    if HAS_GPU:
        props = torch.cuda.get_device_properties(0)
        info.update(compute_capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda)
    else:
        info.update(compute_capability="-", memory_gib="-", cuda="-")
    info.update(python=platform.python_version(), torch=torch.__version__, triton=triton.__version__,
                transformers=transformers.__version__)
    return info


def timing_note() -> str:
    """How to read this run's timings."""
    if MODE == "cpu":
        return ("CPU mode: kernels run in Triton's interpreter (numpy), on a tiny model with small sizes. "
                "Timings are interpreter wall-clock times: good for following the method, not for GPU conclusions.")
    if MODE == "quick":
        return "Quick mode: real GPU timings at reduced sizes; the numbers are not comparable to full runs."
    return f"Full mode on {_gpu_name()}: GPU timings at the sizes the chapters were designed for."


def show_env() -> None:
    """Print where this run happens (hardware, mode, versions) and how to read its timings."""
    print(" | ".join(f"{k}: {v}" for k, v in env_info().items()))
    md(f"**{timing_note()}**" if MODE == "cpu" else timing_note())


# --- Presentation -------------------------------------------------------------------------------
def versus(a: float, b: float) -> str:
    """How time ``a`` compares with time ``b``: '1.23x slower', '12x faster', whichever way it went."""
    r = a / b if a > b else b / a
    return (f"{r:.0f}x" if r >= 10 else f"{r:.2f}x") + (" slower" if a > b else " faster")


def fmt(value, digits: int = 3, unit: str = "") -> str:
    """A number for a table or a line of text, or ``n/a (CPU)`` where this machine cannot measure it."""
    if value is None:
        return "n/a (CPU)"
    return f"{value:.{digits}f}" + (f" {unit}" if unit else "")


def launch_note(per: str = "decoded token") -> str:
    """What a launch count in results.csv counts: every CUDA kernel on a GPU, our own kernels in CPU mode."""
    if HAS_GPU:
        return f"every CUDA kernel per {per} (torch.profiler)"
    return f"CPU mode: our Triton kernels per {per} only (no CUDA kernels to count)"


def md(text: str) -> None:
    """Markdown in a notebook, plain text elsewhere."""
    if IN_NOTEBOOK:
        from IPython.display import Markdown, display

        display(Markdown(text))
    else:
        print(text)


def show(df) -> None:
    """A table, every row and column of it (pandas would elide the middle of a long one)."""
    import pandas as pd

    if IN_NOTEBOOK:
        from IPython.display import display

        with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.width", 200):
            display(df)
    else:
        print(df.to_string())


def progress(iterable, desc: str = "", **kwargs):
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, **kwargs)


def save_figure(fig, name: str) -> Path:
    """Save to RESULTS_DIR/<name>.png: the same file name on every run."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def save_sweep(df, name: str) -> Path:
    """Save a sweep's table as RESULTS_DIR/<name>.csv, beside its figure."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.csv"
    df.to_csv(path, index=False)
    return path


# --- Model --------------------------------------------------------------------------------------
_MODEL_DESC = "no model loaded"


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
    global _MODEL_DESC
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
        _MODEL_DESC = f"{name_or_path} ({'local checkpoint' if local else 'hub weights'}, {str(DTYPE)[6:]})"
        return model, tokenizer, _MODEL_DESC
    if MODE == "cpu":
        model = random_qwen3(TINY_QWEN3)
        _MODEL_DESC = "tiny Qwen3 (CPU mode: 2 layers, hidden 64, random weights)"
        return model, None, _MODEL_DESC
    model = random_qwen3(QWEN3_0_6B)
    _MODEL_DESC = f"Qwen3-0.6B architecture, seeded random weights ({str(DTYPE)[6:]}; hub unreachable)"
    md(f"**Notice:** the model hub could not be reached, so `{name_or_path}` was built from its exact "
       "configuration with seeded random weights. Timings are real (they depend on shapes, not values); "
       "generated text is meaningless.")
    return model, None, _MODEL_DESC


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


def _generate(model, ids: torch.Tensor, new_tokens: int, use_cache: bool = True):
    """Greedy, exactly ``new_tokens`` new tokens; returns (new ids, seconds)."""
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              use_cache=use_cache, pad_token_id=model.config.eos_token_id or 0)
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


@dataclass
class TPS:
    """One tokens/s measurement (medians over ``repeats`` timed runs, after a warm-up)."""
    tokens_per_s: float         # new tokens / total time
    prefill_ms: float           # time to the first token (a 1-token generation)
    decode_tokens_per_s: float  # (new - 1) / (total - prefill)
    spread_pct: float           # (max - min) / median of the total times, in percent
    ids: torch.Tensor           # the generated tokens (1-D)
    times_s: list               # each timed run's total seconds
    prompt_len: int
    new_tokens: int


def measure_tps(model, prompt_len: int, new_tokens: int, tokenizer=None, use_cache: bool = True,
                repeats: int | None = None) -> TPS:
    """Tokens per second of greedy generation, measured properly: warm-up, synchronised, median."""
    repeats = repeats or SIZES.repeats
    ids = make_prompt(prompt_len, tokenizer, model.config.vocab_size)
    # Warm-up: one untimed generation of the same length, so that every shape the timed runs meet
    # (each KV-cache length, each Triton specialisation) has been met once, and paid for, before timing.
    # With a 32-token warm-up instead, the first timed 128-token run of a freshly loaded model took about
    # twice as long as the runs after it on the H200.
    _generate(model, ids, new_tokens, use_cache)
    prefill_s = statistics.median(_generate(model, ids, 1, use_cache)[1] for _ in range(repeats))
    runs = [_generate(model, ids, new_tokens, use_cache) for _ in range(repeats)]
    times = [s for _, s in runs]
    total = statistics.median(times)
    decode_s = max(total - prefill_s, 1e-9)
    return TPS(tokens_per_s=new_tokens / total, prefill_ms=prefill_s * 1e3,
               decode_tokens_per_s=(new_tokens - 1) / decode_s if new_tokens > 1 else float("nan"),
               spread_pct=100 * (max(times) - min(times)) / total, ids=runs[0][0].cpu(), times_s=times,
               prompt_len=prompt_len, new_tokens=new_tokens)


# --- Patching -----------------------------------------------------------------------------------
ATTENTION_NAME = "slower_triton_slow"  # our entry in transformers' AttentionInterface
PROJECTION_GROUPS = ("attention", "mlp", "lm_head")
# Every swap at once: the fully custom model of chapters 6 to 8 (``patched(model, **ALL_CUSTOM)``).
ALL_CUSTOM = dict(rmsnorm="two_pass", projections=set(PROJECTION_GROUPS), attention="slow")


def _slow_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: q [B, Hq, S, D], k/v [B, Hkv, T, D] -> ([B, S, Hq, D], None).

    With sdpa-style masks, ``attention_mask`` is None whenever plain causality suffices (an unpadded
    prefill, or decode): causality is then ours to apply. Otherwise the boolean mask is honoured.
    """
    if attention_mask is not None:
        attention_mask = attention_mask[..., : key.shape[-2]]
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    out = kernels.attention_slow(query, key, value, scale=scale, causal=attention_mask is None,
                                 attn_mask=attention_mask)
    return out.transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION_NAME, _slow_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION_NAME, sdpa_mask)  # same masks as "sdpa"


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
            tile: "kernels.TileConfig" = kernels.DEFAULT_TILE):
    """Swap the model's modules for the Triton ones inside a ``with`` block; restore them on exit.

    rmsnorm: None, "fused" or "two_pass" -- every ``*RMSNorm`` (q_norm and k_norm included).
    projections: any subset of {"attention", "mlp", "lm_head"} -- those ``nn.Linear``s use ``kernels.matmul``.
    attention: None or "slow" -- the attention computation goes through ``kernels.attention_slow``.
    Yields the counts replaced. Weights are shared, never copied; on exit the original module objects
    and attention implementation are back, so outputs are bit-identical to before.
    """
    if rmsnorm not in (None, "fused", "two_pass"):
        raise ValueError(f"rmsnorm must be None, 'fused' or 'two_pass', got {rmsnorm!r}")
    projections = set(projections or ())
    if not projections <= set(PROJECTION_GROUPS):
        raise ValueError(f"projections must be a subset of {PROJECTION_GROUPS}, got {sorted(projections)}")
    if attention not in (None, "slow"):
        raise ValueError(f"attention must be None or 'slow', got {attention!r}")

    counts = {"rmsnorm": 0, "attention_proj": 0, "mlp_proj": 0, "lm_head": 0, "attention": 0}
    swapped = []  # (parent, name, original module), undone in reverse order
    original_attn = model.config._attn_implementation
    try:
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                new = None
                if rmsnorm and type(child).__name__.endswith("RMSNorm"):
                    new, key = kernels.TritonRMSNorm.from_hf(child, mode=rmsnorm), "rmsnorm"
                elif isinstance(child, torch.nn.Linear):
                    group = _projection_group(parent, name)
                    if group in projections:
                        new = kernels.TritonLinear.from_linear(child, tile=tile)
                        key = {"attention": "attention_proj", "mlp": "mlp_proj", "lm_head": "lm_head"}[group]
                if new is not None:
                    setattr(parent, name, new)
                    swapped.append((parent, name, child))
                    counts[key] += 1
        if attention:
            _register_attention()
            model.set_attn_implementation(ATTENTION_NAME)
            counts["attention"] = sum(type(m).__name__.endswith("Attention") for m in model.modules())
        yield counts
    finally:
        if model.config._attn_implementation != original_attn:
            model.set_attn_implementation(original_attn)
        for parent, name, child in reversed(swapped):
            setattr(parent, name, child)


# --- Where the time goes ------------------------------------------------------------------------
@dataclass
class DecodeProfile:
    """Per decoded token, prefill excluded (difference of an N-token and a 1-token generation)."""
    launches_per_token: float | None      # every CUDA kernel (GPU only)
    gpu_busy_ms_per_token: float | None   # summed kernel durations (GPU only)
    wall_ms_per_token: float
    gpu_idle_fraction: float | None       # 1 - busy / wall
    project_launches_per_token: float     # our Triton kernels only (any target)
    tokens_profiled: int
    note: str = ""

    @property
    def launches(self) -> float:
        """Every CUDA kernel per token on a GPU; our own kernels only, where no GPU was profiled."""
        return self.launches_per_token if self.launches_per_token is not None else self.project_launches_per_token


def _device_kernels(prof) -> list:
    """The device-side kernel events of a torch.profiler run (copies and memsets left out)."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset")):
            out.append(e)
    return out


def _kernel_stats(fn) -> tuple[int, float]:
    """(kernels launched, summed GPU ms) while ``fn`` runs, from torch.profiler's CUDA activity."""
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": expected here
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:  # device activity only: cheap bookkeeping
            fn()
            _sync()
    events = _device_kernels(prof)
    return len(events), sum(e.time_range.elapsed_us() for e in events) / 1e3


def profile_decode(model, prompt_len: int, new_tokens: int | None = None, tokenizer=None) -> DecodeProfile:
    """Launches, GPU-busy time and wall time per decoded token.

    Profiles at most ``SIZES.profile_tokens`` decode steps: the profiler's bookkeeping costs seconds per
    hundred thousand kernels, and per-token counts do not depend on how many tokens are profiled.
    """
    n = max(2, min(new_tokens or SIZES.profile_tokens, SIZES.profile_tokens))
    ids = make_prompt(prompt_len, tokenizer, model.config.vocab_size)
    _generate(model, ids, n)  # warm-up
    steps = n - 1
    wall = [statistics.median(_generate(model, ids, k)[1] for _ in range(3)) for k in (n, 1)]
    wall_ms = (wall[0] - wall[1]) * 1e3 / steps
    note = ""
    if wall_ms <= 0:  # timing noise larger than the decode steps (tiny models): fall back to the average
        wall_ms, note = wall[0] * 1e3 / n, "wall time per token averaged over all steps (decode too short to isolate); "
    project = []
    for k in (n, 1):
        with kernels.count_launches() as c:
            _generate(model, ids, k)
        project.append(sum(c.values()))
    project_per_token = (project[0] - project[1]) / steps
    if not HAS_GPU:
        return DecodeProfile(None, None, wall_ms, None, project_per_token, n,
                             note + "CPU mode: no GPU activity to profile; project-kernel launches come from "
                             "kernels.count_launches and wall time is interpreter time.")
    (ln, gn), (l1, g1) = (_kernel_stats(lambda k=k: _generate(model, ids, k)) for k in (n, 1))
    busy = (gn - g1) / steps
    return DecodeProfile((ln - l1) / steps, busy, wall_ms, max(0.0, 1 - busy / wall_ms),
                         project_per_token, n, note + f"decode steps profiled: {steps}")


@dataclass
class CallProfile:
    launches: float | None          # CUDA kernels per call (GPU only)
    project_launches: float         # our Triton kernels per call
    gpu_busy_ms: float | None       # summed kernel time per call (GPU only)
    wall_ms: float                  # host wall-clock per call, synchronised


def profile_call(fn, repeats: int = 5) -> CallProfile:
    """Launches, GPU-busy time and wall time of one call of ``fn`` (averaged over ``repeats``)."""
    fn()  # warm-up
    _sync()
    with kernels.count_launches() as c:
        fn()
    project = sum(c.values())
    walls = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        fn()
        _sync()
        walls.append(time.perf_counter() - start)
    wall_ms = statistics.median(walls) * 1e3
    if not HAS_GPU:
        return CallProfile(None, project, None, wall_ms)

    def run():
        for _ in range(repeats):
            fn()

    launches, busy = _kernel_stats(run)
    return CallProfile(launches / repeats, project, busy / repeats, wall_ms)


def bench_ms(fn, **kwargs) -> float:
    """Median milliseconds per call: ``triton.testing.do_bench`` on a GPU; wall-clock in the interpreter."""
    if HAS_GPU:
        import triton

        return triton.testing.do_bench(fn, return_mode="median", **kwargs)
    fn()  # warm-up
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


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


# --- Results ------------------------------------------------------------------------------------
RESULT_COLUMNS = ["id", "value", "unit", "note", "slug", "mode", "model", "gpu", "python", "torch", "triton",
                  "transformers", "time"]


def results_path(slug_dir: Path | None = None) -> Path:
    return (slug_dir or RESULTS_DIR) / "results.csv"


def results(path: Path | None = None):
    """This run's results table (or another one's, given its path): one row per id."""
    import pandas as pd

    path = Path(path) if path else results_path()
    if not path.exists():
        return pd.DataFrame(columns=RESULT_COLUMNS)
    return pd.read_csv(path, dtype={"id": str, "unit": str, "note": str}, keep_default_na=False,
                       na_values={"value": [""]})


def record(id: str, value, unit: str, note: str = "") -> None:
    """Store one measurement under ``id`` (a newer measurement replaces the older)."""
    import pandas as pd

    info = env_info()
    value = float("nan") if value is None else float(value)
    row = {"id": id, "value": value, "unit": unit, "note": note, "slug": SLUG, "mode": MODE,
           "model": _MODEL_DESC, "gpu": info["gpu"], "python": info["python"], "torch": info["torch"],
           "triton": info["triton"], "transformers": info["transformers"],
           "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with _locked(RESULTS_DIR / ".results.lock"):  # chapters may run side by side on two GPUs
        table = results()
        table = table[table["id"] != id]
        table = pd.concat([table, pd.DataFrame([row])], ignore_index=True) if len(table) else pd.DataFrame([row])
        write_csv_atomically(table[RESULT_COLUMNS], results_path())


def write_csv_atomically(df, path: Path) -> None:
    """Write ``df`` to ``path`` through a temporary file and a rename, so that a reader in another
    process (chapters may run side by side on two GPUs) sees the old table or the new one, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


@contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` where the OS offers one (POSIX); a no-op elsewhere."""
    try:
        import fcntl
    except ImportError:  # Windows: one process at a time is the user's job
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def blog_numbers():
    """The blog's T4 figures by result id (copied once from the post; blanks where it gives none)."""
    import pandas as pd

    return pd.read_csv(ROOT / "data" / "blog_numbers.csv", dtype=str, keep_default_na=False, comment="#")


def blog(id: str):
    """The blog's T4 figure for ``id``: a float, the post's text where it is a range, None where it gives none."""
    value = blog_numbers().set_index("id").loc[id, "blog_value"]
    if value == "":
        return None
    try:
        return float(value)
    except ValueError:
        return value


def compare(ids=None):
    """Your value, the committed H200 value and the blog's T4 value, side by side.

    ``ids``: None (everything measured or quoted), a prefix such as ``"rmsnorm."``, or a list of ids.
    """
    yours = results()[["id", "value", "unit"]].rename(columns={"value": "yours"})
    h200 = results(ROOT / "figures" / "h200" / "results.csv")[["id", "value", "unit"]].rename(
        columns={"value": "h200", "unit": "h200_unit"})
    blog = blog_numbers()[["id", "blog_value", "unit"]].rename(columns={"blog_value": "blog_t4",
                                                                       "unit": "blog_unit"})
    table = yours.merge(h200, on="id", how="outer").merge(blog, on="id", how="outer")
    for other in ("h200_unit", "blog_unit"):  # yours first, then the H200 run's, then the blog's
        table["unit"] = table["unit"].where(table["unit"].notna() & (table["unit"] != ""), table[other])
    table = table.drop(columns=["h200_unit", "blog_unit"])
    if isinstance(ids, str):
        table = table[table["id"].str.startswith(ids)]
    elif ids is not None:
        order = {k: i for i, k in enumerate(ids)}
        table = table[table["id"].isin(order)].assign(_o=lambda t: t["id"].map(order)).sort_values("_o")
        table = table.drop(columns="_o")
    table["blog_t4"] = table["blog_t4"].fillna("")
    return table[["id", "yours", "h200", "blog_t4", "unit"]].reset_index(drop=True)


CHAPTER_OF_PREFIX = {"baseline": "01 setup", "add": "02 add", "rmsnorm": "03 rmsnorm", "matmul": "04 matmul",
                     "attention": "05 attention", "full": "06 full stack", "context": "07 context sweep"}


def summary_table():
    """Every experiment in chapter order: yours, the committed H200 run and the blog's T4 figure."""
    table = compare()
    prefix = table["id"].str.split(".").str[0]
    table = table[prefix.isin(list(CHAPTER_OF_PREFIX))].copy()
    order = {p: i for i, p in enumerate(CHAPTER_OF_PREFIX)}
    table.insert(0, "chapter", table["id"].str.split(".").str[0].map(CHAPTER_OF_PREFIX))
    table["_o"] = table["id"].str.split(".").str[0].map(order)
    return table.sort_values(["_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
