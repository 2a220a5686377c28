"""slower_kernels/gemv.py: gemv, GemvLinear and FusedLinear against float64 references on odd shapes.

Runs on a GPU, or on the CPU through Triton's interpreter (sizes are kept small for it).
"""

import dataclasses
import importlib

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels import DTYPES, HYPOTHESIS, TOL, assert_close, randn  # one tolerance table, one input maker

from slower_kernels.gemv import (
    GEMV_MAX_M,
    MIN_PROGRAMS,
    TILE_ELEMENTS,
    FusedLinear,
    GemvConfig,
    GemvLinear,
    gemv,
    gemv_config,
)
from slower_kernels.launches import count_launches

# Triton 3.6's interpreter turns 1-element arrays into Python ints, which NumPy >= 1.25 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

GEMV = importlib.import_module("slower_kernels.gemv")  # the module (slower_kernels.gemv the name is the function)
M_VALUES = [1, 3, GEMV_MAX_M]
K_ODD, N_ODD = 257, 1031


def config_for(M: int, N: int, K: int, device: torch.device) -> GemvConfig | None:
    """The default tiles on a GPU. The interpreter runs programs one after another (~5 ms each), so
    there the same tile takes at least 16 rows of w per program: ~65 programs at N = 1031, not 1031."""
    if device.type == "cuda":
        return None
    config = gemv_config(M, N, K)
    return dataclasses.replace(config, block_n=max(config.block_n, 16))


def linear_ref(x, w, bias=None) -> torch.Tensor:
    """float64 x @ w.T (+ bias); reads w (N*K) and x (M*K) once, writes M*N."""
    return F.linear(x.double(), w.double(), None if bias is None else bias.double())


# ------------------------------------------------------------------------------------------------
# gemv


@pytest.mark.parametrize("M", M_VALUES)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv(M, bias, dtype, device):
    x = randn(M, K_ODD, dtype=dtype, device=device)
    w = randn(N_ODD, K_ODD, dtype=dtype, device=device, seed=1)
    b = randn(N_ODD, dtype=dtype, device=device, seed=2) if bias else None
    y = gemv(x, w, b, config=config_for(M, N_ODD, K_ODD, device))
    assert y.shape == (M, N_ODD)
    assert_close(y, linear_ref(x, w, b), dtype)


GEMV_SHAPES = [  # (M, N, K) run with the default config: one row of w per program, a few dozen programs
    (1, 37, K_ODD),
    (3, 45, 100),
    (GEMV_MAX_M, 21, 70),  # K = 70 in chunks of 64: a ragged last chunk
    (1, 5, 1),
    (2, 3, 5000),  # K in chunks of 2048
    (1, 2, 4100),  # K in chunks of 4096 (MAX_BLOCK_K), 4 elements in the last one
]


@pytest.mark.parametrize("M,N,K", GEMV_SHAPES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_default_config(M, N, K, dtype, device):
    x, w = randn(M, K, dtype=dtype, device=device), randn(N, K, dtype=dtype, device=device, seed=1)
    assert_close(gemv(x, w), linear_ref(x, w), dtype)


EXPLICIT_CONFIGS = [  # (M, config): the corners of GemvConfig
    (1, GemvConfig(1, 1, 16, 1)),  # one row per program, K = 257 in 17 chunks of 16
    (1, GemvConfig(1, 128, 256, 8)),
    (3, GemvConfig(4, 16, 64, 2)),
    (3, GemvConfig(16, 2, 512, 4)),  # BLOCK_M larger than needed: rows 3.. are never stored
    (GEMV_MAX_M, GemvConfig(16, 32, 64, 4)),
]


@pytest.mark.parametrize("M,config", EXPLICIT_CONFIGS, ids=lambda v: getattr(v, "name", str(v)))
def test_gemv_explicit_config(M, config, device):
    x, w = randn(M, K_ODD, device=device), randn(37, K_ODD, device=device, seed=1)
    b = randn(37, device=device, seed=2)
    assert_close(gemv(x, w, b, config=config), linear_ref(x, w, b), torch.float32)


@pytest.mark.parametrize("x_shape", [(K_ODD,), (1, 1, K_ODD), (2, 3, K_ODD)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_leading_dims(x_shape, dtype, device):
    x = randn(*x_shape, dtype=dtype, device=device)
    w = randn(N_ODD, K_ODD, dtype=dtype, device=device, seed=1)
    M = x[..., 0].numel()
    y = gemv(x, w, config=config_for(M, N_ODD, K_ODD, device))
    assert y.shape == (*x_shape[:-1], N_ODD)
    assert_close(y, linear_ref(x, w), dtype)


NON_CONTIGUOUS_X = {
    "row_stride": lambda d: randn(3, 300, device=d)[:, :K_ODD],  # a view: stride_xm = 300
    "column_step": lambda d: randn(3, 2 * K_ODD, device=d)[:, ::2],  # last dim strided: copied
    "transposed_rows": lambda d: randn(3, 2, K_ODD, device=d).transpose(0, 1),  # (2, 3, K): copied
}


@pytest.mark.parametrize("view", list(NON_CONTIGUOUS_X))
def test_gemv_non_contiguous_x(view, device):
    x = NON_CONTIGUOUS_X[view](device)
    assert not x.is_contiguous()
    w = randn(37, K_ODD, device=device, seed=1)
    assert_close(gemv(x, w), linear_ref(x, w), torch.float32)


class KernelSpy:
    """Stands in for gemv_kernel: records the arguments of each launch, then launches the real kernel."""

    def __init__(self, kernel):
        self.kernel, self.fn, self.launches = kernel, kernel.fn, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append(args)
            return self.kernel[grid](*args, **kwargs)

        return launch


@pytest.mark.parametrize("layout", ["contiguous", "row_slice"])
def test_gemv_reads_w_in_place(layout, monkeypatch, device):
    """The kernel gets w itself (no transpose, no contiguous copy), also a slice of rows of a larger
    weight (the k rows of a concatenated qkv weight, or a wider row stride)."""
    spy = KernelSpy(GEMV.gemv_kernel)
    monkeypatch.setattr(GEMV, "gemv_kernel", spy)
    big = randn(90, 120, device=device, seed=1)
    w = big[:40] if layout == "contiguous" else big[30:70, 10:110]  # (40, K) / (40, 100), stride_wn 120
    x = randn(2, w.shape[1], device=device)
    y = gemv(x, w)
    (args,) = spy.launches
    assert args[1] is w and args[1].data_ptr() == w.data_ptr()
    assert_close(y, linear_ref(x, w), torch.float32)


@pytest.mark.parametrize("M", [1, GEMV_MAX_M])
@pytest.mark.parametrize("bias", [False, True])
def test_gemv_launches_once(M, bias, device):
    x, w = randn(M, 64, device=device), randn(50, 64, device=device, seed=1)
    b = randn(50, device=device, seed=2) if bias else None
    with count_launches() as launches:
        first = gemv(x, w, b)
    assert dict(launches) == {"gemv_kernel": 1}
    assert torch.equal(gemv(x, w, b), first)  # no atomics, no split: the same bits every time


@HYPOTHESIS
@given(
    M=st.integers(1, GEMV_MAX_M),
    N=st.integers(1, 48),
    K=st.integers(1, 300),
    bias=st.booleans(),
    dtype=st.sampled_from(DTYPES),
)
def test_gemv_property(M, N, K, bias, dtype, device):
    x = randn(M, K, dtype=dtype, device=device, seed=K)
    w = randn(N, K, dtype=dtype, device=device, seed=N + 1)
    b = randn(N, dtype=dtype, device=device, seed=2) if bias else None
    assert_close(gemv(x, w, b), linear_ref(x, w, b), dtype)


# ------------------------------------------------------------------------------------------------
# gemv_config: the documented choices (pure Python)


@pytest.mark.parametrize(
    "shape,name",
    [
        ((1, 151936, 1024), "m1_n8_k1024_w4"),  # lm_head: 8 rows x 1024 per program, 18992 programs
        ((1, 6144, 1024), "m1_n4_k1024_w4"),  # gate + up fused
        ((1, 4096, 1024), "m1_n4_k1024_w4"),  # q + k + v fused
        ((1, 1024, 1024), "m1_n1_k1024_w2"),  # k_proj alone: one row per program, 1024 programs
        ((1, 1024, 3072), "m1_n1_k4096_w4"),  # down_proj: the whole row in one chunk
        ((3, N_ODD, K_ODD), "m4_n1_k512_w4"),
        ((GEMV_MAX_M, 151936, 1024), "m16_n8_k64_w4"),
    ],
)
def test_gemv_config_choices(shape, name):
    assert gemv_config(*shape).name == name


@settings(max_examples=200, deadline=None, derandomize=True)
@given(M=st.integers(1, GEMV_MAX_M), N=st.integers(1, 300_000), K=st.integers(1, 20_000))
def test_gemv_config_rules(M, N, K):
    c = gemv_config(M, N, K)  # also validated by GemvConfig itself
    assert c.block_m >= M > c.block_m // 2
    assert c.block_m * c.block_n * c.block_k <= TILE_ELEMENTS
    assert c.block_k <= max(16, 2 * K)  # no chunk longer than K needs
    assert c.block_n == 1 or -(-N // c.block_n) >= MIN_PROGRAMS  # enough programs, or one row each


def test_gemv_config_asks_for_fewer_programs_in_the_interpreter():
    """The interpreter runs programs one after another: the lm_head of the tiny CPU model gets 4, not 512."""
    assert gemv_config(1, 512, 64).block_n == 1  # 512 programs on a GPU
    assert -(-512 // gemv_config(1, 512, 64, min_programs=4).block_n) == 4


# ------------------------------------------------------------------------------------------------
# modules


def make_linear(in_features, out_features, bias, dtype, device, seed) -> torch.nn.Linear:
    lin = torch.nn.Linear(in_features, out_features, bias=bias, device=device, dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(randn(out_features, in_features, seed=seed))
        if bias:
            lin.bias.copy_(randn(out_features, seed=seed + 100))
    return lin


# Qwen3-0.6B's ratios scaled down: q, k, v produce 2x, 1x, 1x the hidden size (2048, 1024, 1024 on a
# hidden size of 1024 there), gate and up 3x each (3072); the hidden size is 21 here, odd on purpose.
HIDDEN = 21
GROUPS = {"qkv": (2 * HIDDEN, HIDDEN, HIDDEN), "gate_up": (3 * HIDDEN, 3 * HIDDEN)}


def snapshot(linears):
    """What must not change: the Parameter objects, where their data lives, and its values."""
    return [(lin.weight, lin.weight.data_ptr(), lin.weight.detach().clone(), lin.bias) for lin in linears]


@pytest.mark.parametrize("group", list(GROUPS))
@pytest.mark.parametrize("x_shape", [(1, 1, HIDDEN), (2, 3, HIDDEN), (2, 9, HIDDEN)])  # M = 1, 6, 18
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_linear_equals_separate_linears(group, x_shape, dtype, device):
    linears = [make_linear(HIDDEN, n, False, dtype, device, seed=i) for i, n in enumerate(GROUPS[group])]
    before = snapshot(linears)
    fused = FusedLinear.from_linears(*linears)
    x = randn(*x_shape, dtype=dtype, device=device, seed=7)
    with count_launches() as launches, torch.no_grad():
        outs = fused(x)
    M = x[..., 0].numel()
    assert dict(launches) == ({"gemv_kernel": 1} if M <= GEMV_MAX_M else {"matmul_kernel": 1})
    assert isinstance(outs, tuple) and len(outs) == len(linears)
    with torch.no_grad():
        for out, lin in zip(outs, linears):  # in the original order
            assert out.shape == (*x_shape[:-1], lin.out_features)
            assert out.untyped_storage().data_ptr() == outs[0].untyped_storage().data_ptr()  # views of one result
            assert_close(out, linear_ref(x, lin.weight), dtype)
            torch.testing.assert_close(out, lin(x), **TOL[dtype])
    for lin, (weight, ptr, values, bias) in zip(linears, before):  # the originals are untouched
        assert lin.weight is weight and lin.weight.data_ptr() == ptr and torch.equal(lin.weight, values)
        assert lin.bias is bias


@pytest.mark.parametrize("biases", [(True, True), (True, False)])
def test_fused_linear_bias(biases, device):
    """Biases are concatenated too; a layer without one contributes zeros."""
    linears = [make_linear(HIDDEN, n, b, torch.float32, device, seed=n) for n, b in zip((40, 23), biases)]
    fused = FusedLinear.from_linears(*linears)
    x = randn(3, HIDDEN, device=device, seed=7)
    with torch.no_grad():
        for out, lin in zip(fused(x), linears):
            assert_close(out, linear_ref(x, lin.weight, lin.bias), torch.float32)


def test_fused_linear_holds_one_copy(device):
    """The concatenated weight is made once: a buffer, not a Parameter, not in the state_dict, and
    the same tensor on every call; changing it leaves the originals alone."""
    linears = [make_linear(HIDDEN, n, True, torch.float32, device, seed=i) for i, n in enumerate((8, 4, 4))]
    fused = FusedLinear.from_linears(*linears)
    assert fused.weight.shape == (16, HIDDEN) and fused.bias.shape == (16,)
    assert fused.out_features == (8, 4, 4) and fused.in_features == HIDDEN
    assert not fused.weight.requires_grad and list(fused.parameters()) == [] and fused.state_dict() == {}
    assert "out_features=(8, 4, 4)" in repr(fused)
    ptr = fused.weight.data_ptr()
    x = randn(1, HIDDEN, device=device)
    fused(x)
    fused(x)
    assert fused.weight.data_ptr() == ptr
    original = linears[0].weight.detach().clone()
    with torch.no_grad():
        fused.weight.zero_()
    assert torch.equal(linears[0].weight, original)
    assert fused.half().weight.dtype == torch.float16  # buffers follow .to()


@pytest.mark.parametrize("x_shape", [(HIDDEN,), (1, 1, HIDDEN), (2, 9, HIDDEN)])  # M = 1, 1, 18
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gemv_linear_module(x_shape, bias, dtype, device):
    lin = make_linear(HIDDEN, 37, bias, dtype, device, seed=3)
    wrapped = GemvLinear.from_linear(lin)
    assert wrapped.weight is lin.weight and wrapped.bias is lin.bias
    assert (wrapped.in_features, wrapped.out_features) == (HIDDEN, 37)
    assert f"bias={bias}" in repr(wrapped)
    x = randn(*x_shape, dtype=dtype, device=device, seed=7)
    with count_launches() as launches, torch.no_grad():
        y = wrapped(x)
    M = x[..., 0].numel()
    assert dict(launches) == ({"gemv_kernel": 1} if M <= GEMV_MAX_M else {"matmul_kernel": 1})
    assert y.shape == (*x_shape[:-1], 37)
    with torch.no_grad():
        assert_close(y, linear_ref(x, lin.weight, lin.bias), dtype)


# ------------------------------------------------------------------------------------------------
# errors: the documented type, and a message that names the argument


def _error_cases(d):
    x, w, b = randn(2, 32, device=d), randn(24, 32, device=d), randn(24, device=d)
    meta = torch.empty(24, 32, device="meta")
    lin, lin16 = make_linear(32, 8, False, torch.float32, d, 0), make_linear(32, 8, False, torch.float16, d, 0)
    relu = torch.nn.ReLU()
    return {
        "x_not_a_tensor": (lambda: gemv([1.0], w), TypeError, r"^x must be a torch.Tensor"),
        "x_int": (lambda: gemv(x.int(), w), TypeError, r"^x must be float16 or float32"),
        "x_bfloat16": (lambda: gemv(x.bfloat16(), w.bfloat16()), TypeError, r"^x is bfloat16.*T4"),
        "x_scalar": (lambda: gemv(x[0, 0], w), ValueError, r"^x must have at least 1 dim"),
        "w_rank": (lambda: gemv(x, w[0]), ValueError, r"^w must have 2 dims"),
        "w_dtype": (lambda: gemv(x, w.half()), TypeError, r"^w must have the dtype of x"),
        "w_device": (lambda: gemv(x, meta), ValueError, r"^w must be a CUDA tensor"),
        "k_mismatch": (lambda: gemv(x, w[:, :31]), ValueError, r"^x must have a last dim of K = w.shape\[1\] = 31"),
        "w_transposed": (lambda: gemv(x, w.t().contiguous().t()), ValueError, r"^w must have a contiguous last dim"),
        "w_empty": (lambda: gemv(x[:, :0], w[:, :0]), ValueError, r"^w must have at least one row and one column"),
        "m_above_limit": (
            lambda: gemv(randn(GEMV_MAX_M + 1, 32, device=d), w),
            ValueError,
            rf"^x must have between 1 and {GEMV_MAX_M} rows.*got {GEMV_MAX_M + 1}: use slower_kernels.matmul",
        ),
        "m_above_limit_leading_dims": (lambda: gemv(randn(3, 6, 32, device=d), w), ValueError, r"^x must .* got 18"),
        "m_zero": (lambda: gemv(x[:0], w), ValueError, r"^x must have between 1 and"),
        "bias_shape": (lambda: gemv(x, w, b[:23]), ValueError, r"^bias must have shape \[N\]"),
        "bias_rank": (lambda: gemv(x, w, b[None]), ValueError, r"^bias must have 1 dims"),
        "bias_dtype": (lambda: gemv(x, w, b.half()), TypeError, r"^bias must have the dtype of x"),
        "config_type": (lambda: gemv(x, w, config="m1"), TypeError, r"^config must be a GemvConfig"),
        "config_block_m": (lambda: gemv(randn(3, 32, device=d), w, config=GemvConfig(2, 8, 32, 1)), ValueError,
                           r"^config.block_m must be at least M = 3"),  # fmt: skip
        "block_n_3": (lambda: GemvConfig(1, 3, 64, 4), ValueError, r"^block_n must be a power of two"),
        "block_k_8": (lambda: GemvConfig(1, 1, 8, 4), ValueError, r"^block_k must be a power of two"),
        "block_m_32": (lambda: GemvConfig(32, 1, 64, 4), ValueError, r"^block_m must be a power of two .* and 16"),
        "num_warps_str": (lambda: GemvConfig(1, 1, 64, "4"), TypeError, r"^num_warps must be an int"),
        "tile_too_big": (lambda: GemvConfig(16, 64, 64, 4), ValueError, r"^block_m \* block_n \* block_k must be at"),
        "fused_none": (lambda: FusedLinear.from_linears(), ValueError, r"^from_linears needs at least one"),
        "fused_not_linear": (lambda: FusedLinear.from_linears(lin, relu), TypeError, r"^linears\[1\] must be an nn"),
        "fused_in_features": (
            lambda: FusedLinear.from_linears(lin, make_linear(31, 8, False, torch.float32, d, 1)),
            ValueError,
            r"^linears\[1\] has in_features = 31 but linears\[0\] has 32",
        ),
        "fused_dtype": (lambda: FusedLinear.from_linears(lin, lin16), TypeError, r"^linears\[1\].weight must have the"),
        "fused_out_features": (lambda: FusedLinear(w, None, (8, 8)), ValueError, r"^weight must have shape"),
        "fused_out_features_int": (lambda: FusedLinear(w, None, (24.0,)), ValueError, r"^out_features must be"),
        "fused_bias_shape": (lambda: FusedLinear(w, b[:8], (16, 8)), ValueError, r"^bias must have shape"),
        "fused_x_k": (lambda: FusedLinear.from_linears(lin)(x[:, :31]), ValueError, r"^x must have a last dim of K"),
        "gemv_linear_not_linear": (lambda: GemvLinear.from_linear(relu), TypeError, r"^lin must be an nn.Linear"),
    }


@pytest.mark.parametrize("case", list(_error_cases("cpu")))
def test_errors(case, device):
    fn, error, match = _error_cases(device)[case]
    with pytest.raises(error, match=match):
        fn()
