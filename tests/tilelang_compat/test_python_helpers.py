"""Plain Python helpers a kernel calls (not ``@T.macro``) run as Python on kernel values, so their
operators are the IR's: comparisons build IR comparisons as TVM's expressions do (TileLang's
block-causal attention masks tiles with ``T.if_then_else(q_blk == k_blk, 1, 0)`` in such a
helper). Before, ``==`` compared the two objects and gave Python's ``False``: the mask folded to
a constant, a wrong answer without a word. As a Python truth value (``x in items``, the compiler's
own bookkeeping) ``==`` still means identity, and an ordering is an error naming the value."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.ir import nodes as ir

from .interpreters import on_both_interpreters


def _tile_allowed(i, j, block: int, strict):
    """TileLang's shape of helper: block indices compared with ==, > and >= in plain Python."""
    q_blk = i // block
    k_blk = j // block
    same = T.if_then_else(q_blk == k_blk, 1, 0)
    before = T.if_then_else(strict, T.if_then_else(q_blk > k_blk, 1, 0), T.if_then_else(q_blk >= k_blk, 1, 0))
    differs = T.if_then_else(q_blk != k_blk, 1, 0)
    return same * 100 + before * 10 + differs


@T.prim_func
def tile_masks(Strict: T.Tensor((1,), "int32"), Out: T.Tensor((32, 32), "int32")):
    with T.Kernel(1, threads=128):
        strict = Strict[0]
        for i, j in T.Parallel(32, 32):
            Out[i, j] = _tile_allowed(i, j, 8, strict != 0) + T.if_then_else(i < j, 1000, 0)


def _want(strict: bool) -> np.ndarray:
    i, j = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    q, k = i // 8, j // 8
    before = (q > k) if strict else (q >= k)
    return ((q == k) * 100 + before * 10 + (q != k) + (i < j) * 1000).astype(np.int32)


@on_both_interpreters
@pytest.mark.parametrize("strict", [0, 1])
def test_a_helper_s_comparisons_mean_what_they_say(run, strict):
    out = np.full((32, 32), -1, np.int32)
    run(tile_masks, np.array([strict], np.int32), out)
    assert np.array_equal(out, _want(bool(strict)))


def test_the_generated_code_compares():
    code = tw.lower(tile_masks, target="sm_90a").kernel_source
    assert "==" in code and ">=" in code and "!=" in code


def test_python_truth_of_a_comparison_is_identity_for_equality_and_an_error_for_ordering():
    a, b = ir.Var("a"), ir.Var("b")
    assert isinstance(a == b, ir.BinOp) and (a == b).op == "=="
    assert bool(a == a) and not bool(a == b) and bool(a != b) and not bool(a != a)
    assert a in [b, a] and b not in [a] and (a, b) == (a, b) and (a, b) != (b, a)
    assert {a: 1, b: 2}[b] == 2
    assert (a == "a") is False and (a != None) is True  # noqa: E711 (no number: identity, as before)
    with pytest.raises(CompileError, match="no Python truth value"):
        bool(a < b)


def _branching_helper(x):
    if x > 0:  # a Python `if` on a kernel value: an error that says why, never a silent branch
        return x
    return -x


def test_a_python_if_on_a_kernel_value_in_a_helper_is_refused():
    with pytest.raises(CompileError, match="no Python truth value") as info:
        @T.prim_func
        def branching(A: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(4):
                    A[i] = _branching_helper(A[i])
    assert "_branching_helper(A[i])" in str(info.value)  # the kernel line, with its caret


def _flipped_order_key(x):
    """TileLang's top-k selector's helper: a float's bits made to sort as unsigned integers, with
    ``~`` on a kernel value (it raised TypeError: Expr had no ``__invert__``)."""
    bits = T.reinterpret(T.cast(x, T.float16), T.uint16)
    return T.if_then_else(x < 0, ~bits & 0xFFFF, bits | 0x8000)


@T.prim_func
def order_keys(X: T.Tensor((64,), "float32"), K: T.Tensor((64,), "int32")):
    with T.Kernel(1, threads=64):
        for i in T.Parallel(64):
            K[i] = _flipped_order_key(X[i])


@on_both_interpreters
def test_invert_in_a_helper_flips_bits(run):
    x = np.random.default_rng(9).standard_normal(64).astype(np.float32)
    keys = np.zeros(64, np.int32)
    run(order_keys, x, keys)
    bits = x.astype(np.float16).view(np.uint16).astype(np.int64)
    want = np.where(x < 0, ~bits & 0xFFFF, bits | 0x8000)
    assert np.array_equal(keys, want)
    assert np.array_equal(np.argsort(keys, kind="stable"), np.argsort(x.astype(np.float16), kind="stable"))
