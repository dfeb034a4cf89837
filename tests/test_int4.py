"""``T.int4``: tensors and tiles stored two values a byte (``passes/store_int4_as_bytes.py``), moved
as bytes and multiplied by mma.sync m16n8k64 s4 into int32. The tile-level interpreter against an
exact numpy product on random values (both ends of the range included), the pass's rewrite, the
generated call, NVRTC for sm_90a, and what is refused, each with its kernel line."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.dtypes import int4x2
from tileworkbench.errors import CompileError
from tileworkbench.examples.gemm import matmul_int4
from tileworkbench.frontend import parse
from tileworkbench.passes.manager import REGISTRY, LowerContext
from tileworkbench.target import PassContext, Target

from tests.tilelang_compat.kernel_files import main_with


def pack_int4(values: np.ndarray) -> np.ndarray:
    """int4 values (an int array, last dimension even) as int8 bytes, the even value in the low
    nibble: what TileLang's example's ``pack_int4`` makes."""
    v = values.astype(np.int16)
    return ((v[..., 0::2] & 0xF) | ((v[..., 1::2] & 0xF) << 4)).astype(np.uint8).view(np.int8)


def random_int4(rng, shape) -> np.ndarray:
    v = rng.integers(-8, 8, shape)
    v.flat[:2] = (-8, 7)  # both ends of the range
    return v


@pytest.mark.parametrize("M, N, K, block_K, stages", [(256, 128, 512, 128, 3), (200, 136, 320, 128, 2),
                                                      (64, 64, 64, 64, 1)])
def test_the_interpreted_gemm_is_exact(M, N, K, block_K, stages):
    rng = np.random.default_rng([45, M, K])
    a, b = random_int4(rng, (M, K)), random_int4(rng, (N, K))
    kernel = tw.compile(matmul_int4(M, N, K, 128 if M > 64 else 64, 128 if N > 64 else 64, block_K, stages),
                        out_idx=-1, target="cpu")
    c = np.asarray(kernel(pack_int4(a), pack_int4(b)))
    np.testing.assert_array_equal(c, a @ b.T)


def test_the_pass_stores_int4_as_bytes():
    func = parse(matmul_int4(256, 256, 512, 128, 128, 128))
    ctx = LowerContext(Target.of("sm_90a"), PassContext.merged_configs({}))
    out = REGISTRY["store_int4_as_bytes"].fn(func, ctx)
    a, b, c = out.params[:3]
    assert (a.dtype, b.dtype, c.dtype.name) == (int4x2, int4x2, "int32")
    assert [tuple(int(str(d)) for d in p.shape) for p in (a, b)] == [(256, 256), (256, 256)]
    text = str(out.body)
    assert "k * 64" in text and "k * 128" not in text  # the K offsets counted in bytes


def test_the_gemm_is_mma_sync_on_int4_units_and_nvrtc_compiles_it():
    source = tw.lower(matmul_int4(256, 256, 512), target="cuda").kernel_source
    assert "tw::gemm_ss<128, 128, 32, 2, 2, false, true, 64, 64, tw::int4x4>" in source  # K 128 values = 32 units
    assert "m16n8k64.row.col.s32.s4.s4.s32" in source
    compile_check(source, "sm_90a")


def _kernel(tmp_path, body: str, signature: str = "A: T.Tensor((64, 64), T.int4), C: T.Tensor((64, 64), T.int32)"):
    """``main_with``'s kernel (its first statement on line 7), ``body``'s lines indented for it."""
    return main_with(tmp_path, signature, body.replace("\n", "\n        "))


@pytest.mark.parametrize("body, message, line", [
    ("for i, j in T.Parallel(64, 64):\n    C[i, j] = A[i, j]", "A holds int4 values: int4 values are only moved", 8),
    ("F = T.alloc_fragment((64, 64), T.int4)\nT.copy(A, F)", "F is an int4 fragment buffer", 7),
    ("S = T.alloc_shared((64, 64), T.int4)\nD = T.alloc_fragment((64, 64), T.int32)\nT.copy(A, S)\n"
     "T.gemm(S, S, D)", "reads them K-major", 10),
    ("S = T.alloc_shared((64, 64), 'float16')\nT.copy(A, S)", "a copy between int4 A and float16 S", 8),
    ("S = T.alloc_shared((64, 32), T.int4)\nT.copy(A[0:64, 1:33], S)", "starts at 1 along its last dimension", 8),
    ("S = T.alloc_shared((64, 64), T.int4)\nT.fill(S, 0)", "S holds int4 values", 8),
    ("for i, j in T.Parallel(64, 64):\n    C[i, j] = T.cast(T.cast(C[i, j], T.int4), 'int32')",
     "has type int4 here", 8),
])
def test_what_touches_int4_other_than_moving_and_multiplying_is_refused_at_its_line(tmp_path, body, message, line):
    with pytest.raises(CompileError, match=message) as info:
        tw.lower(_kernel(tmp_path, body), target="cuda")
    assert f"kernel_file.py:{line}" in str(info.value)


def test_an_odd_last_dimension_is_refused(tmp_path):
    with pytest.raises(CompileError, match="last dimension must be a known even number of int4 values"):
        tw.lower(_kernel(tmp_path, "C[0, 0] = 1", "A: T.Tensor((64, 63), T.int4), C: T.Tensor((64, 64), T.int32)"),
                 target="cuda")


def test_the_caller_passes_bytes_and_is_told_so_otherwise():
    kernel = tw.compile(matmul_int4(64, 64, 128, 64, 64, 64, 1), out_idx=-1, target="cpu")
    rng = np.random.default_rng(7)
    a, b = random_int4(rng, (64, 128)), random_int4(rng, (64, 128))
    as_uint8 = kernel(pack_int4(a).view(np.uint8), pack_int4(b))  # bytes either way
    np.testing.assert_array_equal(np.asarray(as_uint8), a @ b.T)
    with pytest.raises(tw.KernelRuntimeError, match=r"should have shape \(64, 64\) \(int4 values two a byte: an int8 "
                                                    r"array with the last dimension halved"):
        kernel(a.astype(np.int8), pack_int4(b))  # one value a byte


@tw.jit(target="cpu")
def int4_gemm_current_style(A, B, block=64):
    """TileLang's current style: the sizes come from the tensors a call passes; A's array is
    (M, K / 2) bytes, and K is the annotation's, twice that."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.int4)
    B: T.Tensor((N, K), T.int4)
    C = T.empty((M, N), T.int32)
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        A_s = T.alloc_shared((block, 128), T.int4)
        B_s = T.alloc_shared((block, 128), T.int4)
        C_l = T.alloc_fragment((block, block), T.int32)
        T.clear(C_l)
        for k in T.Pipelined(T.ceildiv(K, 128), num_stages=2):
            T.copy(A[by * block, k * 128], A_s)
            T.copy(B[bx * block, k * 128], B_s)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
        T.copy(C_l, C[by * block, bx * block])
    return C


def test_the_current_style_reads_k_from_packed_arrays():
    rng = np.random.default_rng(11)
    a, b = random_int4(rng, (64, 384)), random_int4(rng, (128, 384))
    c = int4_gemm_current_style(pack_int4(a), pack_int4(b))
    np.testing.assert_array_equal(np.asarray(c), a @ b.T)
