"""TileLang's thread and launch queries: ``T.get_lane_idx``, ``T.get_warp_idx``,
``T.get_warp_group_idx`` (expressions of the thread index, run at the thread level here) and
``T.get_thread_extent(s)`` / ``T.get_block_extent(s)`` (the launch's sizes while the kernel is built)."""

import numpy as np
import pytest

import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level


def test_lane_warp_and_warpgroup_of_each_thread():
    @T.prim_func
    def kernel(Out: T.Tensor((3, 256), "int32"), Sizes: T.Tensor((4,), "int32")):
        with T.Kernel(3, 2, threads=256):
            tx = T.get_thread_binding()
            Out[0, tx] = T.get_lane_idx()
            Out[1, tx] = T.get_warp_idx()
            Out[2, tx] = T.get_warp_group_idx()
            Sizes[0] = T.get_thread_extent(0)
            Sizes[1] = len(T.get_thread_extents())
            Sizes[2] = T.get_block_extent(0)
            Sizes[3] = T.get_block_extents()[1]

    out, sizes = np.zeros((3, 256), np.int32), np.zeros(4, np.int32)
    run_at_thread_level(kernel, out, sizes)
    t = np.arange(256)
    assert np.array_equal(out, np.stack([t % 32, t // 32, t // 128]))
    assert sizes.tolist() == [256, 1, 3, 2]


def test_other_warp_sizes_are_refused():
    with pytest.raises(CompileError, match="a warp is 32 threads on NVIDIA GPUs, not 64"):
        @T.prim_func
        def kernel(Out: T.Tensor((128,), "int32")):
            with T.Kernel(1, threads=128):
                Out[T.get_thread_binding()] = T.get_lane_idx(64)
