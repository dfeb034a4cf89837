"""Three things TileLang's element-wise programs rely on for their speed, on the CPU: a
``T.vectorized`` copy between a thread's array and a tensor moves 16 bytes at a time (and the
launcher then checks the tensor's alignment), a fragment whose rows are shorter than a sweep of
the threads' 16-byte runs keeps each row inside one warp (top-k's row max without a block
barrier), and a kernel with neither TMA nor wgmma has no async-proxy fences. Each compiled for
sm_90a by NVRTC; the GPU runs them in tests/gpu/test_tilelang_programs.py (hadamard, topk)."""

from __future__ import annotations

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.examples.tilelang_programs.topk import top_k_rows

SM90 = "sm_90a"


def _kernel_part(src: str) -> str:
    return src[src.index('extern "C" __global__'):]


@tilelang.jit(target=SM90)
def scaled_rows(A, per_thread, offset, scale=2.0):
    """Each thread moves ``per_thread`` neighbours of its row through its own array, starting
    ``offset`` elements in."""
    n = T.const("n")
    A: T.Tensor((n, 128 * per_thread + offset), T.float32)
    B = T.empty((n, 128 * per_thread + offset), T.float32)
    with T.Kernel(n, threads=128) as bx:
        local = T.alloc_local((per_thread,), T.float32)
        tx = T.get_thread_binding(0)
        for i in T.vectorized(per_thread):
            local[i] = A[bx, offset + tx * per_thread + i]
        for i in T.serial(per_thread):
            local[i] = local[i] * scale
        for i in T.vectorized(per_thread):
            B[bx, offset + tx * per_thread + i] = local[i]
    return B


def test_a_vectorized_copy_moves_16_bytes_per_access_and_the_launcher_checks_alignment():
    kernel = scaled_rows.compile(n=64, per_thread=8, offset=0)
    body = _kernel_part(kernel.get_kernel_source())
    assert body.count("tw::copy_vec<16>") == 2  # the load and the store, two chunks of 4 floats each
    assert "alignas(16) float local[8]" in body
    assert kernel.get_host_source().count("align=16)") == 2  # A and B, checked at each call
    nvrtc.compile_check(kernel.get_kernel_source(), SM90, "vectorized.cu")


@pytest.mark.parametrize("per_thread, offset, chunk", [(2, 0, 8), (4, 2, 8), (3, 0, None), (4, 1, None)])
def test_a_vectorized_copy_takes_the_widest_aligned_chunk_or_stays_element_wise(per_thread, offset, chunk):
    kernel = scaled_rows.compile(n=16, per_thread=per_thread, offset=offset)
    body = _kernel_part(kernel.get_kernel_source())
    if chunk is None:  # 12 bytes a thread, or rows starting one float off: no aligned chunk
        assert "copy_vec" not in body
        assert kernel.get_host_source().count("align=1)") == 2  # A and B: nothing to check
    else:
        assert body.count(f"tw::copy_vec<{chunk}>") == 2 and "copy_vec<16>" not in body
        assert kernel.get_host_source().count(f"align={chunk})") == 2
    nvrtc.compile_check(kernel.get_kernel_source(), SM90, "vectorized.cu")


@tilelang.jit(target=SM90)
def vectorized_arithmetic(A):
    n = T.const("n")
    A: T.Tensor((n, 512), T.float32)
    B = T.empty((n, 512), T.float32)
    with T.Kernel(n, threads=128) as bx:
        tx = T.get_thread_binding(0)
        for i in T.vectorized(4):
            B[bx, tx * 4 + i] = A[bx, tx * 4 + i] + 1.0  # not a copy: element by element
    return B


def test_a_vectorized_loop_that_computes_stays_an_unrolled_element_loop():
    body = _kernel_part(vectorized_arithmetic.compile(n=8).get_kernel_source())
    assert "copy_vec" not in body and "#pragma unroll" in body


def test_top_k_rows_stay_inside_a_warp_with_no_block_barrier():
    src = top_k_rows.compile(M=512, N=128, topk=4, blk_m=64).get_kernel_source()
    body = _kernel_part(src)
    assert "__syncthreads" not in body and "_warps" not in body  # no cross-warp scratch
    assert "float rows[64]" in body and "float row_max[16]" in body  # 16 rows a thread, runs of 4
    assert body.count("tw::copy_vec<16>") == 1  # the logits come in 16 bytes at a time
    nvrtc.compile_check(src, SM90, "topk.cu")


@tilelang.jit(target=SM90)
def shared_round_trip(A):
    n = T.const("n")
    A: T.Tensor((n, 256), T.float32)
    B = T.empty((n, 256), T.float32)
    with T.Kernel(n, threads=128) as bx:
        s = T.alloc_shared((1, 256), T.float32)
        T.copy(A[bx, 0], s)
        for i, j in T.Parallel(1, 256):
            s[i, j] = s[i, 255 - j] * 2.0  # another thread's element: a barrier is needed
        T.copy(s, B[bx, 0])
    return B


def test_block_barriers_carry_an_async_proxy_fence_only_where_tma_reads_after_them():
    """The copy out is a TMA bulk store (``store_last_tile_by_tma``): the barrier before it needs the
    fence that makes the threads' writes visible to TMA; the barrier between the copy in and the
    loop orders threads only, and no wgmma or TMA load reads anything, so it carries none. Without
    TMA lowering, no barrier carries one."""
    body = _kernel_part(shared_round_trip.compile(n=4).get_kernel_source())
    assert body.count("__syncthreads()") == 2 and body.count("fence_proxy_async") == 1
    assert body.index("fence_proxy_async") > body.index("__syncthreads()")  # the second barrier's only
    assert body.index("fence_proxy_async") < body.index("tw::tma_store(")
    plain = tilelang.jit(target=SM90, pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})(
        shared_round_trip.fn)
    plain_body = _kernel_part(plain.compile(n=4).get_kernel_source())
    assert "__syncthreads()" in plain_body and "fence_proxy_async" not in plain_body and "tma_store" not in plain_body
    keep = tilelang.jit(target=SM90, pass_configs={tilelang.PassConfigKey.TW_KEEP_PROXY_FENCES: True})(
        shared_round_trip.fn)
    assert _kernel_part(keep.compile(n=4).get_kernel_source()).count("fence_proxy_async") == 2


@tilelang.jit(target=SM90)
def reversed_through_shared(A):
    """Each thread's 8 neighbours go to shared memory and come back from another thread's row."""
    n = T.const("n")
    A: T.Tensor((n, 1024), T.float32)
    B = T.empty((n, 1024), T.float32)
    with T.Kernel(n, threads=128) as bx:
        local = T.alloc_local((8,), T.float32)
        tile = T.alloc_shared((128, 8), T.float32)
        tx = T.get_thread_binding(0)
        for i in T.vectorized(8):
            local[i] = A[bx, tx * 8 + i]
        for i in T.vectorized(8):
            tile[tx, i] = local[i]
        for i in T.vectorized(8):
            local[i] = tile[127 - tx, i]
        for i in T.vectorized(8):
            B[bx, tx * 8 + i] = local[i]
    return B


def test_vectorized_copies_to_and_from_an_unswizzled_shared_tile_move_16_bytes():
    src = reversed_through_shared.compile(n=4).get_kernel_source()
    body = _kernel_part(src)
    assert body.count("tw::copy_vec<16>") == 4  # each copy a loop over its two 16-byte chunks
    assert "(&tile[" in body and "__syncthreads" in body  # the barrier between the shared write and read stays
    nvrtc.compile_check(src, SM90, "shared.cu")


@tilelang.jit(target=SM90)
def scaled_through_shared(A, block_M, block_N, dtype):
    """Element-wise T.Parallel loops with no fragment: global -> shared (scaled), shared -> global."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        s = T.alloc_shared((block_M, block_N), dtype)
        for i, j in T.Parallel(block_M, block_N):
            s[i, j] = A[by * block_M + i, bx * block_N + j] * 2.0
        for i, j in T.Parallel(block_M, block_N):
            B[by * block_M + i, bx * block_N + j] = s[i, j] + s[i, j]
    return B


@pytest.mark.parametrize("dtype, chunk", [(T.float16, 16), (T.float32, 16)])
def test_element_wise_parallel_loops_move_runs_of_16_bytes(dtype, chunk):
    kernel = scaled_through_shared.compile(M=256, N=256, block_M=64, block_N=64, dtype=dtype)
    body = _kernel_part(kernel.get_kernel_source())
    # each loop: one vector load of its run, one vector store; s[i, j] + s[i, j] reads the run once
    assert body.count(f"tw::copy_vec<{chunk}>") == 4
    assert "s_run0" in body and "s_run1" not in body
    assert kernel.get_host_source().count("align=16)") == 2
    nvrtc.compile_check(kernel.get_kernel_source(), SM90, "runs.cu")


def test_guarded_global_accesses_stay_element_by_element_behind_their_checks():
    # 1000 is no multiple of 64: every access to A and B keeps its bounds check in front of it;
    # only the unguarded store into the shared tile moves as a run
    kernel = scaled_through_shared.compile(M=1000, N=1000, block_M=64, block_N=64, dtype=T.float16)
    body = _kernel_part(kernel.get_kernel_source())
    assert "A_run" not in body and "B_run" not in body and "s_run0" not in body
    assert body.count("tw::copy_vec<16>((&s[") == 1
    assert body.count("< 1000)") == 4  # rows and columns, for the load and for the store
    assert kernel.get_host_source().count("align=1)") == 2
    nvrtc.compile_check(kernel.get_kernel_source(), SM90, "guarded.cu")


def test_a_fragment_met_by_an_unswizzled_shared_tile_is_held_in_runs_of_its_elements():
    """rms_norm_splitk's A_local[1, 512] over 128 threads: each thread holds 4 neighbours, the ones
    it copied into the shared tile itself, which NVCC reads back with one 16-byte shared load."""
    from tileworkbench.examples.tilelang_programs.norms import rms_norm_splitk

    src = rms_norm_splitk.compile(M=256, N=8192, blk_m=1, blk_k=512).get_kernel_source()
    body = _kernel_part(src)
    assert "float A_local[4]" in body
    assert body.count("((tx * 4) + j_") == 2  # the sum of squares and the scaling, each over its own run
    assert "* 128) + tx)" not in body  # not one element every 128 threads any more
    nvrtc.compile_check(src, SM90, "rms_norm_splitk.cu")
