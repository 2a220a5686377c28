"""slower_kernels/folded_gemv.py: one row times a weight, with the RMSNorm, residual add, SwiGLU or argmax around it
folded in. Each option against a float64 reference on odd shapes (K not a multiple of the chunk, N not a multiple of
the program's rows), in several tiles; against the kernels it replaces, bit for bit; the argmax's ties and negative
logits; the measured table's lookup; errors. Runs on a GPU, or on the CPU through Triton's interpreter."""

import csv

import pytest
import torch
import torch.nn.functional as F
from test_kernels import DTYPES, assert_close, randn, rmsnorm_ref

from slower_kernels import folded_gemv as fg
from slower_kernels.fused import add_rmsnorm, swiglu_packed
from slower_kernels.gemv import gemv
from slower_kernels.launches import count_launches
from slower_kernels.rmsnorm import rmsnorm_fused

TILES = [None, fg.DecodeGemvConfig(4, 32, 1), fg.DecodeGemvConfig(16, 16, 2, 2), fg.DecodeGemvConfig(1, 128, 4),
         fg.DecodeGemvConfig(4, 32, 2, prefetch=True), fg.DecodeGemvConfig(2, 256, 1, prefetch=True)]
SHAPES = [(37, 72), (5, 200), (130, 48)]  # (N, K): odd N, K past one chunk, N past one program's rows


def operands(N, K, dtype, device, gated=False):
    x = randn(1, K, dtype=dtype, device=device, seed=1)
    w = (randn((2 if gated else 1) * N, K, dtype=dtype, device=device, seed=2) / K**0.5).to(dtype)
    norm = (randn(K, dtype=torch.float32, device=device, seed=3).abs() + 0.5).to(dtype)
    res = randn(N, dtype=dtype, device=device, seed=4)
    return x, w, norm, res


@pytest.mark.parametrize("tile", TILES, ids=lambda t: t.name if t else "default")
@pytest.mark.parametrize("N,K", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_option_against_float64(N, K, tile, dtype, device):
    x, w, norm, res = operands(N, K, dtype, device, gated=True)
    xn = rmsnorm_ref(x, norm, 1e-6)
    assert_close(fg.decode_gemv(x, w[:N], config=tile), x.double() @ w[:N].double().T, dtype)
    assert_close(fg.decode_gemv(x, w[:N], norm_weight=norm, eps=1e-6, config=tile), xn @ w[:N].double().T, dtype)
    assert_close(fg.decode_gemv(x, w[:N], residual=res, config=tile), x.double() @ w[:N].double().T + res.double(),
                 dtype)
    both = xn @ w.double().T
    assert_close(fg.decode_gemv(x, w, norm_weight=norm, eps=1e-6, gated=True, config=tile),
                 F.silu(both[:, :N]) * both[:, N:], dtype)
    key = torch.full((1,), fg.ARGMAX_EMPTY, dtype=torch.long, device=device)
    y = fg.decode_gemv(x, w[:N], norm_weight=norm, eps=1e-6, argmax_key=key, config=tile)
    assert fg.argmax_index(key).item() == y.argmax().item()


@pytest.mark.parametrize("N,K", SHAPES)
def test_the_same_bits_as_the_kernels_it_folds(N, K, device):
    """Rounded as the separate kernels round: the same fp16 bits as RMSNorm then gemv, gemv then the add, the gated
    product as gemv then swiglu_packed, at the tile whose K chunk gemv uses (the sum's order is the same)."""
    dtype = torch.float16
    x, w, norm, res = operands(N, K, dtype, device, gated=True)
    same_order = fg.rule_config(2 * N, K, 4 if device.type == "cpu" else 1024)
    one = dict(config=fg.DecodeGemvConfig(1, same_order.block_k, same_order.num_warps))
    if device.type == "cuda":
        pytest.skip("on a GPU a different tile may sum in another order: the float64 test covers it there")
    assert torch.equal(fg.decode_gemv(x, w[:N], norm_weight=norm, eps=1e-6, **one),
                       gemv(rmsnorm_fused(x, norm, 1e-6), w[:N]))
    assert torch.equal(fg.decode_gemv(x, w[:N], residual=res, **one), gemv(x, w[:N]) + res)
    _, r2 = add_rmsnorm(gemv(x, w[:N]), res[None], torch.ones(N, dtype=dtype, device=device), 1e-6)
    assert torch.equal(fg.decode_gemv(x, w[:N], residual=res, **one), r2)
    assert torch.equal(fg.decode_gemv(x, w, norm_weight=norm, eps=1e-6, gated=True, **one),
                       swiglu_packed(gemv(rmsnorm_fused(x, norm, 1e-6), w)))


def test_argmax_takes_the_first_of_equal_logits_and_orders_negatives(device):
    K, N = 40, 70
    x = torch.ones(1, K, dtype=torch.float16, device=device)
    w = torch.zeros(N, K, dtype=torch.float16, device=device)
    w[9], w[3], w[66] = 1, -1, 1  # 9 and 66 tie at K; 3 is the most negative
    key = torch.full((1,), fg.ARGMAX_EMPTY, dtype=torch.long, device=device)
    for tile in TILES:
        key.fill_(fg.ARGMAX_EMPTY)
        fg.decode_gemv(x, w, argmax_key=key, config=tile)
        assert fg.argmax_index(key).item() == 9
        key.fill_(fg.ARGMAX_EMPTY)
        y = fg.decode_gemv(x, -w - 1, argmax_key=key, config=tile)  # every logit negative: -1 - K, -1, -1 + K
        assert fg.argmax_index(key).item() == y.argmax().item() == 3


def test_one_launch_and_the_inputs_left_alone(device):
    x, w, norm, res = operands(37, 72, torch.float16, device, gated=True)
    before = [t.clone() for t in (x, w, norm, res)]
    with count_launches() as launches:
        fg.decode_gemv(x, w, norm_weight=norm, gated=True)
    assert sum(launches.values()) == 1
    for t, b in zip((x, w, norm, res), before):
        assert torch.equal(t, b)


def test_the_measured_table_is_read_for_its_gpu_only(tmp_path, monkeypatch):
    path = tmp_path / "table.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["gpu", "variant", "N", "K", "block_n", "block_k", "num_warps", "num_stages", "prefetch", "us",
                         "GB/s"])
        writer.writerow(["Some GPU", "norm", 4096, 1024, 16, 512, 8, 3, True, 2.5, 3400])
    table = fg.tuned_table(path)
    assert table == {("Some GPU", "norm", 4096, 1024): fg.DecodeGemvConfig(16, 512, 8, 3, True)}
    monkeypatch.setattr(fg, "tuned_table", lambda: table)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    cuda = torch.device("cuda")
    assert fg.decode_gemv_config(4096, 1024, "norm", cuda) == fg.DecodeGemvConfig(16, 512, 8, 3, True)
    assert fg.decode_gemv_config(4096, 1024, "norm", cuda, tuned=False) == fg.rule_config(4096, 1024)
    assert fg.decode_gemv_config(4096, 1024, "residual", cuda) == fg.rule_config(4096, 1024)  # not measured
    assert fg.decode_gemv_config(4096, 1024, "norm", torch.device("cpu")) == fg.rule_config(4096, 1024, 4)


def test_the_committed_table_holds_only_tiles_that_exist():
    """Every row of the committed table names a variant the step uses and a tile DecodeGemvConfig accepts."""
    for (gpu, variant, N, K), config in fg.tuned_table().items():
        assert variant in fg.VARIANTS and N > 0 and K > 0 and gpu
        assert isinstance(config, fg.DecodeGemvConfig)


def test_projections_and_variants():
    shapes = fg.decode_projections(1024, 3072, 16, 8, 128, 151936)
    assert shapes["q/k/v"] == ("norm", 4096, 1024) and shapes["lm_head"] == ("norm+argmax", 151936, 1024)
    assert {v for v, _, _ in shapes.values()} <= set(fg.VARIANTS)
    assert fg.variant_flags("norm+gated") == dict(NORM=True, RESIDUAL=False, GATED=True, ARGMAX=False)
    assert fg.variant_name(True, False, True, False) == "norm+gated"
    with pytest.raises(ValueError, match="variant must be one of"):
        fg.variant_flags("gated")


@pytest.mark.parametrize("case", ["rows", "K", "odd_gated", "norm_shape", "residual_size", "key_dtype", "config",
                                  "tile", "stride"])
def test_errors(case, device):
    x, w, norm, res = operands(8, 32, torch.float16, device)
    key = torch.zeros(1, dtype=torch.int32, device=device)
    call, match = {
        "rows": (lambda: fg.decode_gemv(torch.cat([x, x]), w), "x must hold one row"),
        "K": (lambda: fg.decode_gemv(x[:, :31], w), "last dim of K = w.shape"),
        "odd_gated": (lambda: fg.decode_gemv(x, w[:7], gated=True), "even number of rows"),
        "norm_shape": (lambda: fg.decode_gemv(x, w, norm_weight=norm[:5]), "norm_weight"),
        "residual_size": (lambda: fg.decode_gemv(x, w, residual=res[:3]), "residual must hold N = 8"),
        "key_dtype": (lambda: fg.decode_gemv(x, w, argmax_key=key), "argmax_key must be a one-element int64"),
        "config": (lambda: fg.decode_gemv(x, w, config=(4, 32)), "config must be a DecodeGemvConfig"),
        "tile": (lambda: fg.DecodeGemvConfig(3, 32, 1), "block_n must be a power of two"),
        "stride": (lambda: fg.decode_gemv(x, w.t().contiguous().t()[:, :32]), "w must have a contiguous last dim"),
    }[case]
    with pytest.raises((ValueError, TypeError), match=match):
        call()
