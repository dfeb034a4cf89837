"""On the GPU, results stored from accumulators two at a time (``tw::store_pair``; CPU tests:
tests/test_pair_stores.py): float32 pairs into a shared tile, pairs behind a condition on their row
(half the rows a round, as TileLang's sparse MLA backward stores them), and a GEMM whose last rows
lie past M (each row's pairs behind its guard), against float64 references on random inputs."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul
from tileworkbench.testing import gpu_marks

from test_pair_stores import split_store

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("out_dtype", ["float32", "float16"])
def test_split_store_matches_float64(torch, out_dtype):
    kernel = tw.compile(split_store(out_dtype=out_dtype))
    a = torch.randn(32, 64, device="cuda").half()
    b = torch.randn(64, 128, device="cuda").half()
    c = torch.full((32, 128), float("nan"), device="cuda", dtype=getattr(torch, out_dtype))
    kernel(a, b, c)
    tol = 1e-4 if out_dtype == "float32" else 2e-2
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=tol, atol=tol)


@pytest.mark.parametrize("configs", [{}, {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True,
                                          tw.PassConfigKey.TW_REGISTER_EPILOGUE: True}])
def test_rows_past_m_are_left_alone(torch, configs):
    M, N, K = 1000, 1024, 776
    kernel = tw.compile(matmul(M, N, K, 128, 128, 64, "float16", "float16", 3, 128), pass_configs=configs)
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M + 8, N), 7.0, device="cuda").half()  # rows past M must keep their 7s
    kernel(a, b, c[:M])
    torch.testing.assert_close(c[:M].double(), a.double() @ b.double(), rtol=2e-2, atol=2e-1)
    assert torch.all(c[M:] == 7)
