"""GEMMs whose tensors' rows are not a whole number of 128-byte panels (N = 1000, 4000; A^T with
M = 1000) on the GPU: each panel of a tile is a TMA copy of its own (passes/rules/tma.py
``tma_copies``), panels past the tensor's edge are zero-filled on load and not written on store.
Checked against float64 torch references, and that nothing past the end of C is written."""

import pytest

import tileworkbench as tw
from tileworkbench.examples import matmul, matmul_tma_copy, matmul_tma_copy_store
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)

NO_WS = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
GUARD = 4096  # elements after C, poisoned, that must stay so


def rel_err(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def run_with_guard(torch, kernel, a, b, M, N, tdt):
    """C as the head of a NaN-filled buffer with GUARD elements after it."""
    flat = torch.full((M * N + GUARD,), float("nan"), device="cuda", dtype=tdt)
    c = flat[:M * N].view(M, N)
    kernel(a, b, c)
    torch.cuda.synchronize()
    assert torch.isnan(flat[M * N:]).all(), "the kernel wrote past the end of C"
    return c


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [
    (1000, 1000, 1000),  # the last B panel of the last column tile is 40 columns in the tensor
    (4096, 4000, 512),   # the last column tile's fourth panel lies wholly past the edge
])
def test_warp_specialized_gemm_with_ragged_n_matches_float64(torch, dtype, shape):
    M, N, K = shape
    program = matmul(M, N, K, 128, 256, 64, dtype, dtype, 3, 256)
    kernel = tw.compile(program, out_idx=[2])
    assert kernel.trace.to_dict()["kernel"] and "ws_producer" in kernel.trace.ir_after("warp_specialize")
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    c = run_with_guard(torch, kernel, a, b, M, N, tdt)
    assert rel_err(c, a.double() @ b.double()) < (1e-2 if dtype == "bfloat16" else 2e-3)
    plain = tw.compile(program, out_idx=[2], pass_configs={tw.PassConfigKey.TW_DISABLE_PERSISTENT: True})
    torch.testing.assert_close(c, plain(a, b), rtol=0, atol=0)  # same k order per tile: equal bits


def test_transposed_a_with_ragged_m_matches_float64(torch):
    M, N, K = 1000, 1024, 776
    kernel = tw.compile(matmul(M, N, K, 128, 128, 64, "float16", "float16", 2, 128, trans_A=True), out_idx=[2])
    assert "ws_producer" in kernel.trace.ir_after("warp_specialize")
    a_t = torch.randn(K, M, device="cuda", dtype=torch.float16)  # A stored K x M
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = run_with_guard(torch, kernel, a_t, b, M, N, torch.float16)
    assert rel_err(c, a_t.double().T @ b.double()) < 2e-3


@pytest.mark.parametrize("builder", [matmul_tma_copy, matmul_tma_copy_store])
def test_spec_gemms_with_ragged_n_match_float64(torch, builder):
    M, N, K = 1024, 1000, 1024
    kernel = tw.compile(builder(M, N, K, 128, 128, 32, "float16", "float16", "float32", 128, 2), out_idx=[2],
                        pass_configs=NO_WS)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = run_with_guard(torch, kernel, a, b, M, N, torch.float16)
    assert rel_err(c, a.double() @ b.double()) < 2e-3
