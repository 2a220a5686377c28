"""slower_kernels/: each kernel against a float64 reference on fresh seeded random inputs.

Runs on a GPU, or on the CPU through Triton's interpreter (sizes are kept small for it).
"""

import importlib

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

import slower_kernels
from slower_kernels import (
    DEFAULT_TILE,
    TILE_CONFIGS,
    TritonLinear,
    TritonRMSNorm,
    add,
    attention_slow,
    attention_torch_ops,
    count_launches,
    linear,
    matmul,
    rmsnorm_fused,
    rmsnorm_two_pass,
    softmax,
)

# Triton 3.6's interpreter turns 1-element arrays into Python ints, which NumPy >= 1.25 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

DTYPES = [torch.float32, torch.float16]
# The one tolerance table: outputs are compared with a float64 reference computed from the same inputs.
TOL = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.float16: dict(atol=1e-2, rtol=1e-2),
}
RMSNORMS = {"fused": rmsnorm_fused, "two_pass": rmsnorm_two_pass}
ATTENTIONS = {"slow": attention_slow, "torch_ops": attention_torch_ops}
HYPOTHESIS = settings(max_examples=12, deadline=None, derandomize=True)


def randn(*shape, dtype=torch.float32, device="cpu", seed=0) -> torch.Tensor:
    """Seeded standard-normal values, drawn on the CPU so that every device sees the same numbers."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    """out has the input dtype and matches the float64 reference within TOL[dtype]."""
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref.double(), **TOL[dtype])


# ------------------------------------------------------------------------------------------------
# add


@pytest.mark.parametrize("shape", [(1,), (7,), (127,), (1000,), (1023,), (1024,), (4097,), (3, 5, 7)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add(shape, dtype, device):
    x, y = randn(*shape, dtype=dtype, device=device), randn(*shape, dtype=dtype, device=device, seed=1)
    out = add(x, y)
    assert out.shape == x.shape
    assert_close(out, x.double() + y.double(), dtype)


def test_add_non_contiguous(device):
    x = randn(48, 64, device=device).t()  # (64, 48), transposed
    y = randn(64, 96, device=device, seed=1)[:, ::2]  # (64, 48), every other column
    assert_close(add(x, y), x.double() + y.double(), torch.float32)


@HYPOTHESIS
@given(n=st.integers(1, 5000), dtype=st.sampled_from(DTYPES))
def test_add_property(n, dtype, device):
    x, y = randn(n, dtype=dtype, device=device, seed=n), randn(n, dtype=dtype, device=device, seed=n + 1)
    assert_close(add(x, y), x.double() + y.double(), dtype)


# ------------------------------------------------------------------------------------------------
# RMSNorm, against transformers' Qwen3RMSNorm itself and a float64 reference


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """float64 RMSNorm; reads x once, writes y once."""
    x = x.double()
    return weight.double() * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def qwen3_norm(hidden: int, eps: float, dtype, device, seed=2) -> Qwen3RMSNorm:
    norm = Qwen3RMSNorm(hidden, eps=eps).to(device=device, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(randn(hidden, seed=seed))
    return norm


@pytest.mark.parametrize("mode", list(RMSNORMS))
@pytest.mark.parametrize("shape", [(1, 16), (7, 127), (3, 5, 128), (4, 1000), (2, 1024), (1023,)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_matches_qwen3(mode, shape, dtype, device):
    norm = qwen3_norm(shape[-1], 1e-6, dtype, device)
    x = randn(*shape, dtype=dtype, device=device)
    with torch.no_grad():
        out = RMSNORMS[mode](x, norm.weight, norm.variance_epsilon)
        assert_close(out, rmsnorm_ref(x, norm.weight, norm.variance_epsilon), dtype)
        torch.testing.assert_close(out, norm(x), **TOL[dtype])


@pytest.mark.parametrize("mode", list(RMSNORMS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_eps_matters(mode, dtype, device):
    """Small activations: eps changes the result, so a kernel that drops or misplaces it fails."""
    norm = qwen3_norm(96, 1e-2, dtype, device)
    x = 0.1 * randn(5, 96, dtype=dtype, device=device)
    with torch.no_grad():
        torch.testing.assert_close(RMSNORMS[mode](x, norm.weight, 1e-2), norm(x), **TOL[dtype])


@pytest.mark.parametrize("mode", list(RMSNORMS))
def test_rmsnorm_rounds_like_qwen3(mode, device):
    """fp16: normalise in fp32, cast, THEN multiply by the weight in fp16, as Qwen3RMSNorm does.

    Multiplying in fp32 before the cast stays within tolerance but differs from HF in the last
    bit on about a quarter of the elements; HF's order matches on (nearly) all of them.
    """
    norm = qwen3_norm(1024, 1e-6, torch.float16, device)
    x = randn(32, 1024, dtype=torch.float16, device=device)
    with torch.no_grad():
        same = (RMSNORMS[mode](x, norm.weight, norm.variance_epsilon) == norm(x)).float().mean().item()
    assert same > 0.99, f"only {same:.1%} of the elements equal Qwen3RMSNorm's"


NON_CONTIGUOUS_ROWS = {
    "row_stride": lambda t: t[:, :100],  # rows of 100 inside rows of 256: stride_xm != n_cols
    "column_step": lambda t: t[:, ::2],  # last dim with stride 2: copied to unit stride
    "transposed_rows": lambda t: t.view(4, 3, 256).transpose(0, 1),  # leading dims permuted
}


@pytest.mark.parametrize("mode", list(RMSNORMS))
@pytest.mark.parametrize("view", list(NON_CONTIGUOUS_ROWS))
def test_rmsnorm_non_contiguous(mode, view, device):
    x = NON_CONTIGUOUS_ROWS[view](randn(12, 256, device=device))
    w = randn(x.shape[-1], device=device, seed=1)
    out = RMSNORMS[mode](x, w, 1e-6)
    assert out.shape == x.shape
    assert_close(out, rmsnorm_ref(x, w, 1e-6), torch.float32)


@HYPOTHESIS
@given(rows=st.integers(1, 8), hidden=st.integers(1, 300), mode=st.sampled_from(list(RMSNORMS)))
def test_rmsnorm_property(rows, hidden, mode, device):
    x = randn(rows, hidden, device=device, seed=hidden)
    w = randn(hidden, device=device, seed=hidden + 1)
    assert_close(RMSNORMS[mode](x, w, 1e-6), rmsnorm_ref(x, w, 1e-6), torch.float32)


# ------------------------------------------------------------------------------------------------
# matmul and linear


MATMUL_SHAPES = [  # (M, K, N)
    (1, 64, 64),  # decode: one row
    (1, 1, 1),
    (7, 40, 1),  # N = 1, K not a multiple of block_k
    (16, 16, 16),
    (33, 100, 65),
    (127, 77, 31),
    (64, 128, 96),
]


@pytest.mark.parametrize("M,K,N", MATMUL_SHAPES)
@pytest.mark.parametrize("tile", ["m16_n16_k16", "m64_n64_k32"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul(M, K, N, tile, dtype, device):
    a, b = randn(M, K, dtype=dtype, device=device), randn(K, N, dtype=dtype, device=device, seed=1)
    out = matmul(a, b, **TILE_CONFIGS[tile].kwargs())
    assert out.shape == (M, N)
    assert_close(out, a.double() @ b.double(), dtype)


@pytest.mark.parametrize("tile", list(TILE_CONFIGS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matmul_every_tile_config(tile, dtype, device):
    a, b = randn(37, 70, dtype=dtype, device=device), randn(70, 45, dtype=dtype, device=device, seed=1)
    assert_close(matmul(a, b, **TILE_CONFIGS[tile].kwargs()), a.double() @ b.double(), dtype)


STRIDED_OPERANDS = {  # (a [M, K], b [K, N]) built as views with unusual strides
    "a_transposed": lambda d: (randn(50, 20, device=d).t(), randn(50, 30, device=d, seed=1)),
    "b_transposed": lambda d: (randn(20, 50, device=d), randn(30, 50, device=d, seed=1).t()),
    "both_sliced": lambda d: (randn(20, 100, device=d)[:, ::2], randn(60, 90, device=d, seed=1)[10:60, 5:35]),
}


@pytest.mark.parametrize("layout", list(STRIDED_OPERANDS))
def test_matmul_non_contiguous(layout, device):
    a, b = STRIDED_OPERANDS[layout](device)
    assert not (a.is_contiguous() and b.is_contiguous())
    assert_close(matmul(a, b, block_m=16, block_n=32, block_k=16), a.double() @ b.double(), torch.float32)


@HYPOTHESIS
@given(
    M=st.integers(1, 70),
    K=st.integers(1, 70),
    N=st.integers(1, 70),
    tile=st.sampled_from(list(TILE_CONFIGS)),
    dtype=st.sampled_from(DTYPES),
)
def test_matmul_property(M, K, N, tile, dtype, device):
    a, b = randn(M, K, dtype=dtype, device=device), randn(K, N, dtype=dtype, device=device, seed=1)
    assert_close(matmul(a, b, **TILE_CONFIGS[tile].kwargs()), a.double() @ b.double(), dtype)


@pytest.mark.parametrize("x_shape", [(48,), (5, 48), (2, 3, 48)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear(x_shape, bias, dtype, device):
    x = randn(*x_shape, dtype=dtype, device=device)
    w = randn(24, 48, dtype=dtype, device=device, seed=1)
    b = randn(24, dtype=dtype, device=device, seed=2) if bias else None
    out = linear(x, w, b, **DEFAULT_TILE.kwargs())
    assert out.shape == (*x_shape[:-1], 24)
    assert_close(out, F.linear(x.double(), w.double(), None if b is None else b.double()), dtype)


def test_linear_non_contiguous_x(device):
    x = randn(3, 2, 48, device=device).transpose(0, 1)  # (2, 3, 48): leading dims cannot be viewed flat
    w = randn(24, 48, device=device, seed=1)
    out = linear(x, w, block_m=16, block_n=16, block_k=16)
    assert_close(out, F.linear(x.double(), w.double()), torch.float32)


def test_linear_passes_weight_transposed_without_copy(monkeypatch, device):
    seen = {}

    def spy(a, b, **tiles):
        seen.update(ptr=b.data_ptr(), stride=b.stride())
        return matmul(a, b, **tiles)

    # slower_kernels.matmul is the function; the module is reached through importlib
    monkeypatch.setattr(importlib.import_module("slower_kernels.matmul"), "matmul", spy)
    w = randn(24, 48, device=device, seed=1)
    linear(randn(5, 48, device=device), w)
    assert seen == dict(ptr=w.data_ptr(), stride=(1, 48))


# ------------------------------------------------------------------------------------------------
# softmax


def softmax_ref(x: torch.Tensor, scale: float) -> torch.Tensor:
    """float64 softmax(scale * x); fully masked rows give zeros (torch gives NaN there)."""
    return torch.softmax(x.double() * scale, dim=-1).nan_to_num(0.0)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 127), (3, 5, 100), (2, 1024), (4, 1023), (1000,)])
@pytest.mark.parametrize("scale", [1.0, 0.125])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax(shape, scale, dtype, device):
    x = 3 * randn(*shape, dtype=dtype, device=device)
    out = softmax(x, scale=scale)
    assert out.shape == x.shape
    assert_close(out, softmax_ref(x, scale), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_masked_rows(dtype, device):
    x = randn(4, 37, dtype=dtype, device=device)
    x[0] = float("-inf")  # fully masked: zeros, no NaN
    x[1, 5:] = float("-inf")  # partly masked
    x[2, ::3] = float("-inf")
    out = softmax(x, scale=0.5)
    assert torch.isfinite(out).all()
    assert (out[0] == 0).all()
    assert_close(out, softmax_ref(x, 0.5), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_large_values(dtype, device):
    """Scores of a few hundred: exp() overflows unless the row max is subtracted first."""
    x = 100 * randn(3, 50, dtype=dtype, device=device)
    assert_close(softmax(x), softmax_ref(x, 1.0), dtype)


@pytest.mark.parametrize("view", ["transposed", "sliced"])
def test_softmax_non_contiguous(view, device):
    base = randn(64, 40, device=device)
    x = base.t() if view == "transposed" else base[:, 3:30]
    assert_close(softmax(x), softmax_ref(x, 1.0), torch.float32)


@HYPOTHESIS
@given(rows=st.integers(1, 8), n=st.integers(1, 600), scale=st.floats(0.05, 4.0))
def test_softmax_property(rows, n, scale, device):
    x = randn(rows, n, device=device, seed=n)
    assert_close(softmax(x, scale=scale), softmax_ref(x, scale), torch.float32)


# ------------------------------------------------------------------------------------------------
# attention


ATTENTION_CASES = {  # B, Hq, Hkv, S, T, D, causal
    "mha_prefill": (2, 2, 2, 8, 8, 16, True),
    "gqa_prefill": (1, 4, 2, 9, 9, 64, True),
    "gqa_decode": (2, 4, 2, 1, 33, 128, True),
    "mqa_chunk_odd_head_dim": (1, 4, 1, 5, 17, 40, True),
    "gqa_not_causal": (1, 4, 2, 7, 12, 64, False),
}


def make_qkv(B, Hq, Hkv, S, T, D, dtype, device):
    q = randn(B, Hq, S, D, dtype=dtype, device=device)
    k = randn(B, Hkv, T, D, dtype=dtype, device=device, seed=1)
    v = randn(B, Hkv, T, D, dtype=dtype, device=device, seed=2)
    return q, k, v


def make_mask(kind, B, S, T, device):
    """None, a bool mask (True = attend) or an additive mask in the style of transformers, [B, 1, S, T].

    The diagonal key i + T - S is always attended, so that no query row is fully masked.
    """
    if kind is None:
        return None
    keep = randn(B, 1, S, T, seed=3) > 0
    keep[..., torch.arange(S), torch.arange(S) + T - S] = True
    keep = keep.to(device)
    if kind == "bool":
        return keep
    additive = 0.5 * randn(B, 1, S, T, device=device, seed=4)
    return additive.masked_fill(~keep, torch.finfo(torch.float32).min)


def attention_ref(q, k, v, scale, causal, attn_mask):
    """float64 reference through PyTorch's scaled_dot_product_attention, with the causal mask
    aligned to the end (query i sees keys j <= i + T - S), unlike SDPA's is_causal."""
    S, T = q.shape[2], k.shape[2]
    mask = torch.zeros(S, T, dtype=torch.float64, device=q.device)
    if causal:
        visible = torch.ones(S, T, dtype=torch.bool, device=q.device).tril(T - S)
        mask = mask.masked_fill(~visible, float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        mask = mask.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        mask = mask + attn_mask.double()
    return F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), attn_mask=mask, scale=scale, enable_gqa=True
    )


@pytest.mark.parametrize("impl", list(ATTENTIONS))
@pytest.mark.parametrize("mask", [None, "bool", "additive"])
@pytest.mark.parametrize("case", list(ATTENTION_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention(impl, mask, case, dtype, device):
    B, Hq, Hkv, S, T, D, causal = ATTENTION_CASES[case]
    q, k, v = make_qkv(B, Hq, Hkv, S, T, D, dtype, device)
    attn_mask = make_mask(mask, B, S, T, device)
    out = ATTENTIONS[impl](q, k, v, D**-0.5, causal, attn_mask)
    assert out.shape == (B, Hq, S, D)
    assert_close(out, attention_ref(q, k, v, D**-0.5, causal, attn_mask), dtype)


def test_attention_slow_strided_inputs(device):
    """q, k, v as transformers hands them over: [B, S, H, D] buffers viewed as [B, H, S, D]."""
    q = randn(1, 6, 4, 16, device=device).transpose(1, 2)
    k = randn(1, 10, 2, 16, device=device, seed=1).transpose(1, 2)
    v = randn(1, 10, 2, 16, device=device, seed=2).transpose(1, 2)
    out = attention_slow(q, k, v, 0.25, True)
    assert_close(out, attention_ref(q, k, v, 0.25, True, None), torch.float32)


def test_attention_slow_fully_masked_row_gives_zeros(device):
    q, k, v = make_qkv(1, 2, 2, 3, 5, 16, torch.float32, device)
    keep = torch.ones(1, 1, 3, 5, dtype=torch.bool, device=device)
    keep[..., 1, :] = False
    out = attention_slow(q, k, v, 0.25, False, keep)
    assert (out[:, :, 1] == 0).all() and torch.isfinite(out).all()


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    B=st.integers(1, 2),
    Hkv=st.integers(1, 2),
    group=st.integers(1, 2),
    S=st.integers(1, 6),
    extra=st.integers(0, 20),
    D=st.sampled_from([16, 40, 64]),
    causal=st.booleans(),
)
def test_attention_slow_property(B, Hkv, group, S, extra, D, causal, device):
    q, k, v = make_qkv(B, Hkv * group, Hkv, S, S + extra, D, torch.float32, device)
    out = attention_slow(q, k, v, D**-0.5, causal)
    assert_close(out, attention_ref(q, k, v, D**-0.5, causal, None), torch.float32)


# ------------------------------------------------------------------------------------------------
# launch counts


def _launch_cases(d):
    x, w = randn(4, 32, device=d), randn(32, device=d)
    q, k, v = make_qkv(2, 4, 2, 3, 6, 16, torch.float32, d)
    return {
        "add": (lambda: add(x, x), {"add_kernel": 1}),
        "rmsnorm_fused": (lambda: rmsnorm_fused(x, w), {"rmsnorm_fused_kernel": 1}),
        "rmsnorm_two_pass": (
            lambda: rmsnorm_two_pass(x, w),
            {"rmsnorm_inv_rms_kernel": 1, "rmsnorm_scale_kernel": 1},
        ),
        "matmul": (lambda: matmul(x, x.t()), {"matmul_kernel": 1}),
        "linear": (lambda: linear(x, x), {"matmul_kernel": 1}),
        "softmax": (lambda: softmax(x), {"softmax_kernel": 1}),
        # 3 launches per (batch, head): B * Hq = 2 * 4 heads
        "attention_slow": (lambda: attention_slow(q, k, v, 0.25, True), {"matmul_kernel": 16, "softmax_kernel": 8}),
        "attention_torch_ops": (lambda: attention_torch_ops(q, k, v, 0.25, True), {}),
    }


@pytest.mark.parametrize("name", list(_launch_cases("cpu")))
def test_launch_counts(name, device):
    fn, expected = _launch_cases(device)[name]
    with count_launches() as launches:
        fn()
    assert dict(launches) == expected


def test_count_launches_nests(device):
    x, w = randn(4, 32, device=device), randn(32, device=device)
    with count_launches() as outer:
        rmsnorm_fused(x, w)
        with count_launches() as inner:
            rmsnorm_two_pass(x, w)
        rmsnorm_fused(x, w)
    rmsnorm_fused(x, w)  # outside both blocks: not counted
    assert dict(inner) == {"rmsnorm_inv_rms_kernel": 1, "rmsnorm_scale_kernel": 1}
    assert dict(outer) == {"rmsnorm_fused_kernel": 2, "rmsnorm_inv_rms_kernel": 1, "rmsnorm_scale_kernel": 1}


# ------------------------------------------------------------------------------------------------
# modules


@pytest.mark.parametrize("mode", list(RMSNORMS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_triton_rmsnorm_module(mode, dtype, device):
    hf = qwen3_norm(64, 1e-5, dtype, device)
    norm = TritonRMSNorm.from_hf(hf, mode=mode)
    assert norm.weight is hf.weight and norm.eps == hf.variance_epsilon and norm.mode == mode
    assert f"mode={mode}" in repr(norm)
    assert len(list(norm.parameters())) == 1 and next(norm.parameters()) is hf.weight
    x = randn(2, 3, 64, dtype=dtype, device=device)
    with torch.no_grad():
        torch.testing.assert_close(norm(x), hf(x), **TOL[dtype])
        hf.weight.mul_(2)  # the Parameter is shared: the wrapper sees the change
        torch.testing.assert_close(norm(x), hf(x), **TOL[dtype])


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("tile", ["m16_n64_k32", DEFAULT_TILE])
def test_triton_linear_module(bias, tile, device):
    lin = torch.nn.Linear(40, 24, bias=bias).to(device)
    wrapped = TritonLinear.from_linear(lin, tile=tile)
    assert wrapped.weight is lin.weight and wrapped.bias is lin.bias
    assert (wrapped.in_features, wrapped.out_features) == (40, 24)
    assert wrapped.tile == (TILE_CONFIGS[tile] if isinstance(tile, str) else tile)
    x = randn(2, 5, 40, device=device)
    with torch.no_grad():
        ref = F.linear(x.double(), lin.weight.double(), None if lin.bias is None else lin.bias.double())
        assert_close(wrapped(x), ref, torch.float32)


# ------------------------------------------------------------------------------------------------
# errors: the documented type, and a message that names the argument


def _error_cases(d):
    x, w = randn(4, 32, device=d), randn(32, device=d)
    a, b = randn(8, 16, device=d), randn(16, 8, device=d)
    q, k, v = make_qkv(1, 3, 2, 4, 4, 16, torch.float32, d)
    q4, k4, v4 = make_qkv(1, 4, 2, 4, 4, 16, torch.float32, d)
    meta = torch.empty(4, 32, device="meta")
    return {
        "not_a_tensor": (lambda: add([1.0], x), TypeError, r"^x must be a torch.Tensor"),
        "meta_device": (lambda: add(meta, meta), ValueError, r"^x must be a CUDA tensor"),
        "weight_on_meta": (lambda: rmsnorm_fused(x, meta[0]), ValueError, r"^weight must be a CUDA tensor"),
        "int_dtype": (lambda: add(x.int(), x.int()), TypeError, r"^x must be float16 or float32"),
        "float64": (lambda: softmax(x.double()), TypeError, r"^x must be float16 or float32"),
        "bfloat16": (lambda: rmsnorm_fused(x.bfloat16(), w.bfloat16()), TypeError, r"^x is bfloat16.*T4.*interpreter"),
        "dtype_mismatch": (lambda: matmul(a, b.half()), TypeError, r"^b must have the dtype of a"),
        "add_shapes": (lambda: add(x, x[:, :31]), ValueError, r"^y must have shape"),
        "matmul_rank": (lambda: matmul(a[None], b), ValueError, r"^a must have 2 dims"),
        "matmul_inner_dim": (lambda: matmul(a, b[:15]), ValueError, r"^b must have shape"),
        "block_m_8": (lambda: matmul(a, b, block_m=8), ValueError, r"^block_m must be a power of two"),
        "block_m_48": (lambda: matmul(a, b, block_m=48), ValueError, r"^block_m must be a power of two"),
        "block_n_512": (lambda: matmul(a, b, block_n=512), ValueError, r"^block_n must be a power of two"),
        "block_k_str": (lambda: matmul(a, b, block_k="32"), TypeError, r"^block_k must be an int"),
        "num_warps_3": (lambda: matmul(a, b, num_warps=3), ValueError, r"^num_warps must be a power of two"),
        "rmsnorm_weight_shape": (lambda: rmsnorm_two_pass(x, w[:31]), ValueError, r"^weight must have shape"),
        "rmsnorm_eps": (lambda: rmsnorm_fused(x, w, eps="1e-6"), TypeError, r"^eps must be a float"),
        "row_too_long": (lambda: softmax(randn(1, 70000, device=d)), ValueError, r"^x must have a last dim"),
        "softmax_scale": (lambda: softmax(x, scale=None), TypeError, r"^scale must be a float"),
        "linear_in_features": (lambda: linear(x, w[None, :31]), ValueError, r"^x must have a last dim"),
        "linear_bias_shape": (lambda: linear(x, x, bias=w), ValueError, r"^bias must have shape"),
        "attention_q_rank": (lambda: attention_slow(q[0], k, v, 1.0, True), ValueError, r"^q must have 4 dims"),
        "attention_heads": (lambda: attention_slow(q, k, v, 1.0, True), ValueError, r"^k has 2 heads.*Hq % Hkv"),
        "attention_v_shape": (
            lambda: attention_torch_ops(q4, k4, v4[..., :8], 1.0, True),
            ValueError,
            r"^v must have shape",
        ),
        "attention_mask_shape": (
            lambda: attention_slow(q4, k4, v4, 1.0, True, torch.ones(3, 4, dtype=torch.bool, device=d)),
            ValueError,
            r"^attn_mask must broadcast",
        ),
        "attention_mask_dtype": (
            lambda: attention_slow(q4, k4, v4, 1.0, True, torch.ones(4, 4, dtype=torch.int64, device=d)),
            TypeError,
            r"^attn_mask must be bool",
        ),
        "rmsnorm_module_mode": (lambda: TritonRMSNorm(torch.nn.Parameter(w), mode="fast"), ValueError, r"^mode"),
        "linear_module_tile": (lambda: TritonLinear(torch.nn.Parameter(a), tile="m8"), ValueError, r"^tile"),
    }


@pytest.mark.parametrize("case", list(_error_cases("cpu")))
def test_errors(case, device):
    fn, error, match = _error_cases(device)[case]
    with pytest.raises(error, match=match):
        fn()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="on a GPU, a CPU tensor is the wrong device")
def test_error_cpu_tensor_on_gpu():
    if slower_kernels.INTERPRET:
        pytest.skip("TRITON_INTERPRET=1 accepts CPU tensors")
    x = randn(4, 32)
    with pytest.raises(ValueError, match=r"^x must be a CUDA tensor"):
        add(x, x)


# --- The empty kernel (chapter 2's launch price) ------------------------------------------------
def test_empty_launches_one_kernel_and_changes_nothing(device):
    x = torch.randn(7, device=device, dtype=torch.float16)
    before = x.clone()
    with count_launches() as launches:
        assert slower_kernels.empty(x) is None
    assert launches == {"empty_kernel": 1}
    assert torch.equal(x, before)


def test_empty_rejects_what_it_cannot_launch_on():
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        slower_kernels.empty([1.0])
    with pytest.raises(TypeError, match="x must be float16 or float32"):
        slower_kernels.empty(torch.zeros(3, dtype=torch.int32))
