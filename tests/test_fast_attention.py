"""slower_kernels/fast_attention.py: decode attention (flash-decoding) and prefill (flash-attention), against
PyTorch's scaled_dot_product_attention in float64 on fresh seeded random inputs.

Runs on a GPU, or on the CPU through Triton's interpreter: big key counts use a small head dim and
few heads to keep the interpreter fast.
"""

import pytest
import torch
import triton
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels import DTYPES, TOL, assert_close, attention_ref, make_qkv, randn

from slower_kernels.fast_attention import (
    BLOCK_H,
    MAX_SPLITS,
    decode_attention,
    decode_meta,
    decode_num_splits,
    prefill_attention,
    prefill_meta,
    target_programs,
)
from slower_kernels.launches import count_launches

# Triton 3.6's interpreter turns 1-element arrays into Python ints, which NumPy >= 1.25 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")

UNSPLIT = {"decode_attention_kernel": 1}
SPLIT = {"decode_attention_kernel": 1, "decode_combine_kernel": 1}
PREFILL = {"prefill_attention_kernel": 1}


def decode_ref(q, k, v, scale=None, kv_len=None):
    """float64 SDPA over the first kv_len keys (the one query is the last position: nothing hidden)."""
    T = k.shape[2] if kv_len is None else int(kv_len)
    return attention_ref(q, k[:, :, :T], v[:, :, :T], scale, False, None)


# ------------------------------------------------------------------------------------------------
# decode


DECODE_CASES = {  # B, Hq, Hkv, T, D
    "qwen3_one_key": (1, 16, 8, 1, 128),  # Qwen3-0.6B: 16 query heads on 8 kv heads, D = 128
    "qwen3_7_keys": (1, 16, 8, 7, 128),
    "blog_mha_127_keys": (1, 16, 16, 127, 64),  # the blog's [1, 16, 1, 64], multi-head
    "gqa_group_3_odd_dim": (2, 6, 2, 127, 40),  # group of 3, D not a power of two
    "mqa_1031_keys": (1, 4, 1, 1031, 16),  # 1000+ keys: small D and few heads for the interpreter
    "group_of_20": (1, 20, 1, 9, 16),  # more query heads than one program's 16 rows
}
SPLITS = {"unsplit": 1, "split_3": 3, "auto": None}


@pytest.mark.parametrize("splits", list(SPLITS))
@pytest.mark.parametrize("case", list(DECODE_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decode(case, splits, dtype, device):
    B, Hq, Hkv, T, D = DECODE_CASES[case]
    q, k, v = make_qkv(B, Hq, Hkv, 1, T, D, dtype, device)
    num_splits = SPLITS[splits]
    with count_launches() as launches:
        out = decode_attention(q, k, v, num_splits=num_splits)
    assert out.shape == (B, Hq, 1, D) and out.is_contiguous()
    assert_close(out, decode_ref(q, k, v), dtype)
    if num_splits is None:
        num_splits = decode_num_splits(T, B * Hkv * triton.cdiv(Hq // Hkv, BLOCK_H), target_programs(q.device))
    assert dict(launches) == (UNSPLIT if num_splits == 1 else SPLIT)


def test_decode_auto_splits_long_keys(device):
    """1,031 keys on one kv head: the policy splits them (the flash-decoding path, 2 launches)."""
    q, k, v = make_qkv(1, 2, 1, 1, 1031, 16, torch.float32, device)
    assert decode_num_splits(1031, 1) > 1
    with count_launches() as launches:
        out = decode_attention(q, k, v)
    assert dict(launches) == SPLIT
    assert_close(out, decode_ref(q, k, v), torch.float32)


@pytest.mark.parametrize("num_splits", [1, 4])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decode_scale(num_splits, dtype, device):
    """scale=None is 1 / sqrt(D); a custom scale is applied to q . k (large: a peaked softmax)."""
    q, k, v = make_qkv(1, 4, 2, 1, 90, 32, dtype, device)
    default = decode_attention(q, k, v, num_splits=num_splits)
    assert_close(default, decode_ref(q, k, v, 32**-0.5), dtype)
    custom = decode_attention(q, k, v, scale=1.7, num_splits=num_splits)
    assert_close(custom, decode_ref(q, k, v, 1.7), dtype)


def _static_cache(dtype, device, T=200, kv_len=37):
    """q and a KV buffer of T positions, filled up to kv_len; the rest is NaN, which must never be read."""
    q, k, v = make_qkv(1, 4, 2, 1, T, 32, dtype, device)
    k[:, :, kv_len:] = float("nan")
    v[:, :, kv_len:] = float("nan")
    return q, k, v


KV_LENS = {  # how kv_len = 37 is passed
    "int": lambda d: 37,
    "tensor_0d_int64": lambda d: torch.tensor(37, device=d),
    "tensor_1_int32": lambda d: torch.tensor([37], dtype=torch.int32, device=d),
}


@pytest.mark.parametrize("num_splits", [1, 3, 5])
@pytest.mark.parametrize("kind", list(KV_LENS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decode_kv_len(kind, num_splits, dtype, device):
    """Only the first kv_len keys count. A device kv_len leaves splits past it empty (5 splits of
    40 keys: only the first has keys); an int kv_len splits its 37 keys (5 splits of 8)."""
    q, k, v = _static_cache(dtype, device)
    with count_launches() as launches:
        out = decode_attention(q, k, v, kv_len=KV_LENS[kind](device), num_splits=num_splits)
    assert torch.isfinite(out).all()
    assert_close(out, decode_ref(q, k, v, kv_len=37), dtype)
    assert dict(launches) == (UNSPLIT if num_splits == 1 else SPLIT)


@pytest.mark.parametrize("num_splits", [1, 4])
def test_decode_kv_len_read_on_the_device(num_splits, device):
    """The kernel reads the tensor at launch (as a CUDA-graph replay would), and clamps it to [1, T]."""
    q, k, v = make_qkv(1, 2, 1, 1, 50, 16, torch.float32, device)
    kv_len = torch.tensor(20, device=device)
    for value, expected in [(20, 20), (33, 33), (1, 1), (0, 1), (10_000, 50)]:
        kv_len.fill_(value)
        out = decode_attention(q, k, v, kv_len=kv_len, num_splits=num_splits)
        assert_close(out, decode_ref(q, k, v, kv_len=expected), torch.float32)


def test_decode_strided_inputs(device):
    """q, k, v as transformers hands them over ([B, S, H, D] buffers viewed as [B, H, S, D]), and a
    k whose last dim is strided (copied first)."""
    q = randn(2, 1, 4, 32, device=device).transpose(1, 2)
    k = randn(2, 70, 2, 64, device=device, seed=1).transpose(1, 2)[..., ::2]
    v = randn(2, 70, 2, 32, device=device, seed=2).transpose(1, 2)
    assert k.stride(-1) == 2 and not v.is_contiguous()
    for num_splits in (1, 3):
        out = decode_attention(q, k, v, num_splits=num_splits)
        assert out.is_contiguous()
        assert_close(out, decode_ref(q, k, v), torch.float32)


def test_decode_num_splits_policy():
    """The documented examples of the split policy."""
    assert decode_num_splits(1024, 8) == 16  # Qwen3-0.6B at batch 1, 1,024 keys: 16 splits of 64
    assert decode_num_splits(127, 8) == 1  # too few keys for two splits of 64
    assert decode_num_splits(1024, 16) == 16  # the blog's 16 heads
    assert decode_num_splits(4096, 16) == 17  # ceil(264 / 16): enough programs, no more
    assert decode_num_splits(1024, 512) == 1  # batch 64: the GPU is already full
    assert decode_num_splits(10**6, 1) == MAX_SPLITS
    assert decode_num_splits(1, 1) == 1
    assert decode_num_splits(1024, 8, target=80) == 10  # a T4's 40 SMs: two programs per SM

def test_tile_policy():
    """The documented tiles: Qwen3's D = 128 in fp16 decodes 64 keys per tile and prefills 64 x 32."""
    assert decode_meta(128, torch.float16)["BLOCK_N"] == 64
    assert decode_meta(128, torch.float32)["BLOCK_N"] == 32
    assert decode_meta(256, torch.float32)["BLOCK_N"] == 16
    fp16, fp32 = prefill_meta(128, torch.float16), prefill_meta(128, torch.float32)
    assert (fp16["BLOCK_M"], fp16["BLOCK_N"]) == (64, 32)
    assert (fp32["BLOCK_M"], fp32["BLOCK_N"]) == (32, 16)
    assert decode_meta(40, torch.float16)["BLOCK_D"] == 64  # D padded to a power of two


# ------------------------------------------------------------------------------------------------
# prefill


PREFILL_CASES = {  # B, Hq, Hkv, S, T, D, causal
    "qwen3_prompt": (1, 16, 8, 19, 19, 128, True),  # S == T
    "gqa_prompt_3_blocks": (1, 4, 2, 130, 130, 16, True),  # several query blocks and key tiles
    "chunk_after_cache": (2, 4, 2, 5, 70, 40, True),  # S < T: queries aligned to the end
    "blocks_after_cache": (1, 2, 1, 70, 100, 32, True),  # S < T across query blocks and the diagonal
    "one_query": (1, 16, 8, 1, 7, 128, True),  # a decode step through the prefill kernel
    "one_key": (1, 2, 2, 1, 1, 64, True),
    "mha_1029_keys": (1, 1, 1, 3, 1029, 16, True),  # 1000+ keys
    "not_causal_more_queries": (1, 4, 1, 33, 20, 32, False),  # S > T is fine without causality
    "not_causal_odd": (2, 6, 3, 7, 127, 40, False),
}


@pytest.mark.parametrize("case", list(PREFILL_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prefill(case, dtype, device):
    B, Hq, Hkv, S, T, D, causal = PREFILL_CASES[case]
    q, k, v = make_qkv(B, Hq, Hkv, S, T, D, dtype, device)
    with count_launches() as launches:
        out = prefill_attention(q, k, v, causal=causal)
    assert dict(launches) == PREFILL
    assert out.shape == (B, Hq, S, D) and out.is_contiguous()
    assert_close(out, attention_ref(q, k, v, D**-0.5, causal, None), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_prefill_scale_and_sdpa_is_causal(dtype, device):
    """With S == T the end-aligned mask is SDPA's is_causal; a custom scale is applied to q . k."""
    q, k, v = make_qkv(1, 4, 2, 45, 45, 32, dtype, device)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True, scale=0.6, enable_gqa=True
    )
    assert_close(prefill_attention(q, k, v, scale=0.6), ref, dtype)
    assert_close(prefill_attention(q, k, v), attention_ref(q, k, v, 32**-0.5, True, None), dtype)


def test_prefill_strided_inputs(device):
    q = randn(1, 6, 4, 16, device=device).transpose(1, 2)
    k = randn(1, 10, 2, 16, device=device, seed=1).transpose(1, 2)
    v = randn(1, 10, 2, 32, device=device, seed=2).transpose(1, 2)[..., ::2]
    out = prefill_attention(q, k, v, scale=0.25)
    assert out.is_contiguous()
    assert_close(out, attention_ref(q, k, v, 0.25, True, None), torch.float32)


def test_prefill_last_query_equals_decode(device):
    """The last query of a causal prefill sees every key: the decode kernel's answer."""
    q, k, v = make_qkv(1, 16, 8, 9, 9, 64, torch.float32, device)
    last = prefill_attention(q, k, v)[:, :, -1:]
    torch.testing.assert_close(last, decode_attention(q[:, :, -1:], k, v), **TOL[torch.float32])


# ------------------------------------------------------------------------------------------------
# no side effects, properties


def test_inputs_not_modified(device):
    q, k, v = make_qkv(1, 4, 2, 6, 90, 32, torch.float16, device)
    kv_len = torch.tensor(80, device=device)
    before = [t.clone() for t in (q, k, v, kv_len)]
    prefill_attention(q, k, v)
    decode_attention(q[:, :, -1:], k, v, kv_len=kv_len, num_splits=3)
    decode_attention(q[:, :, -1:], k, v, num_splits=1)
    for t, b in zip((q, k, v, kv_len), before):
        assert torch.equal(t, b)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    B=st.integers(1, 2),
    Hkv=st.integers(1, 2),
    group=st.integers(1, 3),
    T=st.integers(1, 300),
    D=st.sampled_from([16, 40, 64]),
    num_splits=st.sampled_from([None, 1, 2, 5]),
    filled=st.floats(0.0, 1.0),
    on_device=st.booleans(),
    dtype=st.sampled_from(DTYPES),
)
def test_decode_property(B, Hkv, group, T, D, num_splits, filled, on_device, dtype, device):
    q, k, v = make_qkv(B, Hkv * group, Hkv, 1, T, D, dtype, device)
    kv_len = max(1, round(filled * T))
    arg = torch.tensor(kv_len, device=device) if on_device else kv_len
    out = decode_attention(q, k, v, kv_len=arg, num_splits=num_splits)
    assert_close(out, decode_ref(q, k, v, kv_len=kv_len), dtype)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    B=st.integers(1, 2),
    Hkv=st.integers(1, 2),
    group=st.integers(1, 3),
    S=st.integers(1, 80),
    extra=st.integers(0, 80),
    D=st.sampled_from([16, 40, 64]),
    causal=st.booleans(),
    dtype=st.sampled_from(DTYPES),
)
def test_prefill_property(B, Hkv, group, S, extra, D, causal, dtype, device):
    q, k, v = make_qkv(B, Hkv * group, Hkv, S, S + extra, D, dtype, device)
    out = prefill_attention(q, k, v, causal=causal)
    assert_close(out, attention_ref(q, k, v, D**-0.5, causal, None), dtype)


# ------------------------------------------------------------------------------------------------
# errors: the documented type, and a message that names the argument


def _error_cases(d):
    q, k, v = make_qkv(1, 4, 2, 1, 8, 16, torch.float32, d)
    q3 = randn(1, 3, 1, 16, device=d)
    meta = torch.empty(1, 2, 8, 16, device="meta")
    big_q, big_k, big_v = make_qkv(1, 2, 1, 1, 2, 512, torch.float32, d)
    return {
        "q_rank": (lambda: decode_attention(q[0], k, v), ValueError, r"^q must have 4 dims"),
        "k_not_tensor": (lambda: prefill_attention(q, [1.0], v), TypeError, r"^k must be a torch.Tensor"),
        "int_dtype": (lambda: decode_attention(q.int(), k, v), TypeError, r"^q must be float16 or float32"),
        "bfloat16": (lambda: prefill_attention(q.bfloat16(), k, v), TypeError, r"^q is bfloat16.*T4"),
        "dtype_mismatch": (lambda: decode_attention(q, k.half(), v), TypeError, r"^k must have the dtype of q"),
        "v_device": (lambda: decode_attention(q, k, meta), ValueError, r"^v must be a CUDA tensor"),
        "v_shape": (lambda: prefill_attention(q, k, v[..., :8]), ValueError, r"^v must have shape"),
        "heads": (lambda: decode_attention(q3, k, v), ValueError, r"^k has 2 heads.*Hq % Hkv"),
        "empty_keys": (lambda: decode_attention(q, k[:, :, :0], v[:, :, :0]), ValueError, r"^k must not be empty"),
        "head_dim": (lambda: decode_attention(big_q, big_k, big_v), ValueError, r"^q must have a head dim D <= 256"),
        "scale": (lambda: decode_attention(q, k, v, scale="0.1"), TypeError, r"^scale must be a float"),
        "decode_two_queries": (lambda: decode_attention(q.expand(1, 4, 2, 16), k, v), ValueError, r"^q must hold one"),
        "kv_len_0": (lambda: decode_attention(q, k, v, kv_len=0), ValueError, r"^kv_len must be between 1 and T = 8"),
        "kv_len_9": (lambda: decode_attention(q, k, v, kv_len=9), ValueError, r"^kv_len must be between 1 and T = 8"),
        "kv_len_float": (lambda: decode_attention(q, k, v, kv_len=3.0), TypeError, r"^kv_len must be None, an int"),
        "kv_len_bool": (lambda: decode_attention(q, k, v, kv_len=True), TypeError, r"^kv_len must be None, an int"),
        "kv_len_float_tensor": (
            lambda: decode_attention(q, k, v, kv_len=torch.tensor(3.0, device=d)),
            TypeError,
            r"^kv_len must hold one int32 or int64 value",
        ),
        "kv_len_two_values": (
            lambda: decode_attention(q, k, v, kv_len=torch.tensor([3, 4], device=d)),
            TypeError,
            r"^kv_len must hold one int32 or int64 value",
        ),
        "kv_len_device": (
            lambda: decode_attention(q, k, v, kv_len=torch.tensor(3, device="meta")),
            ValueError,
            r"^kv_len is on meta",
        ),
        "num_splits_0": (lambda: decode_attention(q, k, v, num_splits=0), ValueError, r"^num_splits must be between"),
        "num_splits_65": (lambda: decode_attention(q, k, v, num_splits=65), ValueError, r"^num_splits must be between"),
        "num_splits_str": (lambda: decode_attention(q, k, v, num_splits="2"), TypeError, r"^num_splits must be None"),
        "causal_more_queries": (
            lambda: prefill_attention(randn(1, 4, 9, 16, device=d), k, v),
            ValueError,
            r"^q has S = 9 queries but k only T = 8 keys",
        ),
        "causal_not_bool": (lambda: prefill_attention(q, k, v, causal=1), TypeError, r"^causal must be a bool"),
    }


@pytest.mark.parametrize("case", list(_error_cases("cpu")))
def test_errors(case, device):
    fn, error, match = _error_cases(device)[case]
    with pytest.raises(error, match=match):
        fn()
