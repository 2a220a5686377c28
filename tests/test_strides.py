"""Every launcher of slower_kernels/ against every layout of every tensor argument.

Each tensor argument in turn is built with a non-default layout (transposed, a row stride wider
than the row, a stepped last dim, broadcast with a zero stride, a non-contiguous batch dim, ...),
the others contiguous. The launcher must either match the float64 reference computed from the same
logical values, or refuse the layout with a ValueError whose message starts with the argument's
name (``slower_kernels/_checks.py``); which one is fixed per (launcher, argument, layout) below, so
that a layout that starts being refused, or stops being refused, fails too.
Runs on a GPU, or on the CPU through Triton's interpreter (sizes are kept small for it).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from test_fast_attention import decode_ref
from test_fused import add_rmsnorm_ref, rope_ref, swiglu_ref
from test_gemv import linear_ref
from test_kernels import assert_close, attention_ref, randn, rmsnorm_ref, softmax_ref

from slower_kernels import (
    add,
    add_rmsnorm,
    add_rmsnorm_,
    attention_slow,
    decode_attention,
    gemv,
    linear,
    matmul,
    prefill_attention,
    rmsnorm_fused,
    rmsnorm_rope,
    rmsnorm_two_pass,
    rope,
    small_m_linear,
    softmax,
    swiglu,
    swiglu_packed,
)

# Triton 3.6's interpreter turns 1-element arrays into Python ints, which NumPy >= 1.25 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

# ------------------------------------------------------------------------------------------------
# layouts: a tensor of a given logical shape, as a view of a differently shaped buffer


def _storage(kind: str, shape: tuple) -> tuple:
    """The shape of the buffer that ``_view(kind, buffer, shape)`` turns into a view of ``shape``."""
    *lead, n = shape
    return {
        "transposed": lambda: (*shape[:-2], n, shape[-2]),  # last two dims swapped: last stride != 1
        "dims_swapped": lambda: (*shape[:-3], shape[-2], shape[-3], n),  # e.g. [B, S, H, D] seen as [B, H, S, D]
        "row_stride": lambda: (*lead, n + 3),  # x[..., :n] of a wider tensor: row stride n + 3
        "stepped": lambda: (*lead, 2 * n),  # x[..., ::2]: last stride 2
        "broadcast": lambda: (1, *shape[1:]),  # expanded over dim 0: stride 0
        "broadcast_dim1": lambda: (shape[0], 1, *shape[2:]),  # expanded over dim 1 (rows, heads): stride 0
        "broadcast_last": lambda: (*lead, 1),  # expanded last dim: stride 0 there
        "batch_strided": lambda: (2 * shape[0], *shape[1:]),  # x[::2]: dim 0 not contiguous
    }[kind]()


def _view(kind: str, buffer: torch.Tensor, shape: tuple) -> torch.Tensor:
    if kind == "transposed":
        return buffer.transpose(-1, -2)
    if kind == "dims_swapped":
        return buffer.transpose(-2, -3)
    if kind == "row_stride":
        return buffer[..., : shape[-1]]
    if kind == "stepped":
        return buffer[..., ::2]
    if kind == "batch_strided":
        return buffer[::2]
    return buffer.expand(shape)  # the broadcasts


KINDS_1D = ["stepped", "broadcast"]
KINDS = [
    "transposed", "dims_swapped", "row_stride", "stepped", "broadcast", "broadcast_dim1", "broadcast_last",
    "batch_strided",
]  # fmt: skip


def kinds_for(shape: tuple) -> list[str]:
    """The layouts that make a tensor of ``shape`` non-contiguous (decided on meta tensors, no data)."""
    if len(shape) == 1:
        return KINDS_1D
    out = []
    for kind in KINDS:
        if kind in ("dims_swapped", "broadcast_dim1") and len(shape) < 3:
            continue
        view = _view(kind, torch.empty(_storage(kind, shape), device="meta"), shape)
        assert view.shape == shape
        if not view.is_contiguous():
            out.append(kind)
    return out


def fill_randn(shape, device, seed) -> torch.Tensor:
    return randn(*shape, device=device, seed=seed)


def fill_mask(shape, device, seed) -> torch.Tensor:
    """A bool mask, True (attend) for about 84% of the keys: no query row is fully masked."""
    return (randn(*shape, seed=seed) > -1.0).to(device)


def laid_out(kind: str | None, shape: tuple, device, seed: int, fill=fill_randn) -> torch.Tensor:
    """A tensor of ``shape`` in layout ``kind`` (None: contiguous)."""
    if kind is None:
        return fill(shape, device, seed)
    t = _view(kind, fill(_storage(kind, shape), device, seed), shape)
    assert t.shape == shape and not t.is_contiguous()
    return t


# ------------------------------------------------------------------------------------------------
# the launchers: tensor arguments, a float64 reference, and the layouts each refuses


@dataclass(frozen=True)
class Launcher:
    fn: Callable  # called with the tensor arguments by name, and kwargs
    shapes: dict  # tensor argument -> logical shape
    ref: Callable  # float64 reference, called like fn (without kwargs); a tensor or a tuple of them
    kwargs: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)  # (argument, kind) -> regex of the expected ValueError
    groups: tuple = ()  # extra argument groups laid out together, e.g. ("cos", "sin")
    fills: dict = field(default_factory=dict)  # argument -> fill function, for non-float arguments
    in_place: str | None = None  # the argument the launcher writes (and returns as its last output)


def _rope_ref(q, k, cos, sin):
    return rope_ref(q, cos, sin), rope_ref(k, cos, sin)


def _rmsnorm_rope_ref(q, k, q_weight, k_weight, cos, sin, eps=1e-6):
    return rope_ref(rmsnorm_ref(q, q_weight, eps), cos, sin), rope_ref(rmsnorm_ref(k, k_weight, eps), cos, sin)


TILES = dict(block_m=16, block_n=16, block_k=16, num_warps=1)  # small tiles: few elements per program
ROWS = (2, 3, 37)  # [..., n]: odd sizes, leading dims that can be flattened or not
M, K, N = 13, 19, 11  # matmul
B, HQ, HKV, S, T, D = 2, 4, 2, 5, 11, 13  # attention: GQA, odd head dim
ROPE_Q, ROPE_K, ROPE_CS = (2, 4, 3, 18), (2, 2, 3, 18), (2, 3, 18)  # half head dim 9
SCALE = 0.3
W_LAST = r"^w must have a contiguous last dim"
RES_LAST = r"^residual must have a contiguous last dim"
RES_ROWS = r"^residual must be viewable as rows"
RES_SHARED = r"^residual must not have rows that share memory"

LAUNCHERS = {
    "add": Launcher(add, dict(x=ROWS, y=ROWS), lambda x, y: x.double() + y.double()),
    "rmsnorm_fused": Launcher(
        rmsnorm_fused, dict(x=ROWS, weight=ROWS[-1:]), lambda x, weight: rmsnorm_ref(x, weight, 1e-6)
    ),
    "rmsnorm_two_pass": Launcher(
        rmsnorm_two_pass, dict(x=ROWS, weight=ROWS[-1:]), lambda x, weight: rmsnorm_ref(x, weight, 1e-6)
    ),
    "softmax": Launcher(softmax, dict(x=ROWS), lambda x: softmax_ref(x, 0.7), dict(scale=0.7)),
    "matmul": Launcher(matmul, dict(a=(M, K), b=(K, N)), lambda a, b: a.double() @ b.double(), TILES),
    "linear": Launcher(
        linear, dict(x=(2, 3, K), weight=(N, K), bias=(N,)), lambda x, weight, bias: linear_ref(x, weight, bias), TILES
    ),
    "gemv": Launcher(
        gemv, dict(x=ROWS, w=(29, ROWS[-1]), bias=(29,)), linear_ref,
        refused={("w", kind): W_LAST for kind in ("transposed", "stepped", "broadcast_last")},
    ),
    "small_m_linear": Launcher(  # 3 rows: gemv, or the tiled matmul for a weight gemv cannot read in place
        small_m_linear, dict(x=(3, ROWS[-1]), weight=(29, ROWS[-1]), bias=(29,)),
        lambda x, weight, bias: linear_ref(x, weight, bias),
    ),
    "swiglu": Launcher(swiglu, dict(gate=ROWS, up=ROWS), swiglu_ref),
    "swiglu_packed": Launcher(
        swiglu_packed, dict(gate_up=(*ROWS[:-1], 2 * ROWS[-1])),
        lambda gate_up: swiglu_ref(*gate_up.chunk(2, dim=-1)),
    ),
    "add_rmsnorm": Launcher(
        add_rmsnorm, dict(x=ROWS, residual=ROWS, weight=ROWS[-1:]),
        lambda x, residual, weight: add_rmsnorm_ref(x, residual, weight, 1e-6),
    ),
    "add_rmsnorm_": Launcher(  # writes r into residual: a layout it cannot write is refused
        add_rmsnorm_, dict(x=ROWS, residual=ROWS, weight=ROWS[-1:]),
        lambda x, residual, weight: add_rmsnorm_ref(x, residual, weight, 1e-6),
        refused={("residual", "transposed"): RES_LAST, ("residual", "stepped"): RES_LAST,
                 ("residual", "broadcast_last"): RES_LAST, ("residual", "dims_swapped"): RES_ROWS,
                 ("residual", "broadcast"): RES_ROWS, ("residual", "batch_strided"): RES_ROWS,
                 ("residual", "broadcast_dim1"): RES_ROWS},
        in_place="residual",
    ),
    "add_rmsnorm__2d": Launcher(  # as rows [R, n], residual's row stride can be written through
        add_rmsnorm_, dict(x=(7, 37), residual=(7, 37), weight=(37,)),
        lambda x, residual, weight: add_rmsnorm_ref(x, residual, weight, 1e-6),
        refused={("residual", "transposed"): RES_LAST, ("residual", "stepped"): RES_LAST,
                 ("residual", "broadcast_last"): RES_LAST, ("residual", "broadcast"): RES_SHARED},
        in_place="residual",
    ),
    "rope": Launcher(rope, dict(q=ROPE_Q, k=ROPE_K, cos=ROPE_CS, sin=ROPE_CS), _rope_ref, groups=(("cos", "sin"),)),
    "rmsnorm_rope": Launcher(
        rmsnorm_rope, dict(q=ROPE_Q, k=ROPE_K, q_weight=ROPE_Q[-1:], k_weight=ROPE_Q[-1:], cos=ROPE_CS, sin=ROPE_CS),
        _rmsnorm_rope_ref, dict(eps=1e-6), groups=(("cos", "sin"),),
    ),
    "attention_slow": Launcher(  # an additive mask
        attention_slow, dict(q=(B, HQ, S, D), k=(B, HKV, T, D), v=(B, HKV, T, D), attn_mask=(B, 1, S, T)),
        lambda q, k, v, attn_mask: attention_ref(q, k, v, SCALE, True, attn_mask), dict(scale=SCALE, causal=True),
    ),
    "attention_slow_bool_mask": Launcher(  # a row of False (broadcast_last) gives zeros, NaN in the reference
        attention_slow, dict(q=(B, HQ, S, D), k=(B, HKV, T, D), v=(B, HKV, T, D), attn_mask=(B, 1, S, T)),
        lambda q, k, v, attn_mask: attention_ref(q, k, v, SCALE, True, attn_mask).nan_to_num(0.0),
        dict(scale=SCALE, causal=True),
        fills=dict(attn_mask=fill_mask),
    ),
    "decode_attention": Launcher(
        decode_attention, dict(q=(B, HQ, 1, D), k=(B, HKV, T, D), v=(B, HKV, T, D)), decode_ref, dict(num_splits=1)
    ),
    "decode_attention_split": Launcher(
        decode_attention, dict(q=(B, HQ, 1, D), k=(B, HKV, T, D), v=(B, HKV, T, D)), decode_ref, dict(num_splits=3)
    ),
    "prefill_attention": Launcher(
        prefill_attention, dict(q=(B, HQ, S, D), k=(B, HKV, T, D), v=(B, HKV, T, D)),
        lambda q, k, v: attention_ref(q, k, v, 1 / math.sqrt(D), True, None), dict(causal=True),
    ),
}
ONLY_MASK = {"attention_slow_bool_mask"}  # q, k, v layouts are the additive case's: test the mask only


def _cases():
    for name, spec in LAUNCHERS.items():
        groups = [(arg,) for arg in spec.shapes] + list(spec.groups)
        if name in ONLY_MASK:
            groups = [("attn_mask",)]
        for group in groups:
            for kind in kinds_for(spec.shapes[group[0]]):
                yield pytest.param(name, group, kind, id=f"{name}-{'+'.join(group)}-{kind}")


CASES = list(_cases())


@pytest.mark.parametrize("name, group, kind", CASES)
def test_layout(name, group, kind, device):
    spec = LAUNCHERS[name]
    args = {
        arg: laid_out(kind if arg in group else None, shape, device, seed, spec.fills.get(arg, fill_randn))
        for seed, (arg, shape) in enumerate(spec.shapes.items())
    }
    refused = {spec.refused.get((arg, kind)) for arg in group} - {None}
    if refused:
        (match,) = refused
        with pytest.raises(ValueError, match=match):
            spec.fn(**args, **spec.kwargs)
        return
    before = {arg: t.clone() for arg, t in args.items()}
    written = args.get(spec.in_place)
    buffer = None if written is None else written._base  # the tensor residual is a view of, if any
    buffer_before = None if buffer is None else buffer.clone()
    expected = spec.ref(**args)  # from the inputs before the launch
    out = spec.fn(**args, **spec.kwargs)
    outs, refs = (out, expected) if isinstance(out, tuple) else ((out,), (expected,))
    for o, r in zip(outs, refs, strict=True):
        assert o.shape == r.shape
        assert_close(o, r, torch.float32)
    for arg, t in args.items():  # inputs untouched, except the one written in place
        if arg != spec.in_place:
            assert torch.equal(t, before[arg]), f"{arg} was modified"
    if spec.in_place is not None:
        assert outs[-1] is written  # the caller's tensor itself holds r
        if buffer is not None:  # and nothing of its buffer outside the view was written
            _view(kind, buffer_before, written.shape).copy_(refs[-1])
            assert_close(buffer, buffer_before, torch.float32)


def test_every_launcher_has_every_argument_tested():
    """Each tensor argument of each launcher gets at least two non-contiguous layouts."""
    for name, spec in LAUNCHERS.items():
        tested = {arg for (n, group, _k) in (c.values for c in CASES) if n == name for arg in group}
        want = {"attn_mask"} if name in ONLY_MASK else set(spec.shapes)
        assert tested == want, name
        for arg, shape in spec.shapes.items():
            assert len(kinds_for(shape)) >= 2, (name, arg)


@pytest.mark.parametrize("kind", ["offset", "expanded"])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_decode_kv_len_tensor_layout(kind, num_splits, device):
    """A device kv_len read by the kernel: a one-element view at an offset, or a 0-dim value expanded."""
    q = randn(B, HQ, 1, D, device=device)
    k, v = randn(B, HKV, T, D, device=device, seed=1), randn(B, HKV, T, D, device=device, seed=2)
    if kind == "offset":
        kv_len = torch.tensor([3, 7, 9], device=device)[1:2]
    else:
        kv_len = torch.tensor(7, device=device).expand(1)
    out = decode_attention(q, k, v, kv_len=kv_len, num_splits=num_splits)
    assert_close(out, decode_ref(q, k, v, kv_len=7), torch.float32)
