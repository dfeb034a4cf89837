"""``T.sync_grid``: a barrier of every thread of every block (TileLang's persistent MLA decode combines
the partial results of all blocks after one). Only at the kernel's top level; the kernel takes a
word its barriers count in, zeroed per launch, and is launched cooperatively; the tile-level
interpreter runs the blocks side by side up to each barrier."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level


def partial_sums_combined(blocks=4, n=128):
    """Each block sums its row of ``A`` into ``Partial``; after the grid barrier each block reads
    every block's partial sum: ``Out[b] = sum(A) - sum(A[b])``."""

    @T.prim_func
    def main(A: T.Tensor((blocks, n), "float32"), Partial: T.Tensor((blocks,), "float32"),
             Out: T.Tensor((blocks,), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            row = T.alloc_fragment((n,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A[bx, :], row)
            T.reduce_sum(row, s, dim=0)
            Partial[bx] = s[0]
            T.sync_grid()
            total = T.alloc_var("float32")
            total = 0.0
            for k in T.serial(blocks):
                total = total + Partial[k]
            Out[bx] = total - Partial[bx]

    return main


def test_every_block_reads_what_all_blocks_wrote_before_the_barrier():
    a = np.random.default_rng(0).standard_normal((4, 128)).astype(np.float32)
    partial, out = np.zeros(4, np.float32), np.zeros(4, np.float32)
    tw.compile(partial_sums_combined(), target="cpu")(a, partial, out)
    want = a.astype(np.float64).sum() - a.astype(np.float64).sum(1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)  # block 0 ran first: it saw the others' sums


def test_the_kernel_takes_a_barrier_word_and_is_launched_cooperatively(nvrtc_check):
    art = tw.lower(partial_sums_combined(), target="sm_90a")
    src = art.device_source
    assert "tw::grid_sync(tw_grid_barrier);" in src and "unsigned int* tw_grid_barrier" in src
    assert "rt.grid_barrier_word(stream)" in art.host_source and "cooperative=True" in art.host_source
    nvrtc_check(src, "sm_90a")


def test_in_debug_mode_the_grid_barrier_watches_the_debug_record(nvrtc_check):
    """A thread whose mbarrier wait timed out leaves its block; the others must not wait at the grid
    barrier for it forever."""
    art = tw.lower(partial_sums_combined(), target="sm_90a", pass_configs={"tw.debug_barrier_timeout": 1.0})
    src = art.device_source
    assert "tw::grid_sync(tw_grid_barrier, tw_debug);" in src and "debug::aborted(record)" in src
    launch = art.host_source[art.host_source.index("rt.launch("):]
    assert launch.index("tw_grid_barrier.data.ptr") < launch.index("tw_debug.data.ptr")  # the kernel's order
    nvrtc_check(src, "sm_90a")


def test_the_fast_launch_path_leaves_it_to_the_launcher():
    from tileworkbench.codegen.host import fast_call_plan

    art = tw.lower(partial_sums_combined(), target="sm_90a")
    assert fast_call_plan(art.func) is None


def test_a_grid_barrier_inside_a_loop_or_branch_is_refused():
    with pytest.raises(CompileError, match="T.sync_grid stands at the kernel's top level only"):
        @T.prim_func
        def looped(A: T.Tensor((4,), "float32")):
            with T.Kernel(4, threads=128) as bx:
                for k in T.serial(2):
                    A[bx] = A[bx] + 1.0
                    T.sync_grid()

    with pytest.raises(CompileError, match="T.sync_grid stands at the kernel's top level only"):
        @T.prim_func
        def branched(A: T.Tensor((4,), "float32")):
            with T.Kernel(4, threads=128) as bx:
                if bx > 0:
                    T.sync_grid()


def test_the_thread_level_interpreter_says_it_does_not_run_grid_barriers():
    a = np.zeros((4, 128), np.float32)
    with pytest.raises(Exception, match="grid barriers"):
        run_at_thread_level(partial_sums_combined(), a, np.zeros(4, np.float32), np.zeros(4, np.float32))


def _gemm_then(barrier: bool):
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            a_s = T.alloc_shared((128, 64), "float16")
            b_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=3):
                T.copy(A[by * 128, k * 64], a_s)
                T.copy(B[k * 64, bx * 128], b_s)
                T.gemm(a_s, b_s, acc)
            if barrier:
                T.sync_grid()
            T.copy(acc, C[by * 128, bx * 128])

    return main


def test_a_grid_barrier_keeps_the_kernel_in_one_role():
    """The split would leave the barrier to one role's threads (the same GEMM without it is split)."""
    assert tw.lower(_gemm_then(False), target="sm_90a").func.attrs["warp_specialized"]["applied"]
    ws = tw.lower(_gemm_then(True), target="sm_90a").func.attrs["warp_specialized"]
    assert not ws["applied"] and "grid barriers" in ws["reason"]
