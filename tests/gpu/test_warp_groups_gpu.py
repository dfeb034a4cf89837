"""Warp specialisation written by the user (``T.ws``) on the H200: TileLang's four warp-specialised
GEMM examples at the size TileLang's own test runs them, at a ragged size (partial tiles: TMA fills
the missing rows and columns with zeros, the result stores stop at the edges) and with more stages,
each against a float64 product of the same random inputs."""

from __future__ import annotations

import pytest

from tileworkbench.examples.tilelang_programs import warp_specialize as ws
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)

KERNELS = {
    "copy_0_gemm_1": lambda: ws.matmul_ws,
    "copy_1_gemm_0": lambda: ws.matmul_ws,
    "barrier_pipe": lambda: ws.matmul_barrier_pipe,
    "split_n": lambda: ws.matmul_split_n,
    "loops_in_scopes": lambda: ws.matmul_loops_in_scopes,
}
OPTIONS = {"copy_0_gemm_1": {}, "copy_1_gemm_0": {"num_stages": 2, "producer": 1}, "barrier_pipe": {},
           "split_n": {}, "loops_in_scopes": {}}


def _against_float64(torch, c, a, b):
    ref = (a.double() @ b.double())
    err = (c.double() - ref).abs().max().item()
    assert err <= 1e-2 * ref.abs().max().item() + 1e-2, err


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("M, N, K", [(1024, 1024, 1024), (1000, 904, 1000)])
def test_warp_specialised_examples_match_float64(torch, name, M, N, K):
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    kernel = KERNELS[name]()
    c = kernel(a, b, 128, 128, 64, **OPTIONS[name])
    torch.cuda.synchronize()
    _against_float64(torch, c, a, b)


@pytest.mark.parametrize("stages", [3, 4])
def test_more_versions_of_the_tiles_and_barriers(torch, stages):
    torch.manual_seed(stages)
    a = torch.randn(512, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 768, device="cuda", dtype=torch.float16)
    c = ws.matmul_ws(a, b, 128, 128, 64, num_stages=stages)
    torch.cuda.synchronize()
    _against_float64(torch, c, a, b)
