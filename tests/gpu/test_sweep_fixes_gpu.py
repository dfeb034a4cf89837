"""On the H200, the programs that the random sweeps of 2026-12-04 found refused or stopping with an
internal error, now compiled (their CPU tests: tests/tilelang_compat/test_thread_dims.py,
test_one_stage_stack.py, test_dynamic.py, tests/test_warp_specialize.py): each against a float64
reference on random inputs."""

from __future__ import annotations

import pytest

import tileworkbench as tilelang
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("block_n,reduce_threads", [(32, 1), (1, 32), (8, 32)])
def test_split_k_gemv_with_a_thread_dimension_of_one(torch, block_n, reduce_threads):
    from tileworkbench.examples.tilelang_programs.gemv import splitk_gemv

    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 1024, device="cuda", dtype=torch.float16)
    kernel = splitk_gemv.compile(N=256, K=1024, BLOCK_N=block_n, BLOCK_K=64, reduce_threads=reduce_threads)
    got = kernel(a, b).double()
    want = b.double() @ a.double()
    torch.testing.assert_close(got, want, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("stages", [1, 2])
def test_a_one_stage_ring_of_tiles_in_warp_specialised_scopes(torch, stages):
    from tileworkbench.examples.tilelang_programs.warp_specialize import matmul_loops_in_scopes

    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
    kernel = matmul_loops_in_scopes.compile(M=512, N=384, K=256, block_M=128, block_N=128, block_K=64,
                                            num_stages=stages)
    torch.testing.assert_close(kernel(a, b).double(), a.double() @ b.double(), rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("k", [520, 1001], ids=["aligned-k", "odd-k"])
def test_a_dynamic_gemm_at_block_k_64_takes_every_k(torch, k):
    """block_K=64 warp-specialises the aligned form (TMA); an odd K takes the form for any size,
    which no longer loads by TMA and so no longer fails at the launch."""
    from tileworkbench.examples.tilelang_programs import dynamic_shape as example

    config = dict(example.CONFIG, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128)
    a = torch.randn(300, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, 200, device="cuda", dtype=torch.float16)
    got = example.matmul_dynamic_mnk(a, b, **config)
    torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=1e-2, atol=1e-1)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_without_stages(torch, causal):
    """num_stages=0: not warp-specialised (the split had no stage to fill)."""
    from tileworkbench.examples.attention import mha_fwd

    q, k, v = (torch.randn(1, 4, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    kernel = tilelang.compile(mha_fwd(1, 4, 512, 64, causal, block_M=128, block_N=64, num_stages=0), out_idx=[3])
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(kernel(q, k, v).float(), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("m,n,block_m,block_n,threads", [(8, 200, 1, 256, 256), (100, 32, 8, 32, 32)])
def test_a_partial_last_tile_stored_by_tma_stays_inside_the_tensor(torch, m, n, block_m, block_n, threads):
    """The thread-level interpreter's sweep (2026-12-05) found these tiles stored with one bulk copy,
    which wrote past each row's end (into the next row, which another block may already have
    written: wrong values in C) and past the tensor's end; the tensor map's store clips them."""
    from tileworkbench.examples.tilelang_programs import elementwise

    a, b = (torch.randn(m, n, device="cuda", dtype=torch.float32) for _ in range(2))
    kernel = elementwise.elementwise_add.compile(M=m, N=n, block_M=block_m, block_N=block_n, threads=threads,
                                                 in_dtype=tilelang.language.float32,
                                                 out_dtype=tilelang.language.float32)
    for _ in range(20):  # blocks finish in a different order each time
        torch.testing.assert_close(kernel(a, b), a + b, rtol=0, atol=0)
