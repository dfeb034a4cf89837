"""Calling a compiled kernel on a machine without a GPU says so plainly (issue 21), instead of
CUDA's "driver version is insufficient" or CuPy's ImportError."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.target import detect_arch


@pytest.mark.skipif(detect_arch() is not None, reason="this machine has a GPU: the kernel would run")
def test_a_kernel_called_without_a_gpu_names_the_problem_and_the_way_out():
    @T.prim_func
    def double(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i] * 2.0

    kernel = tw.compile(double, out_idx=[1])
    assert "__global__" in kernel.get_kernel_source()
    with pytest.raises(tw.KernelRuntimeError, match="no NVIDIA GPU was found .* tileworkbench\\[cuda13\\].* target=\"cpu\""):
        kernel(np.ones(128, dtype=np.float32))
