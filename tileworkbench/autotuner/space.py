"""Tile configurations to search: block sizes, pipeline stages, threads."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

SMEM_LIMIT_BYTES = 227 * 1024  # dynamic shared memory a block may have on sm_90


@dataclass(frozen=True, order=True)
class Config:
    block_M: int
    block_N: int
    block_K: int
    num_stages: int
    threads: int

    def as_kwargs(self) -> dict:
        """Keyword arguments for a builder such as ``examples.gemm.matmul``."""
        return asdict(self)

    @property
    def name(self) -> str:
        return f"{self.block_M}x{self.block_N}x{self.block_K} s{self.num_stages} t{self.threads}"

    def pipeline_smem_bytes(self, element_bytes: int = 2) -> int:
        """Shared memory of the A and B tiles over all stages (what dominates a GEMM's plan)."""
        return (self.block_M * self.block_K + self.block_K * self.block_N) * self.num_stages * element_bytes


def config_space(block_M=(64, 128), block_N=(64, 128, 256), block_K=(32, 64), num_stages=(2, 3, 4, 8),
                 threads=(128, 256), element_bytes: int = 2, smem_limit: int = SMEM_LIMIT_BYTES) -> list[Config]:
    """Every combination whose pipelined A/B tiles fit in shared memory (the rest could never launch).

    Eight stages are in the default because a short K loop wants much of K in flight from the
    start: 64x128x64 tiles at 1024^3 run 0.86x cuBLAS with 4 stages, 1.00x with 8
    (scripts/experiments/small_square_tiles.py)."""
    out = [Config(*c) for c in itertools.product(block_M, block_N, block_K, num_stages, threads)]
    return [c for c in out if c.pipeline_smem_bytes(element_bytes) <= smem_limit]
