"""FP8 on the CPU: wgmma's FP8 form for T.gemm on e4m3/e5m2 tiles (K-major A and B, 32 elements
of K per instruction), FP8 values converted to and from float32 where the kernel computes with
them, and the gemms FP8 wgmma cannot take refused with what it needs."""

from __future__ import annotations

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.codegen.wgmma import functor_source
from tileworkbench.examples.tilelang_programs import gemm_fp8


@pytest.mark.parametrize("dtype, short", [(T.float8_e4m3fn, "e4m3"), (T.float8_e5m2, "e5m2")])
@pytest.mark.parametrize("block_K, span", [(64, 64), (128, 128), (256, 128)])
def test_fp8_gemm_takes_wgmma_k32_with_k_major_tiles(dtype, short, block_K, span):
    kernel = gemm_fp8.matmul.compile(M=512, N=512, K=1024, block_M=128, block_N=128, block_K=block_K, dtype=dtype)
    src = kernel.get_kernel_source()
    functor = f"tw_wgmma_m64n128k32_{short}_kk"
    assert f"tw::wgmma_gemm_ss<128, 128, {block_K}, 1, {span}, {span}, true, {functor}" in src
    assert f"wgmma.mma_async.sync.aligned.m64n128k32.f32.{short}.{short}" in src
    # the float32 accumulator rounded once, two neighbours per 16-bit store into a shared tile, one TMA store
    assert f"tw::store_pair_{short}((&tw::swizzled<unsigned char, 128>(C_local_out," in src
    assert "tw::tma_store(C_desc" in src
    assert "unsigned char* __restrict__ A" in src


def test_the_fp8_functor_has_no_transpose_operands():
    text = functor_source(64, "float8_e4m3", True)
    assert "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
           "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;" in text


def test_fp8_values_compute_as_float32():
    @tilelang.jit
    def scale(X, factor: float):
        N = T.const("N")
        X: T.Tensor((N,), T.float8_e4m3fn)
        Y = T.empty((N,), T.float8_e5m2)
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = X[bx * 128 + i] * factor
        return Y

    src = scale.compile(N=1024, factor=0.5).get_kernel_source()
    # each element through float32 (rules.vector_runs moves the FP8 bytes 16 at a time around it)
    assert "tw::e5m2_from_float((float)((tw::e4m3_to_float(X_run0[k]) * 0.5f)))" in src
    assert src.count("tw::copy_vec<16>((&X_run0[0]), (&X[") == 1 and "tw::copy_vec<16>((&Y[" in src


@pytest.mark.parametrize("body, match", [
    ("T.gemm(A_shared, B_shared, C_local)", "T.gemm on FP8 tiles .* runs on Hopper's wgmma only"),
])
def test_fp8_gemms_wgmma_cannot_take_are_refused(body, match):
    @tilelang.jit
    def nn(A, B):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), T.float8_e4m3fn)
        B: T.Tensor((K, N), T.float8_e4m3fn)
        C = T.empty((M, N), T.float32)
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 64), T.float8_e4m3fn)
            B_shared = T.alloc_shared((64, 128), T.float8_e4m3fn)
            C_local = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=2):
                T.copy(A[by * 128, k * 64], A_shared)
                T.copy(B[k * 64, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)  # B stored K x N: FP8 wgmma reads only K-major B
            T.copy(C_local, C[by * 128, bx * 128])
        return C

    with pytest.raises(tilelang.CompileError, match=match):
        nn.compile(M=256, N=256, K=256)


def test_the_fp8_types_of_the_platform_are_nvidia_s():
    """``tilelang.language.fp8.determine_fp8_type`` (TileLang's FP8 GEMM example asks it)."""
    from tileworkbench.language.fp8 import determine_fp8_type

    assert determine_fp8_type() is T.float8_e4m3fn and determine_fp8_type("e5m2") is T.float8_e5m2
    with pytest.raises(ValueError, match="unsupported FP8 format 'e2m1'"):
        determine_fp8_type("e2m1")
