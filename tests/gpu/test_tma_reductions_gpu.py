"""On the GPU against float64 on random inputs: ``T.atomic_add(region, shared_tile, use_tma=True)``
as one TMA reduction, through a tensor map (head rows of a 4-D tensor, six blocks adding into each
region, the last row tile clipped at the tensor's end; with and without the tensor read again) and
as contiguous bytes (CPU tests: tests/test_tma_reductions.py)."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_tma_reductions import DIM, HEADS, SEQ, SPLITS, heads_kernel, rows_in_turn

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("read_after", [False, True], ids=["only reduced", "read again"])
def test_head_tiles_reduce_into_their_rows(torch, read_after):
    kernel = tw.compile(heads_kernel(read_after))
    x = torch.randn(2, SEQ, HEADS, DIM, device="cuda")
    dq = torch.randn(2, SEQ, HEADS, DIM, device="cuda")
    want = dq.double() + x.double() * sum(range(1, SPLITS + 1))
    y = torch.full_like(x, float("nan"))
    kernel(x, dq, y)
    torch.testing.assert_close(dq.double(), want, rtol=1e-5, atol=1e-4)
    if read_after:  # each block read dQ after its own adds landed (the others' may have too)
        assert torch.isfinite(y).all()


def test_contiguous_rows_reduce_as_bytes(torch):
    kernel = tw.compile(rows_in_turn)
    a = torch.randn(256, 128, device="cuda")
    c = torch.randn(128, 128, device="cuda")
    want = c.double().clone()
    for bx in range(4):
        for it in range(4):
            want[it * 32:it * 32 + 32] += a[bx * 32 + it * 16:bx * 32 + it * 16 + 32].double() * (it + 1)
    kernel(a, c)
    torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-4)
