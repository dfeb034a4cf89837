"""mma.sync gemms reading a tile a wgmma gemm stores in 128-byte panels, on the GPU, against float64
numpy on random inputs (TileLang's GQA backward's dQ was wrong before ``tw::gemm_ss`` read panels)."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.examples.edge_cases import tile_read_by_wgmma_and_mma
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_three_products_of_one_paneled_tile(torch):
    a, b, d = (torch.randn(shape, device="cuda", dtype=torch.float16) for shape in ((128, 192), (32, 192), (128, 32)))
    outs = [torch.full(shape, float("nan"), device="cuda") for shape in ((128, 32), (32, 192), (32, 128))]
    tw.compile(tile_read_by_wgmma_and_mma())(a, b, d, *outs)
    a64, b64, d64 = (x.double().cpu().numpy() for x in (a, b, d))
    for got, want in zip(outs, (a64 @ b64.T, d64.T @ a64, b64 @ a64.T)):
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-3, atol=1e-2)


def test_a_tf32_mma_gemm_on_a_paneled_tile(torch):
    a, b, d = (torch.randn(shape, device="cuda") for shape in ((128, 64), (32, 64), (128, 32)))
    outs = [torch.full(shape, float("nan"), device="cuda") for shape in ((128, 32), (32, 64), (32, 128))]
    tw.compile(tile_read_by_wgmma_and_mma(k=64, dtype="float32"))(a, b, d, *outs)
    a64, b64, d64 = (x.double().cpu().numpy() for x in (a, b, d))
    for got, want in zip(outs, (a64 @ b64.T, d64.T @ a64, b64 @ a64.T)):
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-2, atol=5e-2)  # TF32
