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
