"""``T.gemm`` on float32 tiles (and TileLang's ``T.tfloat32``, float32 here) runs in TF32: on
Hopper's wgmma (m64nNk8) where both operands are K-major (A stored M x K, B stored N x K), which
reads the float32 bits and drops the 13 low mantissa bits; else on mma.sync m16n8k8
(``tw::gemm_ss_tf32``), each operand rounded to TF32 (``cvt.rna``: to nearest, ties away from
zero) as TileLang's KDA and GDN kernels use it. The tile-level interpreter converts alike, so it is
checked against float64 products of the converted inputs (tight) and of the raw ones (TF32's own
error); the conversions themselves on their edge cases; NVRTC compiles each path for sm_90a; the
mma.sync TF32 header is inlined only into kernels that call it; and the refusals (K not a multiple
of 8, float64 tiles)."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.examples.gemm import matmul
from tileworkbench.interpreter.values import tf32_rounded, tf32_truncated
from tileworkbench.jit.lower import lower


def tf32_gemm(M, N, K, block_M=64, block_N=64, block_K=32, transpose_A=False, transpose_B=False, num_stages=2,
              threads=128, dtype=T.float32):
    """The GEMM example on float32 (or ``T.tfloat32``) tiles into float32."""
    return matmul(M, N, K, block_M, block_N, block_K, dtype, T.float32, num_stages, threads, transpose_B, transpose_A)


CASES = [dict(M=128, N=128, K=128), dict(M=128, N=64, K=96, transpose_A=True),
         dict(M=64, N=128, K=64, transpose_B=True, block_K=16),
         dict(M=200, N=136, K=72, transpose_A=True, transpose_B=True, block_K=8, num_stages=3),
         dict(M=128, N=256, K=64, block_M=128, block_N=128, threads=256, dtype=T.tfloat32),
         dict(M=256, N=192, K=160, transpose_B=True, block_M=128, block_N=64, block_K=32, threads=256),
         dict(M=128, N=128, K=136, transpose_B=True, block_K=8, num_stages=3),
         dict(M=128, N=128, K=128, transpose_B=True, block_K=64, threads=64)]
IDS = ["NN", "TN", "NT-bk16", "TT-partial-tiles-bk8", "tfloat32-256-threads", "NT-256-threads", "NT-bk8-partial-k",
       "NT-two-warps"]


def on_wgmma(case) -> bool:
    """Both operands K-major (A not transposed, B transposed) on whole warpgroups: TF32 wgmma."""
    return (not case.get("transpose_A") and case.get("transpose_B", False)
            and case.get("threads", 128) % 128 == 0)


def inputs(case, seed):
    rng = np.random.default_rng(seed)
    M, N, K = case["M"], case["N"], case["K"]
    a = rng.standard_normal((K, M) if case.get("transpose_A") else (M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if case.get("transpose_B") else (K, N)).astype(np.float32)
    return a, b


def reference(case, a, b, converted=True):
    to_tf32 = tf32_truncated if on_wgmma(case) else tf32_rounded
    a, b = (to_tf32(a), to_tf32(b)) if converted else (a, b)
    a = a.astype(np.float64).T if case.get("transpose_A") else a.astype(np.float64)
    b = b.astype(np.float64).T if case.get("transpose_B") else b.astype(np.float64)
    return a @ b


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_interpreter_multiplies_tf32_operands(case):
    a, b = inputs(case, case["K"])
    c = np.zeros((case["M"], case["N"]), np.float32)
    tw.compile(tf32_gemm(**case), target="cpu")(a, b, c)
    np.testing.assert_allclose(c, reference(case, a, b), rtol=1e-5, atol=1e-4)  # float32 sums of TF32 products
    other = tf32_rounded if on_wgmma(case) else tf32_truncated  # the other path's conversion is told apart
    assert np.abs(c - reference(case, other(a), other(b), converted=False)).max() > 1e-4
    raw = reference(case, a, b, converted=False)
    # TF32's error, not float32's: each operand off by at most one unit of its 10th mantissa bit
    # (truncation) or half of one (rounding), so each product by twice that, relative
    unit = 2.0 ** -10 if on_wgmma(case) else 2.0 ** -11
    magnitudes = reference(case, np.abs(a), np.abs(b), converted=False)
    error = np.abs(c - raw)
    assert error.max() > 1e-4 and np.all(error <= 2 * unit * magnitudes * 1.01 + 1e-4)


def test_tf32_rounding_is_to_nearest_ties_away_from_zero():
    ulp = 2.0 ** -10  # TF32 keeps 10 mantissa bits
    x = np.array([1 + ulp / 2, 1 + ulp / 2 - 2.0 ** -23, 1 + 1.5 * ulp, -(1 + ulp / 2), 3.4e38, np.inf, -np.inf],
                 np.float32)
    expected = np.array([1 + ulp, 1, 1 + 2 * ulp, -(1 + ulp), 1.998046875 * 2.0 ** 127, np.inf, -np.inf], np.float32)
    assert np.array_equal(tf32_rounded(x), expected)
    assert np.isnan(tf32_rounded(np.array([np.nan], np.float32)))[0]


def test_tf32_truncation_drops_the_low_bits_towards_zero():
    ulp = 2.0 ** -10
    x = np.array([1 + ulp / 2, 1 + ulp - 2.0 ** -23, 1 + 1.5 * ulp, -(1 + 1.75 * ulp), 3.4e38, np.inf, -np.inf],
                 np.float32)
    expected = np.array([1, 1, 1 + ulp, -(1 + ulp), 1.998046875 * 2.0 ** 127, np.inf, -np.inf], np.float32)
    assert np.array_equal(tf32_truncated(x), expected)
    assert np.isnan(tf32_truncated(np.array([np.nan], np.float32)))[0]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_it_takes_its_tf32_path_and_compiles(case, nvrtc_check):
    source = lower(tf32_gemm(**case), target="cuda").kernel_source
    if on_wgmma(case):
        assert "tw::wgmma_gemm_ss<" in source and "wgmma.mma_async.sync.aligned.m64n" in source
        assert "k8.f32.tf32.tf32" in source and "gemm_ss_tf32" not in source
    else:
        assert "tw::gemm_ss_tf32<" in source and "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in source
        assert "// ---- tw/mma_tf32.h ----" in source and "tw::wgmma_gemm" not in source.split('extern "C"')[1]
    assert nvrtc_check(source, "sm_90a").spills_bytes == 0


def test_other_kernels_do_not_carry_the_tf32_header():
    source = lower(tf32_gemm(128, 128, 128, dtype=T.float16), target="cuda").kernel_source
    assert "wgmma" in source and "mma_tf32.h" not in source and "gemm_ss_tf32" not in source


def test_what_is_refused():
    with pytest.raises(CompileError, match="K=12 must be a multiple of 8 for mma.sync"):
        lower(tf32_gemm(128, 128, 48, block_K=12), target="cuda")
    with pytest.raises(CompileError, match=r"float16, bfloat16, float32 \(as TF32\) or int4 inputs; A_shared is float64"):
        lower(tf32_gemm(128, 128, 128, dtype=T.float64), target="cuda")


@T.prim_func
def tf32_and_half_accumulators_added(A: T.Tensor((64, 32), "float32"), B: T.Tensor((32, 64), "float32"),
                                     X: T.Tensor((64, 64), "float16"), Y: T.Tensor((64, 64), "float16"),
                                     Out: T.Tensor((64, 64), "float32")):
    """TileLang's GDN backward: a TF32 gemm's accumulator and a float16 one's combined element by
    element. The first is mma.sync's layout, the second would be wgmma's: one loop over both needs
    one layout, so the second gemm takes mma.sync too (choose_shared_layouts)."""
    with T.Kernel(1, threads=128):
        a = T.alloc_shared((64, 32), "float32")
        b = T.alloc_shared((32, 64), "float32")
        x = T.alloc_shared((64, 64), "float16")
        y = T.alloc_shared((64, 64), "float16")
        c1 = T.alloc_fragment((64, 64), "float32")
        c2 = T.alloc_fragment((64, 64), "float32")
        acc = T.alloc_fragment((64, 64), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.copy(X, x)
        T.copy(Y, y)
        T.clear(acc)
        T.gemm(a, b, c1, clear_accum=True)
        T.gemm(x, y, c2, clear_accum=True)
        for i, j in T.Parallel(64, 64):
            acc[i, j] += c1[i, j] - c2[i, j]
        T.copy(acc, Out)


def mixed_inputs(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    x, y = rng.standard_normal((64, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)
    want = (tf32_rounded(a).astype(np.float64) @ tf32_rounded(b).astype(np.float64)
            - x.astype(np.float64) @ y.astype(np.float64))
    return (a, b, x, y), want


def test_accumulators_one_loop_combines_share_the_mma_sync_layout(nvrtc_check):
    inputs, want = mixed_inputs(3)
    out = np.zeros((64, 64), np.float32)
    tw.compile(tf32_and_half_accumulators_added, target="cpu")(*inputs, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
    source = lower(tf32_and_half_accumulators_added, target="cuda").kernel_source
    code = source.split('extern "C"')[1]
    assert "tw::gemm_ss_tf32<" in code and "tw::gemm_ss<" in code and "tw::wgmma_gemm" not in code
    nvrtc_check(source, "sm_90a")
