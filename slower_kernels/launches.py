"""Count the launches of this package's kernels, on a GPU and in the interpreter alike.

    with count_launches() as launches:
        rmsnorm_two_pass(x, w)
    launches  # Counter({'rmsnorm_inv_rms_kernel': 1, 'rmsnorm_scale_kernel': 1})

Every launcher calls ``record(kernel)`` right before ``kernel[grid](...)``. Only the project's
kernels are counted (PyTorch's own kernels are not); ``helpers.launches_per_call`` counts every CUDA
kernel of a call on a GPU.
"""

from collections import Counter
from contextlib import contextmanager
from typing import Iterator

_active: list[Counter] = []  # the counters of the enclosing count_launches() blocks


def record(kernel) -> None:
    """Count one launch of ``kernel`` (a @triton.jit function) in every active counter."""
    name = kernel.fn.__name__
    for counter in _active:
        counter[name] += 1


@contextmanager
def count_launches() -> Iterator[Counter]:
    """Yield a Counter {kernel name: launches} filled by the launches made inside the block.

    Blocks nest: a launch counts in every enclosing block. Not thread-safe.
    """
    counter: Counter = Counter()
    _active.append(counter)
    try:
        yield counter
    finally:
        # remove this counter by identity (Counters with equal contents compare equal)
        del _active[next(i for i, c in enumerate(_active) if c is counter)]
