"""TileLang's other spellings of things this compiler has: ``T.Tensor[(M, N), dtype]`` (a
subscript, in a kernel's signature and in the current style's body, its shape holding
``T.dynamic`` sizes) and ``T.fill(s[0], v)`` (one element). Both CPU interpreters against numpy."""

from __future__ import annotations

import numpy as np

import tileworkbench as tilelang
import tileworkbench.language as T

from .interpreters import on_both_interpreters

@T.prim_func
def shifted(A: T.Tensor[(4, 32), T.float32], Count: T.Tensor[(2,), T.int32], B: T.Tensor[(4, 32), T.float32]):
    with T.Kernel(4, threads=32) as bx:
        flags = T.alloc_shared((2,), "int32")
        T.fill(flags[1], bx + 7)  # one element
        T.fill(flags[0], 0)
        for j in T.Parallel(32):
            B[bx, j] = A[bx, j] + flags[1]
        if bx == 3:
            Count[0] = flags[1]
            Count[1] = flags[0]


@on_both_interpreters
def test_a_subscripted_tensor_annotation_and_a_one_element_fill(run):
    a = np.random.default_rng(4).standard_normal((4, 32)).astype(np.float32)
    count, b = np.full(2, -1, np.int32), np.zeros((4, 32), np.float32)
    run(shifted, a, count, b)
    np.testing.assert_array_equal(b, a + np.arange(7, 11, dtype=np.float32)[:, None])
    assert list(count) == [10, 0]


@tilelang.jit
def row_sums(X):
    rows, cols = T.dynamic("rows"), T.const("cols")
    X: T.Tensor[(rows, cols), T.float32]
    S = T.empty((rows,), T.float32)
    with T.Kernel(rows, threads=32) as bx:
        acc = T.alloc_fragment((1, cols), T.float32)
        total = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, 0], acc)
        T.reduce_sum(acc, total, dim=1)
        for i in T.Parallel(1):
            S[bx + i] = total[i]
    return S


def test_a_subscripted_annotation_in_the_current_style_with_a_dynamic_size():
    kernel = row_sums.compile(cols=64)
    assert [p["name"] for p in kernel.params][:2] == ["X", "rows"] and kernel.record["sizes"] == {"rows": [0, 0, 1]}
