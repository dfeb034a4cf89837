"""Hand-written warp specialisation with the producer's branch first (TileLang's sparse MLA seesaw:
``if tx >= 256: producer ... elif tx < 128: consumer 0 ... elif ...: consumer 1``). Two things made
it deadlock: an ``if`` on the threads whose branches only wait and arrive on mbarriers stayed a plain
``if`` (the interpreter and the barrier checker ran its branches one after the other), and
``insert_thread_syncs`` put a block barrier between the producer's scope and the consumers' (the
consumers read what the whole block wrote before its arrival on ``bar_q``, which they wait on; and
a buffer the block wrote and a scope read counted as the block's). The block barrier would hang
the GPU: the producer waits on what the consumers arrive on after it."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T


def producer_first(n=2):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=384):
            q = T.alloc_shared((128,), "float32")
            data = T.alloc_shared((2, 128), "float32")
            bar_q = T.alloc_barrier(arrive_count=384)
            bar_free = T.alloc_barrier(arrive_count=[256] * 2)
            bar_ready = T.alloc_barrier(arrive_count=[128] * 2)
            tx = T.get_thread_binding()
            T.copy(A, q)
            T.barrier_arrive(bar_q)
            if tx >= 256:
                for i_i in T.serial(n):
                    for stage in T.unroll(2):
                        T.barrier_wait(bar_free[stage], i_i % 2)
                        data[stage, tx - 256] = i_i * 2 + stage + 1.0
                        T.barrier_arrive(bar_ready[stage])
            elif tx < 128:
                T.barrier_wait(bar_q, 0)
                for stage in T.unroll(2):
                    T.barrier_arrive(bar_free[stage])
                acc = T.alloc_var("float32")
                acc = 0.0
                for i_i in T.serial(n):
                    for stage in T.unroll(2):
                        T.barrier_wait(bar_ready[stage], i_i % 2)
                        acc += data[stage, tx] * q[tx]
                        T.barrier_arrive(bar_free[stage])
                B[tx] = acc
            else:
                T.barrier_wait(bar_q, 0)
                for stage in T.unroll(2):
                    T.barrier_arrive(bar_free[stage])
                acc = T.alloc_var("float32")
                acc = 0.0
                for i_i in T.serial(n):
                    for stage in T.unroll(2):
                        T.barrier_wait(bar_ready[stage], i_i % 2)
                        acc += data[stage, tx - 128] * q[tx - 128] * 2.0
                        T.barrier_arrive(bar_free[stage])
                B[tx] = acc

    return main


def _expected(a, n=2):
    per_thread = sum(range(1, 2 * n + 1))  # the stage values 1 .. 2n, each read once
    return np.concatenate([a * per_thread, 2 * a * per_thread])


def test_the_scopes_compile_with_no_block_barrier_between_them(nvrtc_check):
    art = tw.lower(producer_first(), target="sm_90a")  # the barrier check on: no protocol error
    kernel = art.device_source[art.device_source.index("bar_q[0].arrive();"):]
    assert "__syncthreads" not in kernel
    assert "// T.ws(2)" in kernel and "// T.ws(0)" in kernel and "// T.ws(1)" in kernel
    nvrtc_check(art.device_source, "sm_90a")


def test_the_interpreter_runs_the_scopes_side_by_side():
    a = np.random.default_rng(9).standard_normal(128).astype(np.float32)
    b = np.zeros(256, np.float32)
    tw.compile(producer_first(), target="cpu")(a, b)
    np.testing.assert_allclose(b, _expected(a), rtol=1e-6)


def test_a_write_after_the_arrival_still_gets_its_block_barrier():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            q = T.alloc_shared((128,), "float32")
            bar_q = T.alloc_barrier(arrive_count=256)
            tx = T.get_thread_binding()
            T.barrier_arrive(bar_q)
            T.copy(A, q)  # after the arrival: waiting on bar_q does not order it
            if tx < 128:
                T.barrier_wait(bar_q, 0)
                B[tx] = q[127 - tx]
            else:
                T.barrier_wait(bar_q, 0)

    src = tw.lower(main, target="sm_90a").device_source
    kernel = src[src.index("bar_q[0].arrive();"):]
    assert kernel.index("__syncthreads();") < kernel.index("// T.ws(0)")
