"""A kernel calling CUDA of its own (``T.import_source``, ``T.call_extern``), which the CPU tests
(tests/test_call_extern.py) and the GPU test (tests/gpu/test_call_extern_gpu.py) both build."""

import tileworkbench.language as T

TWICE_PLUS = """
__device__ __forceinline__ float twice_plus(float x, int k) { return 2.0f * x + k; }
__device__ __forceinline__ void touch(int) {}
"""


@T.prim_func
def twice_plus(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
    with T.Kernel(2, threads=128) as bx:
        T.import_source(TWICE_PLUS)
        T.import_source(TWICE_PLUS)  # once in the source
        tx = T.get_thread_binding()
        Y[bx * 128 + tx] = T.call_extern("float32", "twice_plus", X[bx * 128 + tx], bx + 1)
        T.call_extern("handle", "touch", tx)
