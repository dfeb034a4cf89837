"""A tile one warpgroup's threads write and another's wgmma reads after an mbarrier, on the GPU
against float64 on random inputs (the fence before the arrival: tests/test_fence_before_arrivals.py)."""

from __future__ import annotations

import tileworkbench as tw
from tileworkbench.testing import gpu_marks
from tests.test_fence_before_arrivals import handed_over

pytestmark = gpu_marks(9, 0)


def test_a_tile_handed_over_through_an_mbarrier(torch):
    for by_threads in (True, False):
        a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
        c = torch.full((64, 64), float("nan"), device="cuda")
        r = torch.randn(128, device="cuda")
        want_r = (r.double() * 2).flip(0)
        tw.compile(handed_over(by_threads))(a, b, c, r)
        torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-3, atol=1e-2)
        torch.testing.assert_close(r.double(), want_r)
