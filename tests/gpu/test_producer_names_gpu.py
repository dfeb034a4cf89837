"""The names a warp-specialised producer's loads read, on the GPU against float64 numpy on random
inputs: the scalar work before the loop that both roles run (TileLang's grouped GEMM: the group
search; once the producer loaded group 0's tiles), the loop body's names the producer computes
again (a paged GEMM: ``start = Table[k] * 128``), and a search the producer cannot run (the kernel
keeps one role). Also the plain pipeline's issued copies that compute such names for themselves, and a B
tile the consumers rewrite between warp-specialised gemms."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks
from tests.test_pipelined_lets import _paged_gemm, _searched_in_shared

pytestmark = gpu_marks(9, 0)


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


def test_a_paged_gemm_whose_producer_computes_its_page(torch):
    kernel = tw.compile(_paged_gemm())
    assert kernel.record["device_source"].count("start_producer") == 2
    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    table = torch.randperm(4, device="cuda").to(torch.int32)
    c = torch.full((64, 128), float("nan"), device="cuda")
    kernel(a, b, table, c)
    a64, b64 = a.double().cpu().numpy(), b.double().cpu().numpy()
    want = sum(a64 @ b64[t * 128:(t + 1) * 128].T for t in table.cpu().tolist())
    np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-3, atol=1e-2)


def test_a_group_searched_in_shared_memory_on_one_role(torch):
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(2, 128, 128, device="cuda", dtype=torch.float16)
    starts = torch.tensor([0, 128], device="cuda", dtype=torch.int32)
    c = torch.full((256, 128), float("nan"), device="cuda", dtype=torch.float16)
    tw.compile(_searched_in_shared(False))(a, b, starts, c)
    want = torch.cat([a[:128].double() @ b[0].double(), a[128:].double() @ b[1].double()])
    np.testing.assert_allclose(c.double().cpu().numpy(), want.cpu().numpy(), rtol=1e-2, atol=0.1)


def test_a_b_tile_the_consumers_rescale_between_warp_specialised_gemms(torch):
    """The consumers write B after each gemm; the next iteration's wgmma reads it through the
    async proxy: the fence at the top of their loop stays (elide_proxy_fences)."""
    from tests.test_warp_specialize import b_loaded_once

    a = torch.randn(512, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    c = torch.full((512, 128), float("nan"), device="cuda")
    tw.compile(b_loaded_once(rescale_b=True))(a, b, c)
    a64, b64 = a.double().cpu().numpy(), b.double().cpu().numpy()
    want = np.concatenate([a64[t * 64:(t + 1) * 64] @ (b64 * 0.5 ** t).T for t in range(8)])
    np.testing.assert_allclose(c.cpu().numpy(), want, rtol=1e-3, atol=1e-3)
