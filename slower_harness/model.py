"""The model: Qwen3-0.6B from the hub or a local checkpoint, its exact architecture with seeded random weights where
the hub is out of reach, or a tiny stand-in in CPU mode; what it holds (``module_census``) and its prompts."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from slower_harness import env
from slower_harness.display import md
from slower_harness.results import MODEL, describe_model
from slower_harness.specs import QWEN3_0_6B, TINY_QWEN3


def _hub_reachable(host: str = "huggingface.co", timeout_s: float = 3.0) -> bool:
    """A short TCP probe, so a machine without network falls back in seconds instead of hanging."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def random_qwen3(config_kwargs: dict = QWEN3_0_6B, seed: int = 0):
    """Qwen3ForCausalLM from a config dict, with seeded random weights, on DEVICE in DTYPE."""
    config = Qwen3Config(**config_kwargs, attn_implementation="sdpa")
    torch.manual_seed(seed)
    with torch.device(env.DEVICE):
        model = Qwen3ForCausalLM(config)
    return model.to(env.DTYPE).eval()


def load_model(name_or_path: str = "Qwen/Qwen3-0.6B"):
    """Return ``(model, tokenizer or None, description)``.

    * a local checkpoint directory, or the hub when reachable: that checkpoint and its tokenizer;
    * a GPU without the hub: the exact Qwen3-0.6B architecture with seeded random weights (same speed,
      meaningless text), announced;
    * CPU mode: a tiny Qwen3 (two layers, hidden 64), since the interpreter runs kernels in numpy.
    """
    local = Path(name_or_path).is_dir()
    if local or (env.MODE != "cpu" and _hub_reachable()):
        tokenizer = None
        has_tokenizer = not local or any((Path(name_or_path) / f).exists()
                                         for f in ("tokenizer.json", "tokenizer_config.json"))
        if has_tokenizer:  # a checkpoint saved without one still loads (prompts are then random ids)
            tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=env.DTYPE, attn_implementation="sdpa")
        model = model.to(env.DEVICE).eval()
        describe_model(f"{name_or_path} ({'local checkpoint' if local else 'hub weights'}, {str(env.DTYPE)[6:]})")
        return model, tokenizer, MODEL["description"]
    if env.MODE == "cpu":
        model = random_qwen3(TINY_QWEN3)
        describe_model("tiny Qwen3 (CPU mode: 2 layers, hidden 64, random weights)")
        return model, None, MODEL["description"]
    model = random_qwen3(QWEN3_0_6B)
    describe_model(f"Qwen3-0.6B architecture, seeded random weights ({str(env.DTYPE)[6:]}; hub unreachable)")
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
    return ids[None].to(env.DEVICE)
