"""Tile configurations: THE one list of matmul tiles, shared by the launchers, sweeps and compile check.

A matmul program computes one BLOCK_M x BLOCK_N tile of the output and walks K in BLOCK_K chunks.
Every size is a power of two and at least 16 (``tl.dot`` needs 16 in every dimension on NVIDIA
GPUs), and every entry compiles for a T4 (sm_75, 64 KiB of shared memory per block) in fp16:
``tests/test_compile.py`` checks that with ``slower_kernels.aot``.
"""

from dataclasses import asdict, dataclass

import triton


@dataclass(frozen=True)
class TileConfig:
    """One matmul launch configuration."""

    name: str
    block_m: int  # rows of the output tile
    block_n: int  # columns of the output tile
    block_k: int  # chunk of the reduction dimension loaded per step
    num_warps: int  # warps (32 threads each) per program
    num_stages: int  # software-pipelining depth of the K loop (ignored by the interpreter)

    def kwargs(self) -> dict:
        """Keyword arguments for ``matmul``/``linear``: block sizes, num_warps, num_stages."""
        kw = asdict(self)
        del kw["name"]
        return kw


def _tile(block_m: int, block_n: int, block_k: int, num_warps: int, num_stages: int = 2) -> TileConfig:
    name = f"m{block_m}_n{block_n}_k{block_k}"
    return TileConfig(name, block_m, block_n, block_k, num_warps, num_stages)


TILE_CONFIGS: dict[str, TileConfig] = {
    t.name: t
    for t in [
        _tile(16, 16, 16, num_warps=1),  # the smallest legal tile: many programs, little reuse
        _tile(16, 64, 32, num_warps=2),  # decode-shaped: M is 1, so a short tile wastes less
        _tile(16, 128, 64, num_warps=4),
        _tile(32, 32, 32, num_warps=2),
        _tile(32, 64, 32, num_warps=4),
        _tile(64, 64, 32, num_warps=4),  # the blog's tile (DEFAULT_TILE)
        _tile(64, 128, 32, num_warps=4),
        _tile(128, 64, 32, num_warps=4),
        _tile(128, 128, 32, num_warps=8),
    ]
}
DEFAULT_TILE: TileConfig = TILE_CONFIGS["m64_n64_k32"]

# Elementwise kernels (add) use fixed blocks of this many elements.
ELEMENTWISE_BLOCK_SIZE = 1024

# Row kernels (RMSNorm, softmax) hold one whole row in registers: BLOCK_SIZE = next_power_of_2(n_cols).
MAX_ROW_BLOCK_SIZE = 65536


def row_block_size(n_cols: int) -> int:
    """BLOCK_SIZE of a one-row-per-program kernel: the row rounded up to a power of two (>= 16)."""
    return max(16, triton.next_power_of_2(n_cols))


def row_num_warps(block_size: int) -> int:
    """Warps for a row kernel: more threads for longer rows (the heuristic of Triton's tutorials)."""
    if block_size >= 8192:
        return 16
    if block_size >= 2048:
        return 8
    return 4
