"""The simplifier puts an index taken apart back together: ``k*x - k*c*(x // c)`` is ``k*(x % c)``
(exact for floor division), so a loop over the tokens of a sub-chunk, ``bs + 1 - start`` with
``start = (bs // CS) * CS + ((bs % CS) // SCS) * SCS``, is known to run at most SCS times, and a
copy into column ``d`` of an SCS-wide tile is proven inside it (TileLang's KDA intra-chunk kernel
was refused with "can reach element 256, past its 16")."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.printer import expr_text
from tileworkbench.ir.simplify import interval, simplify

from tests.test_ir import _evaluate

t = ir.Var("tx")
S, CS, SCS, H = 64, 32, 8, 4


def test_an_index_taken_apart_and_put_back_is_its_remainder():
    ranges = {t: (0, 4095)}
    bs = t % 256
    start = (bs // 64) * 64 + ((bs % 64) // 16) * 16
    assert interval(simplify(bs - start, ranges), ranges) == (0, 15)
    assert expr_text(simplify(t * 3 - (t // 8) * 24 + 5)) == "tx % 8 * 3 + 5"
    assert expr_text(simplify(t - (t // 8) * 16)) == "tx - tx // 8 * 16"  # not a remainder: kept


@settings(max_examples=300, deadline=None)
@given(st.integers(-1000, 1000), st.integers(1, 64), st.integers(-4, 4), st.integers(-50, 50))
def test_the_fold_keeps_the_value(x, c, k, extra):
    v = ir.Var("v")
    e = v * k + extra - (v // c) * (k * c)
    folded = simplify(e)
    env_value = _evaluate(folded, {v: x})
    assert env_value == k * x + extra - k * c * (x // c) == k * (x % c) + extra


@T.prim_func
def sub_chunk_rows(X: T.Tensor((S, H), "float32"), Out: T.Tensor((S, H, SCS), "float32")):
    """Each token's block gathers, column by column, the rows of its sub-chunk up to itself."""
    with T.Kernel(S, threads=32) as bs:
        start = (bs // CS) * CS + ((bs % CS) // SCS) * SCS
        cols = T.alloc_shared((H, SCS), "float32")
        row = T.alloc_fragment((H,), "float32")
        T.clear(cols)
        for d in T.serial(bs + 1 - start):
            for h in T.Parallel(H):
                row[h] = X[start + d, h]
            T.copy(row, cols[:, d])
        T.copy(cols, Out[bs, :, :])


def test_a_sub_chunk_loop_bounds_its_column():
    x = np.random.default_rng(0).standard_normal((S, H)).astype(np.float32)
    out = np.full((S, H, SCS), np.nan, np.float32)
    tw.compile(sub_chunk_rows, target="cpu")(x, out)
    want = np.zeros((S, H, SCS), np.float32)
    for bs in range(S):
        start = bs - bs % SCS
        for d in range(bs - start + 1):
            want[bs, :, d] = x[start + d]
    np.testing.assert_array_equal(out, want)
