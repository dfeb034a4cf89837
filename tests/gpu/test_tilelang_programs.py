"""TileLang's programs (``tileworkbench.examples.tilelang_programs``) on the H200, each against its
torch reference (float32 or float64) on fresh random inputs with the example's own tolerances; and
the new constructs at sizes the benchmark cases do not reach (partial tiles, other block shapes,
mma.sync accumulators, ``clear=False``, direct calls with tensors)."""

from __future__ import annotations

import importlib

import pytest

import tileworkbench as tilelang
from tileworkbench.bench.tilelang_programs import check
from tileworkbench.examples.tilelang_programs import FAMILIES
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)

CASES = [(family, name) for family in FAMILIES
         for name in importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}").CASES]


def _program(family):
    return importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}")


@pytest.mark.parametrize("family, name", CASES, ids=[n for _, n in CASES])
def test_each_benchmark_case_matches_torch(torch, family, name):
    case = _program(family).CASES[name]
    torch.manual_seed(1)
    result = check(case["compile"](), case, case["inputs"](torch), torch)
    assert result["correct"], result


def test_the_check_counts_non_finite_elements_rather_than_reading_them_as_no_error(torch):
    """A NaN in an output fails the check and is counted: ``max()`` over errors would drop it and
    report a largest error of 0.0 (as TileLang's FP8 indexer output read on 2026-12-05)."""
    want = torch.randn(64, 64, device="cuda")
    got = want.clone()
    got[3, 5], got[7, 1] = float("nan"), float("inf")
    got[0, 0] += 0.25
    case = {"reference": lambda x: want, "rtol": 1e-3, "atol": 1e-3}
    result = check(lambda x: got, case, (want,), torch)
    assert not result["correct"] and result["non_finite"] == 2, result
    assert result["max_abs_err"] == pytest.approx(0.25, rel=1e-3) and "2 non-finite" in result["error"]
    assert check(lambda x: want.clone(), case, (want,), torch) == {"correct": True, "max_abs_err": 0.0, "non_finite": 0}


@pytest.mark.parametrize("M, N, blk_m", [(1000, 1024, 4), (64, 4096, 1), (96, 512, 8)])
def test_rms_norm_called_with_tensors(torch, M, N, blk_m):
    norms = _program("norms")
    a = torch.randn(M, N, device="cuda") * 3
    ref = norms._rms(a)
    torch.testing.assert_close(norms.rms_norm(a, blk_m=blk_m), ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norms.rms_norm_splitk(a, blk_m=blk_m, blk_k=128), ref, rtol=1e-4, atol=1e-4)


def test_layernorm_rows_means_and_deviations(torch):
    norms = _program("norms")
    kernel = norms.layernorm_fwd(256, 1024, blk_m=1, threads=128)
    x = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16) * 2 + 0.5
    g, b = (torch.randn(1024, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    y, mean, rstd = kernel(x, g, b)
    ref_y, ref_mean, ref_rstd = norms._layernorm(x, g, b)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rstd, ref_rstd, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(y.float(), ref_y, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("block_n", [8192, 1024])
def test_softmax_rows_of_large_values(torch, block_n):
    softmax = _program("softmax")
    x = (torch.randn(64, 8192, device="cuda") * 8).half()
    y = softmax.softmax_kernel(x, BLOCK_N=block_n)
    torch.testing.assert_close(y.float(), x.double().softmax(dim=1).float(), rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize("wgmma", [True, False], ids=["wgmma", "mma_sync"])
@pytest.mark.parametrize("block", [(64, 64, 64), (128, 128, 32)])
def test_gemm_epilogue_row_max_and_sum_of_the_accumulator(torch, wgmma, block):
    from tests.tilelang_compat.test_fragment_rows import gemm_softmax_rows

    configs = {tilelang.PassConfigKey.TW_DISABLE_WGMMA: not wgmma}
    kernel = tilelang.jit(pass_configs=configs)(gemm_softmax_rows.fn)
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 128, device="cuda", dtype=torch.float16)
    bm, bn, bk = block
    c = kernel(a, b, block_M=bm, block_N=bn, block_K=bk)
    s = (a.double() @ b.double().T).reshape(256, 512 // bn, bn)  # each block normalises its own columns
    e = torch.exp2(s - s.amax(-1, keepdim=True))
    ref = (e / e.sum(-1, keepdim=True)).reshape(256, 512)
    torch.testing.assert_close(c.double(), ref, rtol=1e-2, atol=1e-3)


def test_reduce_max_with_clear_false_keeps_a_larger_start(torch):
    import tileworkbench.language as T

    @tilelang.jit
    def row_max_from(A, start: float, blk_m=4):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B = T.empty((M,), T.float32)
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), T.float32)
            m = T.alloc_fragment((blk_m,), T.float32)
            T.copy(A[bx * blk_m, 0], x)
            T.fill(m, start)
            T.reduce_max(x, m, dim=1, clear=False)
            T.copy(m, B[bx * blk_m])
        return B

    a = torch.randn(512, 256, device="cuda")
    a[::7] -= 10  # some rows entirely below the start value
    for start in (-1e30, 0.5):
        torch.testing.assert_close(row_max_from(a, start=start), a.amax(1).clamp(min=start))


def test_split_k_gemv_with_a_two_dimensional_block_and_shared_atomic_adds(torch):
    gemv = _program("gemv")
    x = torch.randn(1024, device="cuda", dtype=torch.float16)
    w = torch.randn(256, 1024, device="cuda", dtype=torch.float16)
    ref = w.double() @ x.double()
    for block_n, reduce_threads in ((32, 32), (64, 8)):  # (K must be a multiple of BLOCK_K, as in TileLang's)
        kernel = gemv.splitk_gemv.compile(N=256, K=1024, BLOCK_N=block_n, BLOCK_K=128, reduce_threads=reduce_threads)
        y = kernel(x, w)
        torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("seq_len, dim, causal, block_m, block_n, stages, threads, groups", [
    (1000, 64, False, 64, 64, 1, 128, 1),    # partial tiles: masked keys, zero-filled rows, dropped stores
    (1000, 64, True, 128, 64, 2, 256, 1),
    (512, 128, True, 128, 128, 2, 256, 1),
    (384, 256, False, 64, 64, 1, 128, 1),     # head dim 256: K-major tiles of four 128-byte panels
    (640, 128, False, 128, 128, 2, 256, 3),   # grouped-query: three query heads per K/V head
    (700, 64, True, 128, 64, 1, 256, 3),
])
def test_flash_attention_register_a_pv_against_float64(torch, seq_len, dim, causal, block_m, block_n, stages, threads,
                                                       groups):
    attention = _program("attention")
    kernel = attention.flash_attention(2, 3, seq_len, dim, causal, block_M=block_m, block_N=block_n,
                                       num_stages=stages, threads=threads, groups=groups)
    q = torch.randn(2, 3, seq_len, dim, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(2, 3 // groups, seq_len, dim, device="cuda", dtype=torch.float16) for _ in range(2))
    out = kernel(q, k, v)
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q.double() @ k.double().transpose(-1, -2)) / dim ** 0.5
    if causal:
        scores = scores.masked_fill(~torch.ones(seq_len, seq_len, device="cuda", dtype=torch.bool).tril(),
                                    float("-inf"))
    ref = scores.softmax(-1) @ v.double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("kind", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("M, N, K, block_K, threads", [(512, 384, 1024, 64, 128), (1000, 520, 768, 128, 256),
                                                       (256, 256, 2048, 256, 128)])
def test_fp8_gemm_against_float32_products_of_the_fp8_inputs(torch, kind, M, N, K, block_K, threads):
    gemm_fp8 = _program("gemm_fp8")
    import tileworkbench.language as T

    fp8 = getattr(torch, kind)
    a = torch.randn(M, K, device="cuda").to(fp8)
    b = torch.randn(N, K, device="cuda").to(fp8)
    kernel = gemm_fp8.matmul.compile(M=M, N=N, K=K, block_M=128, block_N=128, block_K=block_K,
                                     dtype=getattr(T, kind), threads=threads)
    c = kernel(a, b)
    exact = a.double() @ b.double().T
    # the kernel's float32 sum rounded once to FP8: within one FP8 step of the exact product
    step = 0.125 if kind == "float8_e4m3fn" else 0.25
    torch.testing.assert_close(c.double(), exact, rtol=step, atol=step)


def test_fp8_conversions_round_as_torch_does(torch):
    import tileworkbench.language as T

    @tilelang.jit
    def convert(X):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float8_e4m3fn)
        Z = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i]
            for i in T.Parallel(128):
                Z[bx * 128 + i] = T.Cast(T.float8_e5m2, X[bx * 128 + i]) * 1.0
        return Y, Z

    x = torch.randn(4096, device="cuda") * 20  # within both types' range (e4m3 up to 448)
    y, z = convert(x)
    assert torch.equal(y.view(torch.uint8), x.to(torch.float8_e4m3fn).view(torch.uint8))
    assert torch.equal(z, x.to(torch.float8_e5m2).float())


def test_kernels_of_one_prim_func_run_in_order_through_their_workspace(torch):
    from tests.tilelang_compat.test_kernel_sequence import two_steps

    kernel = tilelang.compile(two_steps(1 << 16), out_idx=[1])
    a = torch.randn(1 << 16, device="cuda")
    for _ in range(3):  # a fresh workspace each call; the second kernel reads other blocks' elements
        torch.testing.assert_close(kernel(a), a.flip(0) * 2 + 1)


@pytest.mark.parametrize("seqlen_q, seqlen_kv, num_split, block_M, block_N, stages", [
    (128, 8192, 8, 64, 128, 2), (100, 2048, 4, 64, 64, 1), (64, 1024, 1, 64, 128, 2)])
def test_flash_decoding_split_and_combine_against_float64(torch, seqlen_q, seqlen_kv, num_split, block_M, block_N,
                                                          stages):
    decoding = _program("flash_decoding")
    kernel = decoding.flash_decoding(2, 3, seqlen_q, seqlen_kv, 128, num_split=num_split, block_M=block_M,
                                     block_N=block_N, num_stages=stages)
    q = torch.randn(2, 3, seqlen_q, 128, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(2, 3, seqlen_kv, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    ref = ((q.double() @ k.double().transpose(-1, -2)) / 128 ** 0.5).softmax(-1) @ v.double()
    torch.testing.assert_close(kernel(q, k, v).double(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("block_K, stages, density", [(32, 2, 0.5), (64, 3, 0.3), (32, 2, 0.0), (64, 2, 1.0)])
def test_block_sparse_gemm_adds_exactly_the_kept_tiles(torch, block_K, stages, density):
    sparse = _program("blocksparse_gemm")
    M = N = K = 1024
    kernel = sparse.blocksparse_matmul.compile(M=M, N=N, K=K, block_M=128, block_N=128, block_K=block_K,
                                               num_stages=stages, thread_num=128, enable_rasteration=True)
    a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.float16) for _ in range(2))
    mask = torch.rand(8, 8, K // block_K, device="cuda") < density
    ref = torch.zeros(M, N, dtype=torch.float64, device="cuda")
    for k in range(K // block_K):
        keep = mask[:, :, k].repeat_interleave(128, 0).repeat_interleave(128, 1)
        ref += (a[:, k * block_K:(k + 1) * block_K].double() @ b[k * block_K:(k + 1) * block_K].double()) * keep
    torch.testing.assert_close(kernel(a, b, mask).double(), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n, c, h, w, f, k, s, d, p", [
    (2, 64, 10, 12, 128, 3, 1, 1, 1),   # 240 output pixels: the last block's rows hang over
    (3, 64, 17, 9, 256, 3, 2, 2, 2),    # stride, dilation and padding all > 1
    (1, 32, 8, 8, 128, 1, 1, 1, 0),     # a 1x1 filter: a plain GEMM over the pixels
    (2, 12, 9, 9, 128, 3, 1, 1, 1),     # 12 channels: no 16-byte chunks (threads' loads), 108 taps
])
def test_convolution_against_torch(torch, n, c, h, w, f, k, s, d, p):
    conv = _program("convolution")
    kernel = conv.convolution.compile(N=n, C=c, H=h, W=w, F=f, K=k, S=s, D=d, P=p, block_M=64, block_N=128,
                                      block_K=32, num_stages=3, threads=256)
    images = torch.randn(n, h, w, c, device="cuda").half()
    filters = torch.randn(k, k, c, f, device="cuda").half()
    got = kernel(images, filters)
    want = conv._reference(s, p, d)(images, filters)
    assert got.shape == want.shape
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("n", [2, 8, 64, 256, 1024, 8192, 32768])
def test_hadamard_every_level_of_the_butterfly(torch, n):
    """2 and 8: one thread's registers; 64 and 256: a warp's shuffles; 1024 and up: across warps
    through shared memory (32768 in four exchanges)."""
    had = _program("hadamard")
    x = torch.randn(5, n, device="cuda")
    torch.testing.assert_close(had.hadamard(x, n, tilelang.language.float32).double(), had._walsh_hadamard(x),
                               rtol=1e-4, atol=1e-3 * n ** 0.5)


def test_a_persistent_gemm_walks_every_tile_of_a_ragged_problem(torch):
    gemm = _program("gemm")
    kernel = gemm.matmul_persistent.compile(M=1000, N=1030, K=520, block_M=128, block_N=256, block_K=64, threads=256,
                                            num_stages=3, sm_num=7)  # 8 x 5 tiles, 6 waves of 7 blocks
    a, b = (torch.randn(*s, device="cuda", dtype=torch.float16) for s in ((1000, 520), (520, 1030)))
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_atomic_max_and_min_of_floats_of_either_sign_and_of_integers(torch):
    import tileworkbench.language as T

    @T.prim_func
    def extremes(X: T.Tensor((8, 1024), "float32"), I: T.Tensor((8, 1024), "int32"), hi: T.Tensor((8,), "float32"),
                 lo: T.Tensor((8,), "float32"), ihi: T.Tensor((8,), "int32")):
        with T.Kernel(8, 8, threads=128) as (bx, by):  # 8 blocks a row race on each row's three results
            for j in T.Parallel(128):
                T.atomic_max(hi[by], X[by, bx * 128 + j])
                T.atomic_min(lo[by], X[by, bx * 128 + j])
                T.atomic_max(ihi[by], I[by, bx * 128 + j])

    kernel = tilelang.compile(extremes)
    x = torch.randn(8, 1024, device="cuda")
    x[0] -= 10  # a row of negatives only
    x[1] += 10  # and one of positives only
    ints = torch.randint(-(2**31), 2**31 - 1, (8, 1024), device="cuda", dtype=torch.int32)
    hi = torch.full((8,), float("-inf"), device="cuda")
    lo = torch.full((8,), float("inf"), device="cuda")
    ihi = torch.full((8,), -(2**31), device="cuda", dtype=torch.int32)
    kernel(x, ints, hi, lo, ihi)
    assert torch.equal(hi, x.max(dim=1).values) and torch.equal(lo, x.min(dim=1).values)
    assert torch.equal(ihi, ints.max(dim=1).values)


@pytest.mark.parametrize("transposed", [False, True])
def test_atomic_adds_of_an_accumulator_two_at_a_time_or_one_add_up(torch, transposed):
    """Pairs of float32 sums go out with one 8-byte atomic (tw::atomic_add_pair); each block adds its
    product into C over C's random start, so a lost or misplaced half shows."""
    from tests.tilelang_compat.test_atomics import _accumulate_gemm

    kernel = _accumulate_gemm(transposed)
    a, b = (torch.randn(128, 64, device="cuda", dtype=torch.float16), torch.randn(64, 128, device="cuda",
                                                                                   dtype=torch.float16))
    c = torch.randn(128, 128, device="cuda")
    product = a.double() @ b.double()
    expected = c.double() + 3 * (product.T if transposed else product)
    for _ in range(3):  # every call adds the product once more
        kernel(a, b, c)
    torch.testing.assert_close(c.double(), expected, rtol=1e-4, atol=1e-3)


def test_results_stored_in_float32_pairs_and_rounded_runs_of_four(torch):
    from tests.tilelang_compat.test_result_runs import doubled_rows, float32_product

    a, b = torch.randn(192, 96, device="cuda", dtype=torch.float16), torch.randn(128, 96, device="cuda",
                                                                                  dtype=torch.float16)
    c = float32_product.compile(M=192, N=128, K=96)(a, b)
    torch.testing.assert_close(c.double(), a.double() @ b.double().T, rtol=1e-4, atol=1e-3)
    x = torch.randn(256, 128, device="cuda") * 100
    torch.testing.assert_close(doubled_rows(x), (x * 2).half(), rtol=0, atol=0)  # the same rounding as torch's


@pytest.mark.parametrize("n", [256, 248])
def test_a_last_tile_stored_by_tma_matches_and_clips_at_the_tensors_end(torch, n):
    """248 = 7 tiles of 32 and a partial one: the tensor map clips the last tiles' rows and columns
    (its rows are 992 bytes, a multiple of TMA's 16)."""
    from tests.test_store_last_tile_by_tma import staged_sum

    kernel = tilelang.compile(staged_sum(n=n))
    assert "tw::tma_store(C_desc" in kernel.get_kernel_source()
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    c = torch.full((n, n), float("nan"), device="cuda")  # an element left unwritten stays NaN
    kernel(a, b, c)
    assert torch.equal(c, a + b)


@pytest.mark.parametrize("src, bits", [("float32", "int32"), ("float16", "int16"), ("bfloat16", "int16")])
def test_reinterpret_gives_the_bits_torch_views(torch, src, bits):
    """T.reinterpret agrees bit for bit with torch's ``Tensor.view(dtype)``, both ways."""
    import tileworkbench.language as T

    @T.prim_func
    def main(X: T.Tensor((4096,), src), Y: T.Tensor((4096,), bits), Z: T.Tensor((4096,), src)):
        with T.Kernel(16, threads=256) as bx:
            tx = T.get_thread_binding()
            b = T.reinterpret(X[bx * 256 + tx], bits)
            Y[bx * 256 + tx] = b
            Z[bx * 256 + tx] = T.reinterpret(b, src)

    torch.manual_seed(3)
    x = torch.randn(4096, device="cuda").to(getattr(torch, src))
    kernel = tilelang.compile(main, out_idx=[1, 2])
    y, z = kernel(x)
    assert torch.equal(y, x.view(getattr(torch, bits))) and torch.equal(z.view(y.dtype), x.view(y.dtype))


def test_dynamic_sizes_one_kernel_at_every_size(torch):
    """TileLang's dynamic-shape GEMM at sizes that are no multiple of its tiles (nor of 8): one
    compiled kernel, each result against float64."""
    from tileworkbench.examples.tilelang_programs import dynamic_shape as example

    f = example.matmul_dynamic_mnk
    before = set(f.kernels)  # other tests may have compiled it already
    torch.manual_seed(5)
    for m, n, k in ((1000, 300, 520), (4096, 4096, 4096), (77, 131, 1003), (256, 128, 64)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = f(a, b, **example.CONFIG)
        ref = a.double() @ b.double()
        assert c.shape == (m, n)
        assert (c.double() - ref).abs().max().item() <= 1e-2 * ref.abs().max().item() + 1e-2, (m, n, k)
    added = [f.kernels[key] for key in set(f.kernels) - before]
    assert len(added) == 1  # one kernel object: its general form, and the aligned one for the sizes it allows
    sized = added[0]
    assert sized._aligned is not None  # 4096^3 and 256 x 128 x 64 (multiples of 8) took the 16-byte form


@pytest.mark.parametrize("family, builder, name", [("attention", "flash_attention", "attention"),
                                                   ("attention", "flash_attention", "attention_causal"),
                                                   ("flash_decoding", "flash_decoding", "flash_decoding")])
def test_two_gemm_loops_with_a_barrier_pair_per_tile_match_torch(torch, monkeypatch, family, builder, name):
    """``tw.ws_tile_barriers`` at two stages: Q @ K^T waits for K alone, P @ V for V."""
    module = _program(family)
    default = getattr(module, builder)
    configs = {**(default.pass_configs or {}), tilelang.PassConfigKey.TW_WS_TILE_BARRIERS: True}
    monkeypatch.setattr(module, builder, tilelang.jit(out_idx=default.out_idx, pass_configs=configs)(default.fn))
    case = module.CASES[name]
    kernel = case["compile"]()
    source = (getattr(kernel, "kernels", None) or [kernel])[0].get_kernel_source()
    assert "K_shared_full" in source and "V_shared_full" in source
    torch.manual_seed(2)
    result = check(kernel, case, case["inputs"](torch), torch)
    assert result["correct"], result


@pytest.mark.parametrize("family, name", [("norms", "rms_norm_splitk"), ("norms", "layernorm"), ("norms", "rms_norm"),
                                          ("softmax", "softmax"), ("softmax", "softmax_blocks")])
def test_kernels_without_their_block_barriers_give_the_same_bits_every_time(torch, family, name):
    # elide_private_syncs dropped barriers from these; a race would show as a call that differs
    case = _program(family).CASES[name]
    kernel = case["compile"]()
    torch.manual_seed(2)
    inputs = case["inputs"](torch)
    assert check(kernel, case, inputs, torch)["correct"]
    first = [t.clone() for t in _outputs(kernel(*inputs))]
    for _ in range(100):
        again = _outputs(kernel(*inputs))
        assert all(torch.equal(a, b) for a, b in zip(first, again))


def _outputs(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)
