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


def test_decode_runners_generate_the_original_tokens(tiny):
    """tools/bench_decode.py: the graph decoder's run generates the original's tokens, and returns a time."""
    import bench_decode

    ids = helpers.make_prompt(5, vocab_size=tiny.config.vocab_size)
    run = bench_decode.runners(tiny, tiny, ids, 6)
    assert set(run) >= {helpers.ORIGINAL, helpers.ORIGINAL_AGAIN, bench_decode.ORIGINAL_GRAPH, bench_decode.FAST,
                        bench_decode.FAST_GRAPH}
    expected, seconds = run[helpers.ORIGINAL](6)
    assert seconds > 0 and expected.device.type == "cpu" and expected.numel() == 6
    graphed, _ = run[bench_decode.ORIGINAL_GRAPH](6)
    run[bench_decode.ORIGINAL_GRAPH](1)
    assert torch.equal(graphed, expected)
