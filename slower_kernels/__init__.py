"""Triton kernels for Qwen3-0.6B, written to be read (and made slower on purpose).

Without a CUDA GPU the kernels run in Triton's interpreter (numpy on the CPU): TRITON_INTERPRET=1
must be set before any @triton.jit function is defined, so it is set here, before the kernel
modules are imported. Import ``slower_kernels`` before defining Triton kernels of your own.
"""

import os
import sys

import torch

if not torch.cuda.is_available():
    if "triton" in sys.modules and not os.environ.get("TRITON_INTERPRET"):
        # too late: Triton's own helpers (tl.sum, ...) were built for a GPU, and kernels defined now fail
        # inside the interpreter with "Cannot call @triton.jit'd outside of the scope of a kernel"
        raise ImportError("slower_kernels: triton was imported before TRITON_INTERPRET=1 was set, and there is "
                          "no CUDA GPU. Import helpers or slower_kernels before transformers or triton (a "
                          "model module imports triton), or set TRITON_INTERPRET=1 before any import.")
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402  (after TRITON_INTERPRET is settled)

INTERPRET: bool = bool(triton.knobs.runtime.interpret)  # True when kernels run in the interpreter

from .add import add, empty  # noqa: E402
from .attention import attention_slow, attention_torch_ops  # noqa: E402
from .configs import DEFAULT_TILE, TILE_CONFIGS, TileConfig  # noqa: E402
from .folded_gemv import DecodeGemvConfig, decode_gemv  # noqa: E402
from .decoder import STAGES, OwnCacheModel, rmsnorm_rope_cache  # noqa: E402
from .fast_attention import decode_attention, prefill_attention  # noqa: E402
from .fused import add_rmsnorm, add_rmsnorm_, rmsnorm_rope, rope, swiglu, swiglu_packed  # noqa: E402
from .gemv import GEMV_MAX_M, FusedLinear, GemvConfig, GemvLinear, gemv, gemv_config, small_m_linear  # noqa: E402
from .launches import count_launches  # noqa: E402
from .matmul import linear, matmul  # noqa: E402
from .modules import FastAttention, FastDecoderLayer, FastMLP, TritonLinear, TritonRMSNorm, layer_cache  # noqa: E402
from .rmsnorm import rmsnorm_fused, rmsnorm_two_pass  # noqa: E402
from .softmax import softmax  # noqa: E402

__all__ = [
    "INTERPRET",
    "TileConfig",
    "TILE_CONFIGS",
    "DEFAULT_TILE",
    "add",
    "empty",
    "rmsnorm_fused",
    "rmsnorm_two_pass",
    "matmul",
    "linear",
    "softmax",
    "attention_torch_ops",
    "attention_slow",
    "count_launches",
    "decode_attention",
    "prefill_attention",
    "GEMV_MAX_M",
    "GemvConfig",
    "gemv_config",
    "gemv",
    "small_m_linear",
    "GemvLinear",
    "FusedLinear",
    "swiglu",
    "swiglu_packed",
    "add_rmsnorm",
    "add_rmsnorm_",
    "rope",
    "rmsnorm_rope",
    "TritonRMSNorm",
    "TritonLinear",
    "FastMLP",
    "FastAttention",
    "FastDecoderLayer",
    "layer_cache",
    "rmsnorm_rope_cache",
    "OwnCacheModel",
    "STAGES",
    "DecodeGemvConfig",
    "decode_gemv",
]
