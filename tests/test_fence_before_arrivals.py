"""fence_before_arrivals: a warpgroup that writes a tile with its threads and hands it to another
warpgroup's wgmma through an mbarrier fences the async proxy before it arrives (TileLang's FlashMLA
example hands ``SP1_shared`` over so, with no fence of its own); arrivals after TMA copies, or after
writes only threads read, get none."""

from __future__ import annotations

import re

import tileworkbench as tw
import tileworkbench.language as T


def handed_over(operand_by_threads: bool):
    """Warpgroup 1 fills A (its threads, or TMA) and B (TMA), then arrives; warpgroup 0 waits and
    multiplies. Then warpgroup 1 fills a row that warpgroup 0's threads read once it arrives."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32"),
             R: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 64), "float16")
            row = T.alloc_shared((128,), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                if operand_by_threads:
                    for i, j in T.Parallel(64, 64):
                        a_s[i, j] = A[i, j]
                else:
                    T.tma_copy(A[0, 0], a_s, barrier=ready)
                T.tma_copy(B[0, 0], b_s, barrier=ready)
                T.barrier_arrive(ready)
            with T.ws(0):
                T.barrier_wait(ready, 0)
                T.clear(acc)
                T.gemm(a_s, b_s, acc, transpose_B=True)
                T.copy(acc, C)
            with T.ws(1):
                for i in T.Parallel(128):
                    row[i] = R[i] * 2.0
                T.barrier_arrive(done)
            with T.ws(0):
                T.barrier_wait(done, 0)
                for i in T.Parallel(128):
                    R[i] = row[127 - i]

    return main


def arrivals(func) -> list:
    """Whether a proxy fence stands right before each mbarrier arrival of the kernel, in order."""
    code = tw.lower(func, target="sm_90a").device_source.split("// ---- kernel ----")[1]
    lines = [line.strip() for line in code.splitlines()]
    return [lines[i - 1] == "tw::fence_proxy_async();" for i, line in enumerate(lines)
            if re.fullmatch(r"(ready|done)\[0\]\.arrive\(\);", line)]


def test_a_tile_written_by_threads_for_the_other_warpgroups_wgmma_is_fenced_before_the_arrival():
    assert arrivals(handed_over(operand_by_threads=True)) == [True, False]


def test_tiles_tma_filled_or_read_by_threads_alone_need_no_fence():
    assert arrivals(handed_over(operand_by_threads=False)) == [False, False]
