"""The CPU interpreter against the H200 on the same inputs: bit for bit where the arithmetic is
the same (elementwise float16, integer index arithmetic, copies), within a GEMM's accumulation
order elsewhere."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples import ALL_EXAMPLES
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def _both(func, out_idx, *inputs):
    import cupy

    cpu = tw.compile(func, out_idx=out_idx, target="cpu")(*inputs)
    gpu = tw.compile(func, out_idx=out_idx)(*(cupy.asarray(x) for x in inputs))
    return cpu, cupy.asnumpy(gpu)


def _integer_mix():
    @T.prim_func
    def main(A: T.Tensor((512, 256), "int32"), B: T.Tensor((512, 256), "int32")):
        with T.Kernel(4, threads=128) as bx:
            for i, j in T.Parallel(128, 256):
                x = A[bx * 128 + i, j]
                B[bx * 128 + i, j] = (x // 7) * 3 + x % 5 - ((x >> 2) ^ (j << 1)) + T.max(x, j)

    return main


def test_elementwise_is_bit_for_bit(torch):
    rng = np.random.default_rng(0)
    func = ALL_EXAMPLES["elementwise_add"]()
    kernel = tw.compile(func, target="cpu")
    a, b = (rng.standard_normal((1024, 1024)).astype(kernel.params[0].dtype.name) for _ in range(2))
    cpu, gpu = _both(func, [2], a, b)
    assert cpu.dtype == gpu.dtype and np.array_equal(cpu.view(f"u{cpu.itemsize}"), gpu.view(f"u{gpu.itemsize}"))


def test_integer_arithmetic_is_bit_for_bit(torch):
    rng = np.random.default_rng(1)
    a = rng.integers(-2**20, 2**20, (512, 256), dtype=np.int32)
    cpu, gpu = _both(_integer_mix(), [1], a)
    assert np.array_equal(cpu, gpu)


def test_tma_copies_and_gemm_agree(torch):
    rng = np.random.default_rng(2)
    func = ALL_EXAMPLES["matmul_tma_copy_store_3"]()
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float16) for _ in range(2))
    cpu, gpu = _both(func, [2], a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(ref).max()
    assert np.abs(cpu.astype(np.float64) - gpu.astype(np.float64)).max() <= 2.0**-9 * scale
