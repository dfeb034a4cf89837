"""Misused constructs of TileLang's newer language (``T.ws`` warp specialisation, ``T.reinterpret``,
``T.dynamic``, fragment views): each a CompileError at the user's line saying what is wrong. (Scopes nested, in a
block of partial warpgroups or outside the kernel, and dynamic sizes no tensor gives, are in
tests/tilelang_compat.)"""

import pytest

from .harness import Bad, check_bad, check_unique, ids

KERNEL = '''
@T.prim_func
def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "int32"), n: T.int32):
    with T.Kernel(1, threads=256) as bx:
        {body}
'''


VIEW = "f = T.alloc_fragment((128,), 'float32')\n        "


def case(id_, body, match):
    return Bad(id_, KERNEL.format(body=body), match)


CASES = check_unique([
    case("ws-no-group", "with T.ws():  # <-\n            A[0] = 1.0", r"T.ws needs the warpgroup\(s\) that run its body"),
    case("ws-string", "with T.ws('a'):  # <-\n            A[0] = 1.0", "a warpgroup must be a number, not the string 'a'"),
    case("ws-negative", "with T.ws(-1):  # <-\n            A[0] = 1.0", "a warpgroup is a constant number from 0, got the int -1"),
    case("ws-float", "with T.ws(0.5):  # <-\n            A[0] = 1.0", "a warpgroup must be an integer, not the float 0.5"),
    case("ws-runtime", "with T.ws(n):  # <-\n            A[0] = 1.0", r"a warpgroup is a constant number from 0, got a int32 "
                                                                      r"kernel value \(n\)"),
    case("ws-keyword", "with T.ws(0, x=1):  # <-\n            A[0] = 1.0", "unexpected keyword argument 'x'"),
    case("reinterpret-wider", "B[0] = T.reinterpret(A[0], 'float64')  # <-", r"keeps the width: float32 is 32 bits, "
                                                                            r"float64 64; cast first \(T.Cast\)"),
    case("reinterpret-narrower", "B[0] = T.reinterpret(A[0], 'int16')  # <-", "float32 is 32 bits, int16 16"),
    case("reinterpret-not-a-dtype", "B[0] = T.reinterpret(A[0], 'nope')  # <-", "must be a dtype such as T.uint32, got "
                                                                              "the string 'nope'"),
    case("reinterpret-nothing", "B[0] = T.reinterpret()  # <-", "missing a required argument: 'value'"),
    case("reinterpret-no-dtype", "B[0] = T.reinterpret(A[0])  # <-", "missing a required argument: 'dtype'"),
    case("reinterpret-a-buffer", "B[0] = T.reinterpret(A, 'int32')  # <-", "the value must be a number, not the global "
                                                                          "buffer A"),
    case("reinterpret-too-many", "B[0] = T.reinterpret(A[0], 'int32', 3)  # <-", "too many positional arguments"),
    # Python's max/min over a run-time value (T.max/T.min of them): what is no number
    case("max-of-a-buffer", "B[0] = max(n, A)  # <-", r"max\(\): an argument must be a number, not the global buffer A"),
    case("min-of-a-string", "B[0] = min('x', n)  # <-", r"min\(\): an argument must be a number, not the string 'x'"),
    case("dynamic-in-the-kernel", "m = T.dynamic('m')  # <-\n        A[0] = 1.0", r"T.dynamic\('m'\) inside the kernel: "
                                                                              r"declare sizes before `with T.Kernel"),
    # fragment views (T.reshape / T.view of a fragment): what they do not take
    case("view-into-a-gemm", VIEW + "c = T.alloc_fragment((64, 64), 'float32')\n        a = T.alloc_shared((64, 32), 'float16')\n"
         "        T.gemm(a, a, T.reshape(c, (64, 2, 32)), transpose_B=True)  # <-", "T.gemm C: c_view is a view of the fragment c"),
    case("view-copied-into", VIEW + "T.copy(A[0:128], T.reshape(f, (2, 64)))  # <-", "T.copy destination: f_view is a view"),
    case("view-scanned", VIEW + "T.cumsum(T.reshape(f, (2, 64)), dim=1)  # <-", "T.cumsum source: f_view is a view"),
    case("view-reduced-along-an-outer-part", VIEW + "o = T.alloc_fragment((64,), 'float32')\n"
         "        T.reduce_sum(T.reshape(f, (2, 64)), o, dim=0)  # <-", "along the inner part of one it splits"),
    case("view-of-a-runtime-shape", VIEW + "v = T.reshape(f, (n, 64))  # <-", "needs a shape known when the kernel is built"),
    case("view-without-a-shape", VIEW + "v = T.view(f, dtype='float32')  # <-", "needs the shape to see it with"),
    case("view-element-out-of-range", VIEW + "v = T.reshape(f, (2, 64))\n        v[2, 0] = 1.0  # <-",
         "index 2 is out of range for dimension 0 of v"),
    # TileLang's cp.async group marks, taken with nothing to wait for: their arguments still checked
    case("wait-group-negative", "T.ptx_wait_group(-1)  # <-", "T.ptx_wait_group: num must be at least 0, got -1"),
    case("wait-group-runtime", "T.ptx_wait_group(n)  # <-", "num must be a constant integer, not a int32 kernel value"),
    case("commit-group-argument", "T.ptx_commit_group(3)  # <-", "too many positional arguments"),
    # a per-thread array filled from a fragment (each thread holds only part of it): at the copy's line
    case("fragment-into-a-thread-array", VIEW + "l = T.alloc_local((128,), 'float32')\n        T.copy(A, f)\n"
         "        T.copy(f, l)  # <-\n        A[0] = l[3]", "fragment f can only be accessed inside a T.Parallel loop"),
])


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_misused_construct(case):
    check_bad(case)
