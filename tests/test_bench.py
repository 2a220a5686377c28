"""tools/bench_kernels.py: every benchmark case times two calls that compute the same thing."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import bench_kernels  # noqa: E402

import helpers  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def _flat(result):
    return torch.cat([t.double().flatten() for t in (result if isinstance(result, tuple) else (result,))])


def test_every_case_compares_equal_results():
    """A benchmark of a kernel against the wrong PyTorch call would time nonsense: check the pairs agree."""
    cases = bench_kernels.cases(tiny=True)
    assert len({c["name"] for c in cases}) == len(cases)
    for c in cases:
        ours, theirs = _flat(c["ours"]()), _flat(c["theirs"]())
        tol = 2e-2 if helpers.DTYPE == torch.float16 else 1e-3
        torch.testing.assert_close(ours, theirs, atol=tol, rtol=tol, msg=lambda m, c=c: f"{c['name']}: {m}")
        assert c["bytes"] > 0
    assert {c["target"] for c in cases} >= {"<= cuBLAS, >= 70% of peak", "<= SDPA", "<= PyTorch ops"}


@pytest.fixture(scope="module")
def tiny():
    return helpers.random_qwen3(helpers.TINY_QWEN3, seed=1)


def test_decode_configurations_generate_the_original_tokens(tiny):
    """tools/bench_decode.py: the graph decoders generate the original's tokens (eagerly stepped on a CPU)."""
    import bench_decode

    every = {k: v for k, v in bench_decode.configs().items() if k != bench_decode.FAST}  # FAST: harness/test_patching.py
    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    generated = bench_decode.tokens(tiny, {helpers.ORIGINAL: {}, **every}, ids, 6)
    assert {bench_decode.ORIGINAL_GRAPH, bench_decode.FAST_GRAPH} <= set(generated)
    for name, new in generated.items():
        assert torch.equal(new, generated[helpers.ORIGINAL]), name


def test_gemv_sweep_times_the_default_and_the_fastest_against_cublas():
    table = bench_kernels.gemv_sweep(tiny=True, rounds=1)
    assert set(table["shape"]) == {"lm_head", "gate,up fused"}
    for _, group in table.groupby("shape"):
        assert group["default"].sum() == 1 and 3 <= len(group) <= 4
    assert (table["ratio to F.linear"] > 0).all()
