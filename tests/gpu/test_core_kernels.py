"""Issue-2 kernels on the GPU, each against a float32 torch reference on fresh random data."""

import re

import pytest

import tileworkbench as tw
from tileworkbench.examples import elementwise_add, matmul, row_sum
from tileworkbench.examples.gemm import gemm_row_max
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def rel_err(out, ref):
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def test_elementwise_add(torch):
    kernel = tw.compile(elementwise_add(1000, 1030, 32, 128), out_idx=[2])
    a = torch.randn(1000, 1030, device="cuda", dtype=torch.float16)
    b = torch.randn(1000, 1030, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), a + b)


def test_row_sum(torch):
    kernel = tw.compile(row_sum(1024, 512, 16), out_idx=[1])
    a = torch.randn(1024, 512, device="cuda")
    assert rel_err(kernel(a), a.double().sum(1)) < 1e-5


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1000, 1030, 770)])
@pytest.mark.parametrize("path", ["wgmma", "mma_sync"])
@pytest.mark.parametrize("trans_B", [False, True])
def test_gemm_with_copies(torch, dtype, stages, shape, path, trans_B):
    M, N, K = shape
    configs = {tw.PassConfigKey.TW_DISABLE_WGMMA: path == "mma_sync"}
    program = matmul(M, N, K, 128, 128, 32, dtype=dtype, num_stages=stages, trans_B=trans_B)
    kernel = tw.compile(program, out_idx=[2], pass_configs=configs)
    assert ("tw::wgmma_gemm_ss" in kernel.get_kernel_source()) == (path == "wgmma")
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(N, K, device="cuda", dtype=tdt) if trans_B else torch.randn(K, N, device="cuda", dtype=tdt)
    c = kernel(a, b)
    ref = a.double() @ (b.double().T if trans_B else b.double())
    assert rel_err(c, ref) < (1e-2 if dtype == "bfloat16" else 2e-3)


def test_gemm_profiler_assert_allclose(torch):
    kernel = tw.compile(matmul(1024, 1024, 1024, 128, 128, 32), out_idx=[2])
    kernel.get_profiler().assert_allclose(lambda a, b: (a.float() @ b.float()).half(), atol=1e-2, rtol=1e-2)
    with pytest.raises(AssertionError):  # the check can fail: a wrong reference is caught
        kernel.get_profiler().assert_allclose(lambda a, b: (a.float() @ b.float() + 1).half(), atol=1e-2, rtol=1e-2)


def test_each_supply_type_draws_tilelangs_distribution(torch):
    from tileworkbench.utils.tensor import TensorSupplyType, get_tensor_supply

    param = {"shape": (512, 512), "dtype": "float32"}
    normal = get_tensor_supply(TensorSupplyType.Normal)(param).double()
    assert abs(normal.mean().item() + 1.0) < 0.02 and abs(normal.std().item() - 1.0) < 0.02  # TileLang's (-1, 1)
    auto = get_tensor_supply(TensorSupplyType.Auto)(param).double()
    assert abs(auto.mean().item()) < 0.02 and abs(auto.std().item() - 1.0) < 0.02
    uniform = get_tensor_supply(TensorSupplyType.Uniform)(param)
    assert uniform.min().item() >= -1.0 and uniform.max().item() < 1.0 and uniform.std().item() > 0.5
    integers = get_tensor_supply(TensorSupplyType.Integer)(param)
    assert set(integers.unique().tolist()) == {-2.0, -1.0, 0.0, 1.0, 2.0}


def test_kernel_accepts_cupy_and_preallocated_outputs(torch):
    import cupy

    kernel = tw.compile(elementwise_add(256, 256, 32, 128, dtype="float32"), out_idx=[2])
    a, b = cupy.random.standard_normal((256, 256), dtype=cupy.float32), cupy.random.standard_normal((256, 256), dtype=cupy.float32)
    assert cupy.allclose(kernel(a, b), a + b)
    c = cupy.full((256, 256), cupy.nan, dtype=cupy.float32)
    kernel(a, b, c)
    assert cupy.allclose(c, a + b)


def test_wrong_argument_is_a_clear_error(torch):
    kernel = tw.compile(elementwise_add(256, 256, 32, 128, dtype="float32"), out_idx=[2])
    a = torch.randn(256, 255, device="cuda")
    with pytest.raises(tw.KernelRuntimeError, match="shape"):
        kernel(a, a)


def test_rasterized_gemm_with_a_short_last_panel(torch):
    # 15 block rows in panels of 10: the second panel has 5 rows
    kernel = tw.compile(matmul(1920, 1152, 512, 128, 128, 32, num_stages=3), out_idx=[2])
    assert "tw_panel_rows" in kernel.get_kernel_source()
    a = torch.randn(1920, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 1152, device="cuda", dtype=torch.float16)
    assert rel_err(kernel(a, b), a.double() @ b.double()) < 2e-3


@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("shape", [(1000, 1030, 770), (512, 768, 1024)])
def test_mma_sync_gemm_with_wide_rows(torch, trans_B, shape):
    # block_K = block_N = 128: A and B tiles of 256-byte rows, swizzled by row (choose_shared_layouts)
    # where threads fill them; ldmatrix reads them plain and transposed
    M, N, K = shape
    program = matmul(M, N, K, 128, 128, 128, num_stages=2, trans_B=trans_B)
    kernel = tw.compile(program, out_idx=[2], pass_configs={tw.PassConfigKey.TW_DISABLE_WGMMA: True})
    src = kernel.get_kernel_source()
    assert "tw::wgmma_gemm_ss" not in src and "swizzled<tw::half, 256>" in src
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16) if trans_B else torch.randn(K, N, device="cuda",
                                                                                          dtype=torch.float16)
    ref = a.double() @ (b.double().T if trans_B else b.double())
    assert rel_err(kernel(a, b), ref) < 2e-3


@pytest.mark.parametrize("trans_A, trans_B, block_N", [(False, False, 128), (False, False, 256), (False, True, 64),
                                                       (False, True, 128), (True, False, 128), (True, True, 128)])
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1000, 1030, 770)])
def test_wgmma_with_warpgroups_side_by_side_along_n(torch, shape, trans_A, trans_B, block_N):
    # 64-row tiles on 256 threads: each warpgroup computes 64 x block_N / 2 (rules.gemm._warpgroup_split)
    M, N, K = shape
    kernel = tw.compile(matmul(M, N, K, 64, block_N, 64, num_stages=3, threads=256, trans_A=trans_A,
                               trans_B=trans_B), out_idx=[2])
    assert re.search(r"tw::wgmma_gemm_ss<64, \d+, 64, 1, [^>]*, 2>\(", kernel.get_kernel_source())
    a = torch.randn(K, M, device="cuda", dtype=torch.float16) if trans_A else torch.randn(M, K, device="cuda",
                                                                                          dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16) if trans_B else torch.randn(K, N, device="cuda",
                                                                                          dtype=torch.float16)
    ref = (a.double().T if trans_A else a.double()) @ (b.double().T if trans_B else b.double())
    assert rel_err(kernel(a, b), ref) < 2e-3


@pytest.mark.parametrize("trans_B", [False, True])
@pytest.mark.parametrize("block_M, threads", [(64, 128), (128, 256)])
def test_wgmma_instructions_side_by_side_along_a_warpgroup_s_columns(torch, trans_B, block_M, threads):
    # 512 columns a warpgroup: two m64n256 instructions a k-step (rules.gemm._in_chunks)
    M, N, K = 1000, 1030, 770
    kernel = tw.compile(matmul(M, N, K, block_M, 512, 64, num_stages=2, threads=threads, trans_B=trans_B),
                        out_idx=[2])
    assert re.search(r"tw::wgmma_gemm_ss<[^>]*m64n256k16[^>]*, 1, 2>\(", kernel.get_kernel_source())
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16) if trans_B else torch.randn(K, N, device="cuda",
                                                                                          dtype=torch.float16)
    ref = a.double() @ (b.double().T if trans_B else b.double())
    assert rel_err(kernel(a, b), ref) < 2e-3


def test_row_max_of_an_accumulator_split_along_n(torch):
    kernel = tw.compile(gemm_row_max(512, 512, 256), out_idx=[2])
    assert ", 2>(" in kernel.get_kernel_source()
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float()).reshape(512, 4, 128).amax(dim=2)
    torch.testing.assert_close(kernel(a, b), ref, rtol=1e-3, atol=1e-3)
