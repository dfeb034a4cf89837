"""On the GPU against float64 on random inputs: two pipelined loops filling the same shared tiles
through one allocation (CPU tests: tests/test_pipelined_loops_sharing_tiles.py). Before the fix
the first loop wrote its tiles unswizzled and its wgmma read them swizzled."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_pipelined_loops_sharing_tiles import two_loops

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("stages", [(2, 2), (2, 3), (3, 2), (2, 1), (0, 3), (2, None)])
def test_two_loops_sum_both_halves(torch, stages):
    kernel = tw.compile(two_loops(*stages))
    a = torch.randn(256, 64, device="cuda").half()
    b = torch.randn(256, 64, device="cuda").half()
    c = torch.full((64, 64), float("nan"), device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(c.double(), a.double().T @ b.double(), rtol=1e-3, atol=1e-2)
