"""Constructs TileLang's examples use around their kernels: a slice whose bounds are kernel names
bound to expressions (MLA decode: ``kv_start = s * bz + k * 64``, ``kv_end = s * bz + (k + 1) * 64``,
a 64-row slice), ``T.clear`` / ``T.fill`` on a kernel variable (``x = T.alloc_var(dtype)``), and
comprehensions over Python values while the kernel is built (grouped GEMM: ``sum((n + b - 1) // b
for n in sizes)``); on both CPU interpreters, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from .interpreters import on_both_interpreters
from .kernel_files import main_with


@T.prim_func
def blocks_by_named_bounds(A: T.Tensor((4, 256), "float32"), B: T.Tensor((4, 256), "float32"),
                           Total: T.Tensor((4,), "float32")):
    with T.Kernel(4, threads=64) as bz:
        s = T.alloc_shared((64,), "float32")
        total = T.alloc_var("float32")
        T.clear(total)
        for k in T.serial(4):
            start = bz * 0 + k * 64
            end = bz * 0 + (k + 1) * 64
            T.copy(A[bz, start:end], s)
            for i in T.serial(64):
                total += s[i]
            T.copy(s, B[bz, start:end])
        Total[bz] = total


@on_both_interpreters
def test_a_slice_between_named_bounds_has_their_constant_extent(run):
    a = np.random.default_rng(1).standard_normal((4, 256)).astype(np.float32)
    b, total = np.zeros((4, 256), np.float32), np.zeros(4, np.float32)
    run(blocks_by_named_bounds, a, b, total)
    assert np.array_equal(b, a)
    np.testing.assert_allclose(total, a.astype(np.float64).sum(1), rtol=1e-5)


@T.prim_func
def filled_variable(Out: T.Tensor((2,), "int32")):
    with T.Kernel(1, threads=32):
        x = T.alloc_var("int32")
        T.fill(x, 7)
        Out[0] = x
        T.clear(x)
        Out[1] = x


def test_clear_and_fill_set_a_kernel_variable():
    out = np.full(2, -1, np.int32)
    tw.compile(filled_variable, target="cpu")(out)
    assert out.tolist() == [7, 0]


SIZES = [64, 100, 28]


@T.prim_func
def comprehended(A: T.Tensor((192,), "float32"), Out: T.Tensor((3,), "float32")):
    """Each group's first element of A times a weight, plus the blocks of 64 rows the groups take."""
    starts = [sum(SIZES[:g]) for g in range(len(SIZES))]  # 0, 64, 164
    first = second = 1  # chained, as TileLang's NSA example writes BK = BV = block_T
    blocks = sum((n + 63) // 64 for n in SIZES)  # 1 + 2 + 1
    weights = {g: g + 1 for g in range(len(SIZES)) if SIZES[g] > 0}
    with T.Kernel(1, threads=32):
        scaled = doubled = A[starts[0]] * first * second
        Out[0] = (scaled + doubled) * weights[0] / 2
        Out[1] = A[starts[1]] * weights[1]
        Out[2] = A[starts[2]] * weights[2] + blocks


@on_both_interpreters
def test_comprehensions_over_python_values(run):
    a = np.random.default_rng(2).standard_normal(192).astype(np.float32)
    out = np.zeros(3, np.float32)
    run(comprehended, a, out)
    assert out.tolist() == [a[0] * 1, a[64] * 2, np.float32(a[164] * 3 + 4)]


@pytest.mark.parametrize("statements, message", [
    # assigned again after a slice took its extent from it: the extent would be wrong
    ("start = k * 64\n            end = (k + 1) * 64\n            T.copy(A[start:end], s)\n            start = start + 1",
     "start is assigned again, but the slice at line 11 has the extent it has because start keeps its first"),
    # assigned again before the slice: the extent is not taken through it
    ("start = k * 64\n            end = (k + 1) * 64\n            start = start + 1\n            T.copy(A[start:end], s)",
     "the A region's extent .* is known only when the kernel runs"),
    # a name the bounds were bound from, assigned again between them: 65 wide, not 64
    ("x = k * 64\n            start = x\n            x = x + 1\n            end = x + 64\n"
     "            T.copy(A[start:end], s)", "the A region's extent .* is known only when the kernel runs"),
    # ... or after the slice took its extent through it
    ("x = k * 64\n            start = x\n            end = x + 64\n            T.copy(A[start:end], s)\n"
     "            x = x + 1", "x is assigned again, but the slice at line 12 has the extent it has"),
])
def test_what_is_refused(statements, message, tmp_path):
    with pytest.raises(tw.CompileError, match=message):
        main_with(tmp_path, 'A: T.Tensor((256,), "float32")',
                  f's = T.alloc_shared((64,), "float32")\n        for k in T.serial(4):\n            {statements}', threads=64)


@T.prim_func
def two_stores_of_one_warp_sum(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32"),
                               C: T.Tensor((32,), "int32")):
    with T.Kernel(1, threads=32):
        tx = T.get_thread_binding()
        B[tx] = C[tx] = T.warp_reduce_sum(A[tx])


def test_a_chained_store_builds_its_value_once():
    """``B[i] = C[i] = T.warp_reduce_sum(x)``: the butterfly the value is made of is emitted once."""
    source = tw.lower(two_stores_of_one_warp_sum, target="cuda").kernel_source
    assert source.split('extern "C"')[1].count("__shfl_xor_sync(") == 5
    a, b, c = np.arange(32, dtype=np.int32), np.zeros(32, np.int32), np.zeros(32, np.int32)
    run_at_thread_level(two_stores_of_one_warp_sum, a, b, c)
    assert b.tolist() == c.tolist() == [int(a.sum())] * 32
