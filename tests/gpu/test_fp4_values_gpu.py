"""FP4 values on the GPU (CPU tests: tests/test_fp4_values.py): the e2m1 conversions in generated
code (``tw::e2m1_from_float``/``e2m1_to_float``), packed reads a nibble at a time, and packed writes
a pair a byte, against an independent rounding written here (nearest grid value, ties to the even
code, saturating at 6), on inputs whose products and sums are exact in float32."""

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tests.fp4_programs import GEMM_TO_FP4, QUANTIZE_STAGED
from tests.tilelang_compat.kernel_files import import_kernel_file

pytestmark = gpu_marks(9, 0)

GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)


def e2m1_codes(x: np.ndarray) -> np.ndarray:
    a = np.abs(x.astype(np.float64))[..., None]
    distance = np.abs(a - GRID)
    nearest = distance.min(axis=-1, keepdims=True)
    ties_even = np.where(distance == nearest, np.arange(8) % 2, 2)  # among the nearest, the even code first
    code = np.argmin(ties_even * 8 + np.arange(8), axis=-1)
    code = np.where(a[..., 0] >= 6, 7, code)
    return (code | (np.signbit(x) << 3)).astype(np.uint8)


def packed(codes: np.ndarray) -> np.ndarray:
    return (codes[..., 0::2] & 0xF) | (codes[..., 1::2] << 4)


def values(codes: np.ndarray) -> np.ndarray:
    v = GRID[codes & 7]
    return np.where(codes & 8, -v, v).astype(np.float32)


READ = """import tileworkbench.language as T


@T.prim_func
def main(A: T.Tensor((128, 256), T.float4_e2m1fn), X: T.Tensor((128, 256), "float32"), Y: T.Tensor((128, 256), "float32")):
    with T.Kernel(2, threads=128) as bx:
        y = T.alloc_fragment((64, 256), T.float4_e2m1fn)
        for i, j in T.Parallel(64, 256):
            y[i, j] = X[bx * 64 + i, j] * 0.5
        for i, j in T.Parallel(64, 256):
            Y[bx * 64 + i, j] = y[i, j] + A[bx * 64 + i, j] * 2.0
"""


def _build(tmp_path, text):
    return tw.compile(import_kernel_file(tmp_path, text).main)


def test_a_gemm_result_stored_as_fp4_pairs(torch, tmp_path):
    rng = np.random.default_rng(45)
    a = rng.integers(-2, 3, (256, 64)).astype(np.float16) * 0.25  # products and sums exact in float32
    b = rng.integers(-2, 3, (64, 256)).astype(np.float16) * 0.25
    c = torch.zeros(256, 128, dtype=torch.uint8, device="cuda")
    _build(tmp_path, GEMM_TO_FP4)(torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda"), c)
    want = packed(e2m1_codes(a.astype(np.float32) @ b.astype(np.float32)))
    assert np.array_equal(c.cpu().numpy(), want)


def test_fp4_values_computed_and_read_from_a_packed_tensor(torch, tmp_path):
    rng = np.random.default_rng(46)
    x = (rng.integers(-28, 29, (128, 256)) * 0.25).astype(np.float32)  # ties and saturation included
    codes = rng.integers(0, 16, (128, 256)).astype(np.uint8)
    y = torch.zeros(128, 256, device="cuda")
    _build(tmp_path, READ)(torch.tensor(packed(codes), device="cuda"), torch.tensor(x, device="cuda"), y)
    want = values(e2m1_codes(x * 0.5)) + values(codes) * 2
    assert np.array_equal(y.cpu().numpy(), want)


def test_act_quants_staged_shape_stores_pairs(torch, tmp_path):
    """DeepSeek V4's act_quant's shape (tests/test_fp4_values.py): bf16 staged through a pipelined
    loop, clamped into an FP4 fragment that takes runs of two, stored into a packed tile a byte a pair."""
    rng = np.random.default_rng(47)
    x = (rng.integers(-32, 33, (64, 32)) * 0.25).astype(np.float32)  # exact in bf16; ties, saturation
    q = torch.zeros(64, 16, dtype=torch.uint8, device="cuda")
    _build(tmp_path, QUANTIZE_STAGED)(torch.tensor(x, device="cuda").to(torch.bfloat16), q)
    assert np.array_equal(q.cpu().numpy(), packed(e2m1_codes(np.clip(x, -6, 6))))
