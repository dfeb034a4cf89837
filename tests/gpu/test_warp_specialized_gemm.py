"""Warp-specialised T.copy GEMMs on the GPU against float64 torch references, fresh random data:
ragged M and K (TMA fills the out-of-bounds part of a tile with zeros), transposed B, one and
two consumer warpgroups, two to four stages, and the same kernel with the pass switched off."""

import pytest

import tileworkbench as tw
from tileworkbench.examples import matmul, matmul_tma_copy
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)

CASES = [  # (M, N, K), (block_M, block_N, block_K), stages, threads
    ((1024, 1024, 1024), (128, 256, 64), 3, 256),
    ((1000, 1024, 776), (128, 256, 64), 4, 256),
    ((1000, 1024, 776), (128, 128, 64), 2, 128),
    ((2048, 512, 1000), (256, 128, 64), 4, 256),
]


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("shape,block,stages,threads", CASES)
def test_warp_specialized_gemm_matches_float64(torch, dtype, trans_B, shape, block, stages, threads):
    M, N, K = shape
    program = matmul(M, N, K, *block, dtype=dtype, num_stages=stages, threads=threads, trans_B=trans_B)
    kernel = tw.compile(program, out_idx=[2])
    assert kernel.trace.to_dict()["passes"] and "ws_producer" in kernel.trace.ir_after("warp_specialize")
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(N, K, device="cuda", dtype=tdt) if trans_B else torch.randn(K, N, device="cuda", dtype=tdt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)  # an element never written shows
    kernel(a, b, c)
    ref = a.double() @ (b.double().T if trans_B else b.double())
    assert rel_err(c, ref) < (1e-2 if dtype == "bfloat16" else 2e-3)


def test_same_result_with_the_pass_off(torch):
    program = matmul(1000, 1024, 776, 128, 256, 64, num_stages=3, threads=256)
    ws = tw.compile(program, out_idx=[2])
    plain = tw.compile(program, out_idx=[2], pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    assert "ws_producer" not in plain.trace.ir_after("simplify")
    a = torch.randn(1000, 776, device="cuda", dtype=torch.float16)
    b = torch.randn(776, 1024, device="cuda", dtype=torch.float16)
    # both accumulate in fp32 in the same k order (one wgmma chain per 64-row slice): equal bits
    torch.testing.assert_close(ws(a, b), plain(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape, build, configs", [
    ((1000, 1024, 776), lambda dt: matmul(1000, 1024, 776, 128, 256, 64, dt, dt, 3, 256), {}),  # 2 consumer warpgroups
    ((1000, 1024, 776), lambda dt: matmul(1000, 1024, 776, 128, 128, 64, dt, dt, 2, 128), {}),  # one, ragged edges
    ((1024, 1024, 1024), lambda dt: matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, dt, dt, "float32", 128, 2),
     {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}),  # the spec's GEMM
])
def test_stmatrix_epilogue_writes_what_paired_stores_write(torch, dtype, shape, build, configs):
    """The accumulators leave through stmatrix (tw::store_matrix_x4) by default: the same bits as
    with one 32-bit store per pair, and right against float64."""
    program = build(dtype)
    matrices = tw.compile(program, out_idx=[2], pass_configs=configs)
    pairs = tw.compile(program, out_idx=[2], pass_configs={**configs, tw.PassConfigKey.TW_DISABLE_MATRIX_STORES: True})
    assert "tw::store_matrix_x4(" in matrices.get_kernel_source() and "tw::store_matrix_x4(" not in pairs.get_kernel_source()
    M, N, K = shape
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    outs = []
    for kernel in (matrices, pairs):
        c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
        kernel(a, b, c)
        outs.append(c)
    assert rel_err(outs[0], a.double() @ b.double()) < (1e-2 if dtype == "bfloat16" else 2e-3)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)


TRANS_A_CASES = [  # shape, block, stages, threads, pass configs, the path the gemm takes
    ((1024, 1024, 1024), (128, 256, 64), 3, 256, {}, "tw_wgmma_m64n256k16"),  # warp-specialised, persistent
    ((1024, 1024, 512), (128, 128, 64), 2, 128, {}, "tw_wgmma_m64n128k16"),
    ((1024, 512, 1024), (64, 128, 64), 2, 128, {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
     "tw_wgmma_m64n128k16"),  # one 128-byte panel of M
    ((1000, 1024, 776), (128, 128, 64), 2, 128, {}, "tw_wgmma_m64n128k16"),  # rows of 1000: a TMA copy per panel
    ((1001, 1024, 776), (128, 128, 64), 2, 128, {}, ", 0, false>("),  # rows of 2002 bytes: threads fill the panels
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("shape,block,stages,threads,configs,path", TRANS_A_CASES)
def test_transpose_a_gemm_matches_float64(torch, dtype, trans_B, shape, block, stages, threads, configs, path):
    """A stored K x M (T.gemm(transpose_A=True)): wgmma reads it M-major from 128-byte panels."""
    M, N, K = shape
    program = matmul(M, N, K, *block, dtype=dtype, num_stages=stages, threads=threads, trans_A=True, trans_B=trans_B)
    kernel = tw.compile(program, out_idx=[2], pass_configs=configs)
    assert path in kernel.get_kernel_source()
    tdt = getattr(torch, dtype)
    a = torch.randn(K, M, device="cuda", dtype=tdt)
    b = torch.randn(N, K, device="cuda", dtype=tdt) if trans_B else torch.randn(K, N, device="cuda", dtype=tdt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    kernel(a, b, c)
    ref = a.double().T @ (b.double().T if trans_B else b.double())
    assert rel_err(c, ref) < (1e-2 if dtype == "bfloat16" else 2e-3)
