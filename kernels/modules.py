"""Thin nn.Module wrappers that hold a model's weights and call the launchers (inference only)."""

import torch
from torch import nn

from .configs import DEFAULT_TILE, TILE_CONFIGS, TileConfig
from .fused import swiglu_packed
from .gemv import FusedLinear, GemvLinear, small_m_linear
from .matmul import linear
from .rmsnorm import rmsnorm_fused, rmsnorm_two_pass

_RMSNORMS = {"fused": rmsnorm_fused, "two_pass": rmsnorm_two_pass}


class TritonRMSNorm(nn.Module):
    """RMSNorm through ``rmsnorm_fused`` (1 launch) or ``rmsnorm_two_pass`` (2 launches)."""

    def __init__(self, weight: nn.Parameter, eps: float = 1e-6, mode: str = "fused"):
        super().__init__()
        if mode not in _RMSNORMS:
            raise ValueError(f"mode must be one of {sorted(_RMSNORMS)}, got {mode!r}")
        self.weight = weight  # the caller's Parameter itself, not a copy
        self.eps = eps
        self.mode = mode

    @classmethod
    def from_hf(cls, hf_norm: nn.Module, mode: str = "fused") -> "TritonRMSNorm":
        """Wrap a transformers ``Qwen3RMSNorm``, sharing its weight Parameter and its eps."""
        return cls(hf_norm.weight, hf_norm.variance_epsilon, mode)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNORMS[self.mode](x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}, mode={self.mode}"


class TritonLinear(nn.Module):
    """nn.Linear through the Triton ``matmul`` with one tile configuration."""

    def __init__(
        self, weight: nn.Parameter, bias: nn.Parameter | None = None, tile: TileConfig | str = DEFAULT_TILE
    ):
        super().__init__()
        if isinstance(tile, str):
            if tile not in TILE_CONFIGS:
                raise ValueError(f"tile must be a TileConfig or one of {list(TILE_CONFIGS)}, got {tile!r}")
            tile = TILE_CONFIGS[tile]
        self.weight = weight  # [out_features, in_features], shared with the wrapped module
        self.register_parameter("bias", bias)  # bias may be None
        self.out_features, self.in_features = weight.shape
        self.tile = tile

    @classmethod
    def from_linear(cls, lin: nn.Linear, tile: TileConfig | str = DEFAULT_TILE) -> "TritonLinear":
        """Wrap an ``nn.Linear``, sharing its weight and bias Parameters."""
        return cls(lin.weight, lin.bias, tile)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, **self.tile.kwargs())

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, tile={self.tile.name}"
        )


class FastMLP(nn.Module):
    """Qwen3's MLP, ``down(silu(gate(x)) * up(x))``, in three launches: one fused gate/up projection
    (``FusedLinear``: the two weights concatenated once), one SwiGLU reading both halves in place
    (``swiglu_packed``), and the down projection (``GemvLinear``). PyTorch's eager MLP launches five
    kernels or more. The concatenated weight is a copy (2 x intermediate x hidden elements per layer);
    the wrapped module's own Parameters stay untouched, so restoring it is exact.
    """

    def __init__(self, gate_proj: nn.Linear, up_proj: nn.Linear, down_proj: nn.Linear):
        super().__init__()
        self.gate_up = FusedLinear.from_linears(gate_proj, up_proj)
        self.down = GemvLinear.from_linear(down_proj)

    @classmethod
    def from_hf(cls, mlp: nn.Module) -> "FastMLP":
        """Wrap a transformers ``Qwen3MLP`` (SiLU-gated: its config's ``hidden_act`` must be "silu")."""
        act = getattr(getattr(mlp, "config", None), "hidden_act", None)
        if act not in ("silu", "swish"):
            raise ValueError(f"mlp.config.hidden_act must be 'silu' (a SwiGLU MLP), got {act!r}")
        return cls(mlp.gate_proj, mlp.up_proj, mlp.down_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = small_m_linear(x, self.gate_up.weight, self.gate_up.bias)  # [..., 2 * I], one launch
        return self.down(swiglu_packed(gate_up))
