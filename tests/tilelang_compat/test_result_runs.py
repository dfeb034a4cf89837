"""Results stored from a thread's registers several elements per access: neighbouring float32
pairs of a wgmma accumulator with one 8-byte store, and a float32 fragment held in runs rounded to a
16-bit tensor 4 elements per store (``tw::store_rounded4``), each checked on the source, by
NVRTC, and (tests/gpu/test_tilelang_programs.py) against torch on the H200."""

from __future__ import annotations

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.backend import nvrtc

SM90 = "sm_90a"


@tilelang.jit(target=SM90)
def float32_product(A, B):
    """C = A @ B^T in float32, the block's column index a let (``col``) as flash decoding's split index."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)  # K-major, as a linear layer's weight
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
        col = bx
        a_tile, b_tile = T.alloc_shared((64, 32), T.float16), T.alloc_shared((64, 32), T.float16)
        acc = T.alloc_fragment((64, 64), T.float32)
        T.clear(acc)
        for k in T.serial(T.ceildiv(K, 32)):
            T.copy(A[by * 64, k * 32], a_tile)
            T.copy(B[col * 64, k * 32], b_tile)
            T.gemm(a_tile, b_tile, acc, transpose_B=True)
        T.copy(acc, C[by * 64, col * 64])
    return C


def test_a_float32_result_goes_out_in_neighbouring_pairs_under_a_let_bound_block_index():
    kernel = float32_product.compile(M=128, N=128, K=64)
    src = kernel.get_kernel_source()
    body = src[src.index('extern "C"'):]
    assert body.count("tw::store_pair((&C_pairs[") == 1 and "] = acc[" not in body
    assert _align(kernel, "C") == 8
    assert nvrtc.compile_check(src, SM90, kernel.name).spills_bytes == 0


@tilelang.jit(target=SM90)
def doubled_rows(A):
    """B = 2 A rounded to float16; A's rows come in 16-byte runs (4 floats a run)."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
        a = T.alloc_fragment((32, N), T.float32)
        T.copy(A[bx * 32, 0], a)
        for i, j in T.Parallel(32, N):
            a[i, j] = a[i, j] * 2.0
        T.copy(a, B[bx * 32, 0])
    return B


def _align(kernel, name):
    line = next(x for x in kernel.get_host_source().splitlines() if f"rt.tensor('{name}'" in x)
    return int(line.rsplit("align=", 1)[1].rstrip(")"))


def test_a_float32_fragment_in_runs_is_stored_rounded_four_at_a_time():
    kernel = doubled_rows.compile(M=256, N=128)
    src = kernel.get_kernel_source()
    body = src[src.index('extern "C"'):]
    assert body.count("tw::store_rounded4((&B[") == 1 and "tw::from_float" not in body
    assert _align(kernel, "B") == 8
    assert nvrtc.compile_check(src, SM90, kernel.name).spills_bytes == 0
