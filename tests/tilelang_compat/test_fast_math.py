"""``PassConfigKey.TL_ENABLE_FAST_MATH``: NVRTC compiles with ``--use_fast_math`` (CPU: NVRTC runs
without a GPU), and the two cubins differ where the kernel computes a transcendental."""

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.backend import nvrtc


@T.prim_func
def softplus(X: T.Tensor((1024,), T.float32), Y: T.Tensor((1024,), T.float32)):
    with T.Kernel(8, threads=128) as bx:
        for i in T.Parallel(128):
            Y[bx * 128 + i] = T.log(1.0 + T.exp(X[bx * 128 + i]))


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_fast_math_reaches_nvrtc():
    plain = tilelang.lower(softplus, target="sm_90a", enable_device_compile=True)
    fast = tilelang.lower(softplus, target="sm_90a", enable_device_compile=True,
                          pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
    assert "--use_fast_math" in fast.nvrtc.options and "--use_fast_math" not in plain.nvrtc.options
    assert plain.device_source == fast.device_source and plain.nvrtc.cubin != fast.nvrtc.cubin
