"""Persistent warp-specialised GEMMs on the GPU: more tiles than multiprocessors (every block walks
several tiles, the ring's phases run on across them), ragged edges, panel order; checked against
float64 torch references and bit for bit against the same kernel with one block per tile."""

import os
import sys

import pytest

import tileworkbench as tw
from tileworkbench.examples import lower_triangular_matmul, matmul
from tileworkbench.testing import gpu_marks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from test_inline_index_lets import named_offsets_gemm  # noqa: E402

pytestmark = gpu_marks(9, 0)

ONE_BLOCK_PER_TILE = {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}
CASES = [  # (M, N, K), (block_M, block_N, block_K), stages, threads
    ((4096, 4096, 512), (128, 256, 64), 3, 256),  # 512 tiles, panels of 10 tile rows
    ((1000, 1024, 776), (128, 128, 64), 3, 128),  # ragged M and K, one consumer warpgroup
    ((3000, 2048, 200), (128, 256, 64), 2, 256),  # 2 stages, K not a multiple of the tile
]


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape,block,stages,threads", CASES)
def test_persistent_gemm_matches_float64_and_one_block_per_tile(torch, dtype, shape, block, stages, threads):
    M, N, K = shape
    program = matmul(M, N, K, *block, dtype=dtype, num_stages=stages, threads=threads)
    persistent = tw.compile(program, out_idx=[2])
    assert persistent.trace.to_dict()["kernel"] and "rt.persistent_blocks" in persistent.get_host_source()
    plain = tw.compile(program, out_idx=[2], pass_configs=ONE_BLOCK_PER_TILE)
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    outs = []
    for kernel in (persistent, plain):
        c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)  # an element never written shows
        kernel(a, b, c)
        outs.append(c)
    ref = a.double() @ b.double()
    assert rel_err(outs[0], ref) < (1e-2 if dtype == "bfloat16" else 2e-3)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)  # same k order per tile: equal bits


@pytest.mark.parametrize("M,N", [(1024, 1024), (1000, 768)])
def test_a_trip_count_that_depends_on_the_block_matches_float64(torch, M, N):
    # Row block by runs (by + 1) * 2 stages: warp-specialised with one block per tile (a persistent
    # ring would need the same count for every tile), every stage count from 2 to 16 exercised.
    kernel = tw.compile(lower_triangular_matmul(M, N), out_idx=[2])
    assert kernel.trace.to_dict()["kernel"] and "rt.persistent_blocks" not in kernel.get_host_source()
    a = torch.tril(torch.randn(M, M, device="cuda", dtype=torch.float16))
    b = torch.randn(M, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    assert rel_err(c, a.double() @ b.double()) < 2e-3


@pytest.mark.parametrize("reassign", [False, True])
def test_a_gemm_with_named_tile_offsets_matches_float64(torch, reassign):
    # m0 = by * 128 and kk = k * 64 are inlined (passes/inline_index_lets.py): the kernel is
    # examples.matmul's, persistent and warp-specialised, and computes the same bits. A re-assigned
    # m0 stays a name computed once per block, so persistence is refused (else every tile of a
    # block would read the first tile's rows); the ragged M also checks the edges.
    M, N, K = 1000, 1024, 768
    kernel = tw.compile(named_offsets_gemm(M, N, K, reassign=reassign), out_idx=[2])
    assert ("rt.persistent_blocks" in kernel.get_host_source()) == (not reassign)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    assert rel_err(c, a.double() @ b.double()) < 2e-3
    if not reassign:
        plain = tw.compile(matmul(M, N, K, 128, 256, 64, "float16", "float16", 3, 256), out_idx=[2])
        torch.testing.assert_close(c, plain(a, b), rtol=0, atol=0)
