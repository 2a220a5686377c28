"""Input validation shared by every launcher: one place for the device, dtype, shape and tile rules.

Wrong types and dtypes raise TypeError, wrong devices, shapes and sizes raise ValueError; every
message starts with the argument's name and says what was expected.
"""

import torch

from . import INTERPRET
from .configs import MAX_ROW_BLOCK_SIZE

FLOAT_DTYPES = (torch.float16, torch.float32)
# Where the kernels can run: a GPU, or the CPU through Triton's interpreter (TRITON_INTERPRET=1).
DEVICE_TYPES = ("cuda", "cpu") if INTERPRET else ("cuda",)
_WHERE = "a CUDA tensor (or a CPU tensor, since TRITON_INTERPRET=1)" if INTERPRET else "a CUDA tensor"


def check_tensor(t, name: str, ndim: int | None = None, min_ndim: int = 0, dims: str = "") -> None:
    """``t`` is a float16/float32 tensor on a device the kernels run on, with the right rank."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype == torch.bfloat16:
        raise TypeError(
            f"{name} is bfloat16, which does not run on a T4 (sm_75) or in the Triton interpreter: "
            "use float16 or float32"
        )
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float16 or float32, got {t.dtype}")
    if t.device.type not in DEVICE_TYPES:
        raise ValueError(f"{name} must be {_WHERE}, got a tensor on {t.device}")
    if (ndim is not None and t.dim() != ndim) or t.dim() < min_ndim:
        want = f"{ndim} dims" if ndim is not None else f"at least {min_ndim} dim(s)"
        raise ValueError(f"{name} must have {want} {dims}, got shape {tuple(t.shape)}")


def check_like(t: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str) -> None:
    """``t`` lives on the device of ``ref`` and has its dtype."""
    if t.device != ref.device:
        raise ValueError(f"{name} is on {t.device} but {ref_name} is on {ref.device}: use one device")
    if t.dtype != ref.dtype:
        raise TypeError(f"{name} must have the dtype of {ref_name} ({ref.dtype}), got {t.dtype}")


def check_shape(t: torch.Tensor, name: str, expected: tuple, dims: str) -> None:
    """``t.shape == expected``; ``dims`` names the dimensions for the message, e.g. "[K, N]"."""
    if tuple(t.shape) != tuple(expected):
        raise ValueError(f"{name} must have shape {dims} = {tuple(expected)}, got {tuple(t.shape)}")


def check_row(x: torch.Tensor, name: str) -> None:
    """A row kernel keeps one row of ``x`` (its last dim) in registers: 1 <= n_cols <= 65536."""
    if not 1 <= x.shape[-1] <= MAX_ROW_BLOCK_SIZE:
        raise ValueError(f"{name} must have a last dim between 1 and {MAX_ROW_BLOCK_SIZE}, got {x.shape[-1]}")


def check_number(value, name: str) -> None:
    """A Python (or numpy) real number, such as eps or scale."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")


def _check_power_of_two(value, name: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not (low <= value <= high and value & (value - 1) == 0):
        raise ValueError(f"{name} must be a power of two between {low} and {high}, got {value}")


def check_tiles(block_m, block_n, block_k, num_warps, num_stages) -> None:
    """Tile sizes are powers of two in [16, 256] (tl.dot needs >= 16 on NVIDIA GPUs)."""
    for name, value in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        _check_power_of_two(value, name, 16, 256)
    _check_power_of_two(num_warps, "num_warps", 1, 32)
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or not 1 <= num_stages <= 8:
        raise ValueError(f"num_stages must be an int between 1 and 8, got {num_stages!r}")


def check_attention(q, k, v, attn_mask) -> tuple[int, int, int, int, int, int]:
    """q [B, Hq, S, D], k and v [B, Hkv, T, D], Hq % Hkv == 0, mask broadcastable to [B, Hq, S, T].

    Returns (B, Hq, Hkv, S, T, D).
    """
    check_tensor(q, "q", ndim=4, dims="[B, Hq, S, D]")
    check_tensor(k, "k", ndim=4, dims="[B, Hkv, T, D]")
    check_tensor(v, "v", ndim=4, dims="[B, Hkv, T, D]")
    check_like(k, "k", q, "q")
    check_like(v, "v", q, "q")
    B, Hq, S, D = q.shape
    _, Hkv, T, _ = k.shape
    check_shape(k, "k", (B, Hkv, T, D), "[B, Hkv, T, D] (batch and head dim of q)")
    check_shape(v, "v", tuple(k.shape), "[B, Hkv, T, D] (the shape of k)")
    if Hq % Hkv != 0:
        raise ValueError(f"k has {Hkv} heads, which must divide the {Hq} query heads of q (Hq % Hkv == 0)")
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
        if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
            raise TypeError(
                f"attn_mask must be bool (True = attend) or an additive float mask, got {attn_mask.dtype}"
            )
        if attn_mask.device != q.device:
            raise ValueError(f"attn_mask is on {attn_mask.device} but q is on {q.device}: use one device")
        try:
            ok = torch.broadcast_shapes(attn_mask.shape, (B, Hq, S, T)) == (B, Hq, S, T)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"attn_mask must broadcast to [B, Hq, S, T] = {(B, Hq, S, T)}, got {tuple(attn_mask.shape)}"
            )
    return B, Hq, Hkv, S, T, D


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """x [..., n] as 2-D rows [R, n] with a unit last stride, for the one-row-per-program kernels.

    A view when the leading dims can be flattened; otherwise ``reshape``/``contiguous`` copy x
    (one extra read and write of it).
    """
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()
