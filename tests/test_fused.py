"""slower_kernels/fused.py: SwiGLU, residual add + RMSNorm, RoPE and q/k norm + RoPE.

Each kernel against a float64 reference AND against the transformers code it replaces (Qwen3MLP's
act_fn, Qwen3RMSNorm, apply_rotary_pos_emb, Qwen3Attention's q_norm / k_norm, Qwen3RotaryEmbedding)
built small; launch counts, layouts, inputs left alone, in-place writes, errors, properties.
Runs on a GPU, or on the CPU through Triton's interpreter (sizes are kept small for it).
"""

import importlib

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from test_kernels import DTYPES, HYPOTHESIS, TOL, assert_close, randn, rmsnorm_ref
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import (
    Qwen3Attention,
    Qwen3MLP,
    Qwen3RMSNorm,
    Qwen3RotaryEmbedding,
    apply_rotary_pos_emb,
    rotate_half,
)

from slower_kernels.fused import (
    add_rmsnorm,
    add_rmsnorm_,
    rmsnorm_rope,
    rope,
    swiglu,
    swiglu_block_size,
    swiglu_packed,
)
from slower_kernels.launches import count_launches

fused = importlib.import_module("slower_kernels.fused")  # the module, for spying on its kernels


def spy_kernel(monkeypatch, name: str) -> list:
    """Replace ``slower_kernels.fused.<name>`` by a wrapper that records each launch's arguments, then launches."""
    real, calls = getattr(fused, name), []

    class Spy:
        fn = real.fn  # what launches.record reads

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                calls.append((grid, args))
                return real[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(fused, name, Spy())
    return calls


def tiny_config(head_dim=16, heads=4, kv_heads=2, hidden=40, intermediate=24) -> Qwen3Config:
    return Qwen3Config(
        hidden_size=hidden, intermediate_size=intermediate, num_attention_heads=heads,
        num_key_value_heads=kv_heads, head_dim=head_dim, num_hidden_layers=1, vocab_size=64,
        rms_norm_eps=1e-6, max_position_embeddings=128,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# SwiGLU


def swiglu_ref(gate, up):
    """float64 silu(gate) * up; reads gate and up, writes the output."""
    return F.silu(gate.double()) * up.double()


@pytest.mark.parametrize("shape", [(1,), (3, 257), (1, 3072), (2, 5, 100), (1000,), (4, 1023)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_swiglu(shape, dtype, device):
    gate, up = 3 * randn(*shape, dtype=dtype, device=device), randn(*shape, dtype=dtype, device=device, seed=1)
    out = swiglu(gate, up)
    assert out.shape == gate.shape
    assert_close(out, swiglu_ref(gate, up), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_swiglu_matches_qwen3_mlp(dtype, device):
    """Qwen3MLP's own act_fn and forward: down(act(gate(x)) * up(x)), with two and one (packed) projections."""
    mlp = Qwen3MLP(tiny_config(intermediate=300)).to(device=device, dtype=dtype)
    x = randn(2, 3, 40, dtype=dtype, device=device)
    with torch.no_grad():
        gate, up = mlp.gate_proj(x), mlp.up_proj(x)
        torch.testing.assert_close(swiglu(gate, up), mlp.act_fn(gate) * up, **TOL[dtype])
        torch.testing.assert_close(mlp.down_proj(swiglu(gate, up)), mlp(x), **TOL[dtype])
        gate_up = F.linear(x, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]))  # [2, 3, 600]
        torch.testing.assert_close(mlp.down_proj(swiglu_packed(gate_up)), mlp(x), **TOL[dtype])


def test_swiglu_rounds_silu_like_pytorch(device):
    """fp16: silu is rounded to fp16 before the product, as act_fn(gate) * up does; the fp32 product of
    two fp16 values is exact, so the result is PyTorch's to the last bit (or one unit, where exp differs)."""
    gate = 4 * randn(4, 512, dtype=torch.float16, device=device)
    up = 4 * randn(4, 512, dtype=torch.float16, device=device, seed=1)
    out, hf = swiglu(gate, up), F.silu(gate) * up
    ulp = torch.finfo(torch.float16).eps * hf.abs().clamp_min(2**-14)
    assert ((out - hf).abs().float() <= ulp.float()).all()
    assert (out == hf).float().mean() > 0.99


@pytest.mark.parametrize("shape", [(1, 6), (3, 514), (2, 5, 200)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_swiglu_packed(shape, dtype, device):
    gate_up = 3 * randn(*shape, dtype=dtype, device=device)
    n = shape[-1] // 2
    out = swiglu_packed(gate_up)
    assert out.shape == (*shape[:-1], n)
    assert_close(out, swiglu_ref(gate_up[..., :n], gate_up[..., n:]), dtype)


def test_swiglu_packed_reads_both_halves_in_place(monkeypatch, device):
    """gate and up are the two halves of one [.., 2I] tensor, read through the row stride 2I, no copy."""
    calls = spy_kernel(monkeypatch, "swiglu_kernel")
    gate_up = randn(2, 3, 2 * 70, device=device)
    swiglu_packed(gate_up)
    (_, (gate, up, out, n_cols, stride_gm, stride_um, _)), = calls
    assert gate.data_ptr() == gate_up.data_ptr() and up.data_ptr() == gate_up.data_ptr() + 70 * 4
    assert (n_cols, stride_gm, stride_um) == (70, 140, 140)


@pytest.mark.parametrize("view", ["transposed", "sliced", "packed_transposed"])
def test_swiglu_non_contiguous(view, device):
    base_g, base_u = randn(40, 30, device=device), randn(40, 60, device=device, seed=1)
    if view == "transposed":
        gate, up = base_g.t(), base_u[:, :30].t()
        assert_close(swiglu(gate, up), swiglu_ref(gate, up), torch.float32)
    elif view == "sliced":
        gate, up = base_g[:, 3:20], base_u[:, ::3][:, 2:19]  # a row stride; a strided last dim (copied)
        assert_close(swiglu(gate, up), swiglu_ref(gate, up), torch.float32)
    else:
        gate_up = base_u.t()  # (60, 40): last dim not contiguous, copied first
        assert_close(swiglu_packed(gate_up), swiglu_ref(gate_up[:, :20], gate_up[:, 20:]), torch.float32)


def test_swiglu_block_size():
    assert swiglu_block_size(1, 3072) == 256  # decode: 12 programs, not 3
    assert swiglu_block_size(64, 3072) == 1024  # enough rows: big blocks
    assert swiglu_block_size(1, 10**6) == 1024
    assert swiglu_block_size(1, 5) == 256


@HYPOTHESIS
@given(rows=st.integers(1, 6), n=st.integers(1, 2100), packed=st.booleans(), dtype=st.sampled_from(DTYPES))
def test_swiglu_property(rows, n, packed, dtype, device):
    gate_up = 4 * randn(rows, 2 * n, dtype=dtype, device=device, seed=n)
    gate, up = gate_up[:, :n], gate_up[:, n:]
    out = swiglu_packed(gate_up) if packed else swiglu(gate, up)
    assert_close(out, swiglu_ref(gate, up), dtype)


# ------------------------------------------------------------------------------------------------
# residual add + RMSNorm


def add_rmsnorm_ref(x, residual, weight, eps):
    """float64 (RMSNorm(residual + x), residual + x)."""
    r = residual.double() + x.double()
    return rmsnorm_ref(r, weight, eps), r


@pytest.mark.parametrize("shape", [(1, 16), (3, 257), (2, 5, 128), (4, 1000), (1, 1024), (1023,)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add_rmsnorm(shape, dtype, device):
    x, residual = randn(*shape, dtype=dtype, device=device), randn(*shape, dtype=dtype, device=device, seed=1)
    weight = randn(shape[-1], dtype=dtype, device=device, seed=2)
    y, r = add_rmsnorm(x, residual, weight, 1e-6)
    y_ref, r_ref = add_rmsnorm_ref(x, residual, weight, 1e-6)
    assert y.shape == r.shape == x.shape
    assert_close(y, y_ref, dtype)
    assert_close(r, r_ref, dtype)


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add_rmsnorm_matches_qwen3(inplace, dtype, device):
    """The decoder layer's ``residual + hidden_states`` then ``post_attention_layernorm``: r bit for bit."""
    norm = Qwen3RMSNorm(257, eps=1e-5).to(device=device, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(randn(257, seed=2))
    x, residual = randn(3, 257, dtype=dtype, device=device), 8 * randn(3, 257, dtype=dtype, device=device, seed=1)
    with torch.no_grad():
        r_hf = residual + x
        y_hf = norm(r_hf)
        y, r = (add_rmsnorm_ if inplace else add_rmsnorm)(x, residual, norm.weight, norm.variance_epsilon)
    assert torch.equal(r, r_hf)  # the add is rounded as PyTorch rounds it
    torch.testing.assert_close(y, y_hf, **TOL[dtype])


def test_add_rmsnorm_leaves_inputs_alone(device):
    x, residual, weight = randn(3, 257, device=device), randn(3, 257, device=device, seed=1), randn(257, seed=2)
    before = [t.clone() for t in (x, residual, weight)]
    y, r = add_rmsnorm(x, residual, weight.to(device))
    assert all(torch.equal(a, b) for a, b in zip((x, residual, weight), before))
    assert r.data_ptr() not in (x.data_ptr(), residual.data_ptr())


def test_add_rmsnorm_in_place_writes_residual(device):
    """add_rmsnorm_ writes r into residual's storage (a strided view of a bigger buffer too) and returns it."""
    buffer = randn(3, 300, device=device, seed=1)
    residual = buffer[:, 10:267]  # (3, 257), row stride 300
    x, weight = randn(3, 257, device=device), randn(257, device=device, seed=2)
    x_before, buffer_before = x.clone(), buffer.clone()
    y_ref, r_ref = add_rmsnorm_ref(x, residual, weight, 1e-6)
    y, r = add_rmsnorm_(x, residual, weight)
    assert r is residual
    assert_close(residual, r_ref, torch.float32)
    assert_close(y, y_ref, torch.float32)
    assert torch.equal(x, x_before)
    assert torch.equal(buffer[:, :10], buffer_before[:, :10]) and torch.equal(buffer[:, 267:], buffer_before[:, 267:])


@pytest.mark.parametrize("view", ["transposed", "sliced"])
def test_add_rmsnorm_non_contiguous(view, device):
    base_x, base_r = randn(64, 40, device=device), randn(64, 80, device=device, seed=1)
    if view == "transposed":
        x, residual = base_x.t(), base_r[:, :40].t()  # (40, 64), copied to rows
    else:
        x, residual = base_x[:, 3:30], base_r[:, 50:77]  # row strides 40 and 80, read in place
    weight = randn(x.shape[-1], device=device, seed=2)
    y, r = add_rmsnorm(x, residual, weight)
    y_ref, r_ref = add_rmsnorm_ref(x, residual, weight, 1e-6)
    assert_close(y, y_ref, torch.float32)
    assert_close(r, r_ref, torch.float32)


@HYPOTHESIS
@given(rows=st.integers(1, 6), n=st.integers(1, 1500), eps=st.sampled_from([1e-6, 1e-5]), inplace=st.booleans())
def test_add_rmsnorm_property(rows, n, eps, inplace, device):
    x, residual = randn(rows, n, device=device, seed=n), randn(rows, n, device=device, seed=n + 1)
    weight = randn(n, device=device, seed=n + 2)
    y_ref, r_ref = add_rmsnorm_ref(x, residual, weight, eps)
    y, r = (add_rmsnorm_ if inplace else add_rmsnorm)(x, residual, weight, eps)
    assert_close(y, y_ref, torch.float32)
    assert_close(r, r_ref, torch.float32)


# ------------------------------------------------------------------------------------------------
# RoPE, and q_norm / k_norm + RoPE


def rope_ref(x, cos, sin):
    """float64 ``x * cos + rotate_half(x) * sin`` with cos, sin [B, S, D] broadcast over heads."""
    cos, sin = cos.double().unsqueeze(1), sin.double().unsqueeze(1)
    return x.double() * cos + rotate_half(x.double()) * sin


ROPE_CASES = {  # B, Hq, Hkv, S, D
    "gqa_decode_128": (1, 4, 2, 1, 128),
    "gqa_prefill_64": (2, 4, 2, 5, 64),
    "mha_16": (1, 2, 2, 5, 16),
    "mqa_odd_half_40": (2, 3, 1, 3, 40),
}


def make_rope_inputs(B, Hq, Hkv, S, D, dtype, device, layout="hf"):
    """q, k pre-norm and random cos/sin tables. layout "hf": [B, S, H, D] buffers viewed as [B, H, S, D],
    as Qwen3Attention hands them over; "contiguous": [B, H, S, D]."""
    if layout == "hf":
        q = randn(B, S, Hq, D, dtype=dtype, device=device).transpose(1, 2)
        k = randn(B, S, Hkv, D, dtype=dtype, device=device, seed=1).transpose(1, 2)
    else:
        q = randn(B, Hq, S, D, dtype=dtype, device=device)
        k = randn(B, Hkv, S, D, dtype=dtype, device=device, seed=1)
    cos, sin = randn(B, S, D, dtype=dtype, device=device, seed=2), randn(B, S, D, dtype=dtype, device=device, seed=3)
    return q, k, cos, sin


@pytest.mark.parametrize("layout", ["hf", "contiguous"])
@pytest.mark.parametrize("case", list(ROPE_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rope(case, layout, dtype, device):
    q, k, cos, sin = make_rope_inputs(*ROPE_CASES[case], dtype, device, layout)
    q_out, k_out = rope(q, k, cos, sin)
    assert q_out.shape == q.shape and k_out.shape == k.shape
    assert q_out.stride() == q.stride() and k_out.stride() == k.stride()  # the input's layout
    assert_close(q_out, rope_ref(q, cos, sin), dtype)
    assert_close(k_out, rope_ref(k, cos, sin), dtype)


@pytest.mark.parametrize("case", list(ROPE_CASES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_rope(case, dtype, device):
    q, k, cos, sin = make_rope_inputs(*ROPE_CASES[case], dtype, device)
    D = q.shape[-1]
    q_w, k_w = randn(D, dtype=dtype, device=device, seed=4), randn(D, dtype=dtype, device=device, seed=5)
    q_out, k_out = rmsnorm_rope(q, k, q_w, k_w, 1e-6, cos, sin)
    assert_close(q_out, rope_ref(rmsnorm_ref(q, q_w, 1e-6), cos, sin), dtype)
    assert_close(k_out, rope_ref(rmsnorm_ref(k, k_w, 1e-6), cos, sin), dtype)


@pytest.mark.parametrize("S", [1, 5])
@pytest.mark.parametrize("head_dim", [16, 64, 128])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rope_matches_qwen3_attention(head_dim, S, dtype, device):
    """Qwen3Attention's own q_norm / k_norm and Qwen3RotaryEmbedding's cos/sin at positions 3.., GQA 4 on 2."""
    config = tiny_config(head_dim=head_dim)
    attn = Qwen3Attention(config, layer_idx=0).to(device=device, dtype=dtype)
    with torch.no_grad():
        attn.q_norm.weight.copy_(randn(head_dim, seed=4))
        attn.k_norm.weight.copy_(randn(head_dim, seed=5))
    B = 2
    q = 3 * randn(B, S, 4, head_dim, dtype=dtype, device=device)  # q_proj(x).view(hidden_shape)
    k = 3 * randn(B, S, 2, head_dim, dtype=dtype, device=device, seed=1)
    positions = torch.arange(3, 3 + S, device=device).expand(B, S)
    cos, sin = Qwen3RotaryEmbedding(config).to(device)(q, positions)
    with torch.no_grad():
        q_normed, k_normed = attn.q_norm(q).transpose(1, 2), attn.k_norm(k).transpose(1, 2)
        q_hf, k_hf = apply_rotary_pos_emb(q_normed, k_normed, cos, sin)
        q_out, k_out = rope(q_normed, k_normed, cos, sin)
        torch.testing.assert_close(q_out, q_hf, **TOL[dtype])
        torch.testing.assert_close(k_out, k_hf, **TOL[dtype])
        eps = attn.q_norm.variance_epsilon
        q_out, k_out = rmsnorm_rope(
            q.transpose(1, 2), k.transpose(1, 2), attn.q_norm.weight, attn.k_norm.weight, eps, cos, sin
        )
        torch.testing.assert_close(q_out, q_hf, **TOL[dtype])
        torch.testing.assert_close(k_out, k_hf, **TOL[dtype])


@pytest.mark.parametrize("norm", [False, True])
def test_rope_cos_shared_by_the_batch(norm, device):
    """cos, sin [1, S, D] (one set of positions for every sequence) broadcast over B, as in transformers."""
    q, k, cos, sin = make_rope_inputs(3, 4, 2, 5, 16, torch.float32, device)
    cos, sin = cos[:1], sin[:1]
    w = randn(16, device=device, seed=4)
    q_out, k_out = rmsnorm_rope(q, k, w, w, 1e-6, cos, sin) if norm else rope(q, k, cos, sin)
    q_in, k_in = (rmsnorm_ref(q, w, 1e-6), rmsnorm_ref(k, w, 1e-6)) if norm else (q, k)
    assert_close(q_out, rope_ref(q_in, cos.expand(3, 5, 16), sin.expand(3, 5, 16)), torch.float32)
    assert_close(k_out, rope_ref(k_in, cos.expand(3, 5, 16), sin.expand(3, 5, 16)), torch.float32)


@pytest.mark.parametrize("norm", [False, True])
def test_rope_non_contiguous(norm, device):
    """q and k sliced out of one fused qkv projection [B, S, (Hq + 2 Hkv) * D]; cos/sin with a strided last dim."""
    B, S, Hq, Hkv, D = 2, 5, 4, 2, 16
    qkv = randn(B, S, (Hq + 2 * Hkv) * D, device=device)
    q = qkv[..., : Hq * D].view(B, S, Hq, D).transpose(1, 2)
    k = qkv[..., Hq * D : (Hq + Hkv) * D].view(B, S, Hkv, D).transpose(1, 2)
    cos = randn(B, S, 2 * D, device=device, seed=2)[..., ::2]  # last stride 2: copied
    sin = randn(B, S, D, device=device, seed=3)
    before = qkv.clone()
    w = randn(D, device=device, seed=4)
    q_out, k_out = rmsnorm_rope(q, k, w, w, 1e-6, cos, sin) if norm else rope(q, k, cos, sin)
    q_in, k_in = (rmsnorm_ref(q, w, 1e-6), rmsnorm_ref(k, w, 1e-6)) if norm else (q, k)
    assert_close(q_out, rope_ref(q_in, cos, sin), torch.float32)
    assert_close(k_out, rope_ref(k_in, cos, sin), torch.float32)
    assert torch.equal(qkv, before)


@pytest.mark.parametrize("norm", [False, True])
def test_rope_leaves_inputs_alone(norm, device):
    q, k, cos, sin = make_rope_inputs(1, 4, 2, 3, 64, torch.float16, device)
    q_w, k_w = randn(64, dtype=torch.float16, device=device, seed=4), randn(64, dtype=torch.float16, device=device)
    inputs = (q, k, cos, sin, q_w, k_w)
    before = [t.clone() for t in inputs]
    q_out, k_out = rmsnorm_rope(q, k, q_w, k_w, 1e-6, cos, sin) if norm else rope(q, k, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip(inputs, before))
    assert {q_out.data_ptr(), k_out.data_ptr()}.isdisjoint(t.data_ptr() for t in inputs)


@HYPOTHESIS
@given(
    B=st.integers(1, 2),
    Hkv=st.integers(1, 2),
    group=st.integers(1, 3),
    S=st.integers(1, 6),
    half=st.integers(1, 40),
    norm=st.booleans(),
    dtype=st.sampled_from(DTYPES),
)
def test_rope_property(B, Hkv, group, S, half, norm, dtype, device):
    q, k, cos, sin = make_rope_inputs(B, Hkv * group, Hkv, S, 2 * half, dtype, device)
    q_w, k_w = randn(2 * half, dtype=dtype, device=device, seed=4), randn(2 * half, dtype=dtype, device=device)
    if norm:
        q_out, k_out = rmsnorm_rope(q, k, q_w, k_w, 1e-6, cos, sin)
        q, k = rmsnorm_ref(q, q_w, 1e-6), rmsnorm_ref(k, k_w, 1e-6)
    else:
        q_out, k_out = rope(q, k, cos, sin)
    assert_close(q_out, rope_ref(q, cos, sin), dtype)
    assert_close(k_out, rope_ref(k, cos, sin), dtype)


# ------------------------------------------------------------------------------------------------
# launch counts: one launch each, whatever the shape (q's and k's heads in one grid)


def _launch_cases(d):
    x, w = randn(3, 257, device=d), randn(257, device=d)
    q, k, cos, sin = make_rope_inputs(2, 4, 2, 5, 16, torch.float32, d)
    qw = randn(16, device=d)
    return {
        "swiglu": (lambda: swiglu(x, x), {"swiglu_kernel": 1}),
        "swiglu_packed": (lambda: swiglu_packed(x[:, :256]), {"swiglu_kernel": 1}),
        "add_rmsnorm": (lambda: add_rmsnorm(x, x, w), {"add_rmsnorm_kernel": 1}),
        "add_rmsnorm_": (lambda: add_rmsnorm_(x, x.clone(), w), {"add_rmsnorm_kernel": 1}),
        "rope": (lambda: rope(q, k, cos, sin), {"rope_kernel": 1}),
        "rmsnorm_rope": (lambda: rmsnorm_rope(q, k, qw, qw, 1e-6, cos, sin), {"rmsnorm_rope_kernel": 1}),
    }


@pytest.mark.parametrize("name", list(_launch_cases("cpu")))
def test_launch_counts(name, device):
    fn, expected = _launch_cases(device)[name]
    with count_launches() as launches:
        fn()
    assert dict(launches) == expected


def test_rope_grid_covers_q_and_k_heads(monkeypatch, device):
    """One program per (token, head): B * S tokens by Hq + Hkv heads."""
    calls = spy_kernel(monkeypatch, "rope_kernel")
    rope(*make_rope_inputs(2, 4, 2, 5, 16, torch.float32, device))
    assert [grid for grid, _ in calls] == [(2 * 5, 4 + 2)]


# ------------------------------------------------------------------------------------------------
# errors: the documented type, and a message that names the argument


def _error_cases(d):
    x, w = randn(3, 32, device=d), randn(32, device=d)
    q, k, cos, sin = make_rope_inputs(1, 4, 2, 3, 16, torch.float32, d)
    qw = randn(16, device=d)
    meta = torch.empty(3, 32, device="meta")
    return {
        "swiglu_not_a_tensor": (lambda: swiglu(x.tolist(), x), TypeError, r"^gate must be a torch.Tensor"),
        "swiglu_int": (lambda: swiglu(x, x.int()), TypeError, r"^up must be float16 or float32"),
        "swiglu_bfloat16": (lambda: swiglu(x.bfloat16(), x), TypeError, r"^gate is bfloat16.*T4"),
        "swiglu_dtype_mismatch": (lambda: swiglu(x, x.half()), TypeError, r"^up must have the dtype of gate"),
        "swiglu_shapes": (lambda: swiglu(x, x[:, :31]), ValueError, r"^up must have shape"),
        "swiglu_meta": (lambda: swiglu(meta, meta), ValueError, r"^gate must be a CUDA tensor"),
        "swiglu_packed_odd": (lambda: swiglu_packed(x[:, :31]), ValueError, r"^gate_up must have an even last dim"),
        "swiglu_packed_scalar": (lambda: swiglu_packed(x[0, 0]), ValueError, r"^gate_up must have at least 1 dim"),
        "add_rmsnorm_residual_shape": (lambda: add_rmsnorm(x, x[:2], w), ValueError, r"^residual must have shape"),
        "add_rmsnorm_residual_dtype": (
            lambda: add_rmsnorm(x, x.half(), w),
            TypeError,
            r"^residual must have the dtype of x",
        ),
        "add_rmsnorm_weight_shape": (lambda: add_rmsnorm(x, x, w[:31]), ValueError, r"^weight must have shape"),
        "add_rmsnorm_weight_meta": (lambda: add_rmsnorm(x, x, meta[0]), ValueError, r"^weight must be a CUDA"),
        "add_rmsnorm_eps": (lambda: add_rmsnorm(x, x, w, eps=None), TypeError, r"^eps must be a float"),
        "add_rmsnorm_row_too_long": (
            lambda: add_rmsnorm(randn(1, 70000, device=d), randn(1, 70000, device=d), randn(70000, device=d)),
            ValueError,
            r"^x must have a last dim",
        ),
        "add_rmsnorm__strided_last_dim": (
            lambda: add_rmsnorm_(x, randn(32, 3, device=d).t(), w),
            ValueError,
            r"^residual must have a contiguous last dim",
        ),
        "add_rmsnorm__not_rows": (
            lambda: add_rmsnorm_(x[None].expand(2, 3, 32), randn(3, 2, 32, device=d).transpose(0, 1), w),
            ValueError,
            r"^residual must be viewable as rows",
        ),
        "rope_q_rank": (lambda: rope(q[0], k, cos, sin), ValueError, r"^q must have 4 dims"),
        "rope_k_dtype": (lambda: rope(q, k.half(), cos, sin), TypeError, r"^k must have the dtype of q"),
        "rope_k_positions": (lambda: rope(q, k[:, :, :2], cos, sin), ValueError, r"^k must have shape"),
        "rope_odd_head_dim": (lambda: rope(q[..., :15], k[..., :15], cos, sin), ValueError, r"^q must have an even"),
        "rope_cos_rank": (lambda: rope(q, k, cos[0], sin), ValueError, r"^cos must have 3 dims"),
        "rope_cos_shape": (lambda: rope(q, k, cos[:, :2], sin), ValueError, r"^cos must have shape \[B, S, head_dim\]"),
        "rope_sin_shape": (lambda: rope(q, k, cos, sin[..., :8]), ValueError, r"^sin must have shape"),
        "rope_sin_dtype": (lambda: rope(q, k, cos, sin.half()), TypeError, r"^sin must have the dtype of q"),
        "rmsnorm_rope_weight_shape": (
            lambda: rmsnorm_rope(q, k, qw, qw[:8], 1e-6, cos, sin),
            ValueError,
            r"^k_weight must have shape",
        ),
        "rmsnorm_rope_weight_dtype": (
            lambda: rmsnorm_rope(q, k, qw.half(), qw, 1e-6, cos, sin),
            TypeError,
            r"^q_weight must have the dtype of q",
        ),
        "rmsnorm_rope_eps": (lambda: rmsnorm_rope(q, k, qw, qw, "1e-6", cos, sin), TypeError, r"^eps must be a float"),
    }


@pytest.mark.parametrize("case", list(_error_cases("cpu")))
def test_errors(case, device):
    fn, error, match = _error_cases(device)[case]
    with pytest.raises(error, match=match):
        fn()


# ------------------------------------------------------------------------------------------------
# The fused blocks inside one decoder layer (slower_kernels.FastAttention, slower_kernels.FastDecoderLayer)


def sdpa_attention(module, q, k, v, attention_mask, scaling=None, **kwargs):
    """A transformers-style attention function (causal, GQA) that isolates the layer's own kernels."""
    out = F.scaled_dot_product_attention(q, k, v, is_causal=q.shape[-2] > 1, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2), None


@pytest.mark.parametrize("S", [1, 5])
def test_fast_decoder_layer_matches_the_float64_layer(S, device):
    """FastDecoderLayer (q/k/v in one projection, q/k norm + RoPE in one launch, add + RMSNorm in one)
    against transformers' Qwen3DecoderLayer in float64, on an odd hidden size, for decode (S=1) and a prompt."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

    from slower_kernels import FastAttention, FastDecoderLayer

    dtype = torch.float16 if device.type == "cuda" else torch.float32
    config = tiny_config(hidden=40, intermediate=24)
    config._attn_implementation = "sdpa"
    layer = Qwen3DecoderLayer(config, layer_idx=0)
    with torch.no_grad():
        for i, p in enumerate(layer.parameters()):
            p.copy_(randn(*p.shape, seed=10 + i) * (1.0 if p.dim() == 1 else 0.2))
    ref = layer.double().to(device)
    x = randn(1, S, 40, dtype=torch.float64, device=device, seed=3)
    positions = torch.arange(7, 7 + S, device=device)[None]
    rotary = Qwen3RotaryEmbedding(config).to(device)
    with torch.no_grad():
        expected = ref(x, attention_mask=None, position_embeddings=rotary(x, positions), position_ids=positions)
    fast_src = Qwen3DecoderLayer(config, layer_idx=0)
    fast_src.load_state_dict(layer.state_dict())
    fast = FastDecoderLayer.from_hf(fast_src.to(device=device, dtype=dtype), sdpa_attention)
    xd = x.to(dtype)
    with torch.no_grad(), count_launches() as launched:
        got = fast(xd, attention_mask=None, position_embeddings=rotary(xd, positions), position_ids=positions)
    assert isinstance(fast.self_attn, FastAttention)
    torch.testing.assert_close(got.double(), expected, atol=5e-2 if dtype == torch.float16 else 1e-4,
                               rtol=5e-2 if dtype == torch.float16 else 1e-4)
    assert launched["rmsnorm_rope_kernel"] == 1 and launched["add_rmsnorm_kernel"] == 1
    assert launched["rmsnorm_fused_kernel"] == 1 and launched["swiglu_kernel"] == 1


def test_fast_decoder_layer_errors(device):
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

    from slower_kernels import FastAttention, FastDecoderLayer

    layer = Qwen3DecoderLayer(tiny_config(), layer_idx=0).to(device)
    with pytest.raises(TypeError, match="attention_fn must be callable"):
        FastAttention.from_hf(layer.self_attn, "sdpa")
    fast = FastDecoderLayer.from_hf(layer, sdpa_attention)
    with pytest.raises(ValueError, match="position_embeddings"):
        fast(torch.zeros(1, 1, 40, device=device))


@pytest.mark.parametrize("S, position", [(1, 0), (1, 6), (3, 2)])
@pytest.mark.parametrize("case", ["gqa_decode_128", "mqa_odd_half_40"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_rope_into_a_kv_cache(case, S, position, dtype, device):
    """The own decode step's q/k norm + RoPE that writes k, and v as it is, into the KV cache at a position read on
    the device: q as rmsnorm_rope makes it, the cache rows at position .. position + S - 1 the float64 reference's,
    every other row untouched."""
    from slower_kernels.decoder import rmsnorm_rope_cache

    _, Hq, Hkv, _, D = ROPE_CASES[case]
    max_len = 9
    q = randn(S, Hq, D, dtype=dtype, device=device)
    k, v = randn(S, Hkv, D, dtype=dtype, device=device, seed=1), randn(S, Hkv, D, dtype=dtype, device=device, seed=6)
    cos, sin = randn(max_len, D, dtype=dtype, device=device, seed=2), randn(max_len, D, dtype=dtype, device=device, seed=3)
    q_w, k_w = randn(D, dtype=dtype, device=device, seed=4), randn(D, dtype=dtype, device=device, seed=5)
    k_cache = torch.full((Hkv, max_len, D), 7.0, dtype=dtype, device=device)
    v_cache = torch.full_like(k_cache, 7.0)
    q_out = rmsnorm_rope_cache(q, k, v, q_w, k_w, 1e-6, cos, sin, k_cache, v_cache,
                               torch.tensor([position], device=device))
    rows = slice(position, position + S)
    c, s = cos[rows][None], sin[rows][None]  # [1, S, D], as rope_ref broadcasts them over heads
    assert q_out.shape == (1, Hq, S, D)
    assert_close(q_out, rope_ref(rmsnorm_ref(q.transpose(0, 1)[None], q_w, 1e-6), c, s), dtype)
    assert_close(k_cache[:, rows][None], rope_ref(rmsnorm_ref(k.transpose(0, 1)[None], k_w, 1e-6), c, s), dtype)
    assert torch.equal(v_cache[:, rows], v.transpose(0, 1))
    untouched = torch.ones(max_len, dtype=torch.bool)
    untouched[rows] = False
    assert (k_cache[:, untouched] == 7).all() and (v_cache[:, untouched] == 7).all()
