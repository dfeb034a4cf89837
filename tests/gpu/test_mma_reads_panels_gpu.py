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


def test_a_grouped_gemm_whose_group_is_found_before_its_loop(torch):
    """TileLang's grouped GEMM (example_grouped_gemm_fwd.py) came out wrong when its loads, which
    read the group found before the loop, ran on a producer warpgroup that never searched."""
    from tileworkbench.examples.edge_cases import grouped_gemm_found_in_a_loop

    rows = (64, 128, 64)
    a = torch.randn(sum(rows), 128, device="cuda", dtype=torch.float16)
    b = torch.randn(3, 128, 128, device="cuda", dtype=torch.float16)
    starts = torch.tensor([0, 64, 192], device="cuda", dtype=torch.int32)
    c = torch.full((sum(rows), 128), float("nan"), device="cuda", dtype=torch.float16)
    tw.compile(grouped_gemm_found_in_a_loop())(a, b, starts, c)
    want = torch.cat([a[0:64].double() @ b[0].double(), a[64:192].double() @ b[1].double(),
                      a[192:].double() @ b[2].double()])
    np.testing.assert_allclose(c.double().cpu().numpy(), want.cpu().numpy(), rtol=1e-2, atol=0.1)


def test_the_paged_tiles_sum_issues_each_page_it_reads(torch):
    from tileworkbench.examples.edge_cases import paged_tiles_summed

    a = torch.randn(8 * 32, 64, device="cuda")
    table = torch.randperm(8, device="cuda").to(torch.int32)
    out = torch.full((32, 64), float("nan"), device="cuda")
    tw.compile(paged_tiles_summed())(a, table, out)
    np.testing.assert_allclose(out.cpu().numpy(), a.double().reshape(8, 32, 64).sum(0).cpu().numpy(), rtol=1e-5, atol=1e-4)


def test_a_tf32_mma_gemm_on_a_paneled_tile(torch):
    a, b, d = (torch.randn(shape, device="cuda") for shape in ((128, 64), (32, 64), (128, 32)))
    outs = [torch.full(shape, float("nan"), device="cuda") for shape in ((128, 32), (32, 64), (32, 128))]
    tw.compile(tile_read_by_wgmma_and_mma(k=64, dtype="float32"))(a, b, d, *outs)
    a64, b64, d64 = (x.double().cpu().numpy() for x in (a, b, d))
    for got, want in zip(outs, (a64 @ b64.T, d64.T @ a64, b64 @ a64.T)):
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-2, atol=5e-2)  # TF32
