"""On the H200, ``T.cumsum`` / ``T.cummax`` (``passes.rules.scans``; CPU tests: tests/test_scans.py)
against float64 references on random tiles: one long line split between threads (a length with
and without divisors), lines of shared and fragment tiles along either dimension, reverse, integer
and 16-bit types, and many blocks each scanning its own tile. (The benchmark cases of the
``cumsum`` program family run in test_tilelang_programs.py.)"""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def blockwise_scan(rows, cols, block_rows, dim, threads, kind, reverse, dtype, scope):
    """Each block copies ``block_rows`` rows of ``A`` into a tile, scans it, and writes them to ``B``."""
    op = T.cumsum if kind == "sum" else T.cummax
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def kernel(A: T.Tensor((rows, cols), dtype), B: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, block_rows), threads=threads) as bx:
            s = alloc((block_rows, cols), dtype)
            d = alloc((block_rows, cols), dtype)
            T.copy(A[bx * block_rows:(bx + 1) * block_rows, 0:cols], s)
            op(s, d, dim=dim, reverse=reverse)
            T.copy(d, B[bx * block_rows:(bx + 1) * block_rows, 0:cols])

    return tw.compile(kernel)


def _reference(torch, a, block_rows, dim, kind, reverse):
    parts = []
    for tile in a.double().split(block_rows, dim=0):
        x = tile.flip(dim) if reverse else tile
        out = x.cumsum(dim) if kind == "sum" else x.cummax(dim).values
        parts.append(out.flip(dim) if reverse else out)
    return torch.cat(parts)


@pytest.mark.parametrize("rows, cols, block_rows, dim, threads, kind, reverse, dtype, scope", [
    (1, 1000, 1, 1, 128, "sum", False, "float32", "shared"),  # one line of 1000 over 128 threads
    (1, 997, 1, 1, 256, "sum", True, "float32", "shared"),  # a prime length: guarded runs
    (512, 64, 64, 0, 128, "sum", False, "float32", "shared"),  # columns of each block's tile
    (1000, 100, 16, 1, 256, "max", True, "float16", "fragment"),  # a partial last block
    (256, 128, 8, 1, 128, "sum", False, "int32", "fragment"),
    (300, 40, 32, 0, 64, "sum", True, "bfloat16", "shared"),
])
def test_scans_match_float64(torch, rows, cols, block_rows, dim, threads, kind, reverse, dtype, scope):
    kernel = blockwise_scan(rows, cols, block_rows, dim, threads, kind, reverse, dtype, scope)
    torch_dtype = getattr(torch, dtype)
    if dtype == "int32":
        a = torch.randint(-1000, 1000, (rows, cols), device="cuda", dtype=torch_dtype)
    else:
        a = torch.randn(rows, cols, device="cuda").to(torch_dtype)
    b = torch.full_like(a, 7)
    kernel(a, b)
    want = _reference(torch, a, block_rows, dim, kind, reverse)
    if kind == "max" or dtype == "int32":
        assert torch.equal(b.double(), want)
    else:  # float32 running sums; 16-bit types rounded once from them
        tol = {"float32": 1e-5, "bfloat16": 1e-2}[dtype]
        torch.testing.assert_close(b.double(), want, rtol=tol, atol=tol * 8)
