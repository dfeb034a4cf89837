"""Valid kernels at the edges of what the DSL takes: names C++ or the launcher reserve, unicode,
`from __future__ import annotations`, long and deep expressions, run-time extents, one
accumulator fed by two gemm forms, small and odd shapes. Each lowers and NVRTC compiles it for
sm_90a (no GPU needed)."""

import pytest

from .harness import Good, check_good, check_unique, ids
from .test_syntax import kernel

F32 = '"float32"'


def named(names: str, body: str, params_of=None) -> str:
    params = params_of or ", ".join(f"{n}: T.Tensor((128,), {F32})" for n in names.split())
    return kernel(body, params=params)


LONG_SUM = " + ".join(f"A[{i % 128}] * {i + 1}.0" for i in range(200))
DEEP = "(" * 120 + "A[1]" + " + 1.0)" * 120

CASES = check_unique([
    Good("cpp-keyword-params", named("double auto int float register", "for i in T.Parallel(128):\n"
                                     "    double[i] = auto[i] + int[i] * float[i] + register[i]")),
    Good("cpp-keyword-buffers", named("A", 'new = T.alloc_shared((128,), "float32")\n'
                                      'delete = T.alloc_fragment((128,), "float32")\nT.copy(A, new)\n'
                                      "T.copy(new, delete)\nfor this in T.Parallel(128):\n"
                                      "    delete[this] = delete[this] * 2.0\nT.copy(delete, A)")),
    Good("cpp-keyword-scalars", kernel("for template in T.serial(4):\n    union = template * 2\n"
                                       "    A[union] = A[union] + 1.0",
                                       params=f"A: T.Tensor((128,), {F32}), namespace: T.int32")),
    Good("reserved-names", named("tw tw_smem min max threadIdx", "s = T.alloc_shared((128,), \"float32\")\n"
                                 "T.copy(tw, s)\nfor i in T.Parallel(128):\n"
                                 "    min[i] = s[i] + tw_smem[i] + max[i] + threadIdx[i]")),
    Good("launcher-names", named("rt grid KERNEL BLOCK launch", "for i in T.Parallel(128):\n"
                                 "    rt[i] = grid[i] + KERNEL[i] + BLOCK[i] + launch[i]")),
    Good("unicode-names", named("données résultat", "tampon = T.alloc_shared((128,), \"float32\")\n"
                                "T.copy(données, tampon)\nfor ι in T.Parallel(128):\n"
                                "    résultat[ι] = tampon[ι] * 2.0")),
    Good("descriptor-name-taken", kernel('s = T.alloc_shared((64, 64), "float16")\nm = T.alloc_barrier(128)\n'
                                         "T.tma_copy(H[0, 0], s, barrier=m)\nT.barrier_arrive(m)\n"
                                         "T.barrier_wait(m, 0)\nT.copy(s, H_desc[0, 0])",
                                         params='H: T.Tensor((64, 128), "float16"), '
                                                'H_desc: T.Tensor((64, 128), "float16")'), ("H_desc_1",)),
    Good("future-annotations", "from __future__ import annotations\n" + named("A B", "for i in T.Parallel(128):\n"
                                                                          "    B[i] = A[i] + 1.0")),
    Good("long-sum", named("A B", f"B[0] = {LONG_SUM}")),
    Good("deep-parentheses", named("A B", f"B[0] = {DEEP}")),
    Good("run-time-extent-copy", named("A B", 's = T.alloc_shared((128,), "float32")\nT.fill(s, -1.0)\n'
                                       "n = bx * 16 + 8\nT.copy(A[0:n], s[0:n])\nT.copy(s, B)"),
         ("i0_1 < ((bx * 16) + 8)",)),
    Good("run-time-extent-fill", named("A B", 's = T.alloc_shared((128,), "float32")\nT.fill(s, 0.0)\n'
                                       "T.fill(s[bx:128], 1.0)\nT.copy(s, B)")),
    Good("run-time-extent-2d", kernel('s = T.alloc_shared((8, 64), "float32")\nT.clear(s)\n'
                                      "T.copy(M[bx * 8:bx * 8 + 8, 0:bx + 1], s[0:8, 0:bx + 1])\nT.copy(s, N[0, 0])",
                                      params=f"M: T.Tensor((32, 64), {F32}), N: T.Tensor((8, 64), {F32})")),
    Good("two-gemm-forms-one-accumulator", kernel(
        'a = T.alloc_shared((128, 64), "float16")\nb = T.alloc_shared((64, 128), "float16")\n'
        'bt = T.alloc_shared((128, 64), "float16")\nc = T.alloc_fragment((128, 128), "float32")\n'
        "T.copy(P, a)\nT.copy(Q, b)\nT.copy(R, bt)\nT.clear(c)\nT.gemm(a, b, c)\nT.gemm(a, bt, c, transpose_B=True)\n"
        "T.copy(c, S)", params='P: T.Tensor((128, 64), "float16"), Q: T.Tensor((64, 128), "float16"), '
                               'R: T.Tensor((128, 64), "float16"), S: T.Tensor((128, 128), "float32")'),
         ("_kn>", "_kk>")),
    Good("one-element", kernel("A[0] = A[0] + 1.0", params=f"A: T.Tensor((1,), {F32})",
                               head="with T.Kernel(1, threads=1) as bx:")),
    Good("odd-sizes", kernel('s = T.alloc_shared((33, 17), "float32")\nT.copy(M[bx * 33, 0], s)\n'
                             "T.copy(s, M[bx * 33, 0])", params=f"M: T.Tensor((1000, 17), {F32})",
                             head="with T.Kernel(T.ceildiv(1000, 33), threads=96) as bx:")),
    Good("bitwise-and-shifts", kernel("for i in T.Parallel(128):\n    I[i] = ((I[i] << 3) | (1 << bx)) ^ (I[i] >> 1) & 255",
                                      params='I: T.Tensor((128,), "int32")')),
    Good("conditional-expression", named("A B", "for i in T.Parallel(128):\n    B[i] = A[i] if i < 64 else -A[i]")),
    Good("python-helper", "def twice(x):\n    return x * 2.0\n\n" + named("A B", "for i in T.Parallel(128):\n"
                                                                      "    B[i] = twice(A[i])")),
    Good("helper-that-builds", "def stage(dst, src):\n    s = T.alloc_shared((128,), 'float32')\n    T.copy(src, s)\n"
                               "    T.copy(s, dst)\n\n" + named("A B", "stage(B, A)")),
    Good("zero-trip-loop", named("A", "for i in T.serial(0):\n    A[i] = 1.0")),
    Good("negative-float-literal", named("A", "A[0] = -3.0e38")),
    Good("infinity-store", named("A", "A[0] = T.infinity(T.float32)\nA[1] = -T.infinity(T.float32)")),
    Good("int64-literal", kernel("x = T.int64(2**40)\nL[0] = x", params='L: T.Tensor((4,), "int64")')),
    Good("max-grid-x", kernel("A[0] = 1.0", params=f"A: T.Tensor((128,), {F32})",
                              head="with T.Kernel(2**31 - 1, threads=32) as bx:")),
    Good("big-tensor-offsets", kernel('s = T.alloc_shared((128, 128), "float16")\n'
                                      "T.copy(X[by * 128, bx * 128], s)\nT.copy(s, Y[by * 128, bx * 128])",
                                      params='X: T.Tensor((65536, 65536), "float16"), '
                                             'Y: T.Tensor((65536, 65536), "float16")',
                                      head="with T.Kernel(512, 512, threads=128) as (bx, by):"),
         ("(long long)(by) * 8388608",)),
    Good("big-1d-guard", kernel("for i in T.Parallel(1024):\n    if bx * 1024 + i < 2**31 + 1000:\n"
                                "        Y[bx * 1024 + i] = X[bx * 1024 + i] + 1.0",
                                params='X: T.Tensor((2**31 + 1000,), "float16"), Y: T.Tensor((2**31 + 1000,), "float16")',
                                head="with T.Kernel(T.ceildiv(2**31 + 1000, 1024), threads=256) as bx:"),
         ("2147484648LL", "(long long)(bx) * 1024")),
    Good("big-tensor-param-index", kernel("Y[n] = X[n] + 1.0", params='X: T.Tensor((2**31 + 8,), "float16"), '
                                                                      'Y: T.Tensor((2**31 + 8,), "float16"), '
                                                                      'n: T.int64')),
    # a reduction under an `if` (its operands are buffers, not regions: the check of whether the
    # block's threads share its work stopped on them, found by the NVRTC property at random)
    Good("reduce-under-if", kernel('f = T.alloc_fragment((128,), "float32")\nr = T.alloc_fragment((1,), "float32")\n'
                                   "T.copy(A, f)\nif bx < 2:\n    T.reduce_sum(f, r, dim=0)\nA[0] = r[0]",
                                   params='A: T.Tensor((128,), "float32")')),
])


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_valid_kernels_at_the_edges_lower_and_compile(case):
    check_good(case)


def test_a_small_tensor_keeps_32_bit_offsets():
    """64-bit arithmetic only where a value can pass 2^31: the same copy over a 4096 x 4096 tensor
    has no `long long` in it."""
    case = Good("small", kernel('s = T.alloc_shared((128, 128), "float16")\n'
                                "T.copy(X[by * 128, bx * 128], s)\nT.copy(s, Y[by * 128, bx * 128])",
                                params='X: T.Tensor((4096, 4096), "float16"), Y: T.Tensor((4096, 4096), "float16")',
                                head="with T.Kernel(32, 32, threads=128) as (bx, by):"))
    source = check_good(case).device_source
    assert "long long" not in source.split("// ---- kernel ----")[1]
