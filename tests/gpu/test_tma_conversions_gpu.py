"""On the GPU against float64 on random inputs: a pipelined GEMM whose float32 A is loaded into a
float16 tile (a converting load, kept the threads' rather than a TMA copy; CPU tests:
tests/test_tma_conversions.py)."""

from __future__ import annotations

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_tma_conversions import converting_gemm

pytestmark = gpu_marks(9, 0)


def test_the_converting_gemm_matches_float64(torch):
    kernel = tw.compile(converting_gemm())
    a = torch.randn(256, 64, device="cuda")
    b = torch.randn(256, 64, device="cuda").half()
    c = torch.full((64, 64), float("nan"), device="cuda")
    kernel(a, b, c)
    want = a.half().double().T @ b.double()
    torch.testing.assert_close(c.double(), want, rtol=1e-3, atol=1e-2)
