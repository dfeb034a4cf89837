"""The IR expression evaluator the analyses use."""

import numpy as np
import pytest

from tileworkbench.analysis.evaluate import Unknown, as_int, evaluate
from tileworkbench.ir import nodes as ir


def test_floor_semantics_and_substitution():
    k = ir.Var("k")
    expr = (k + 2) % 3 * 4 + k // 3 % 2
    assert [evaluate(expr, {k: v}) for v in range(6)] == [((v + 2) % 3) * 4 + (v // 3) % 2 for v in range(6)]
    # the IR's // and % are floor operations (the code generator emits tw::floordiv for them)
    assert evaluate(ir.binop("//", k, 4), {k: -1}) == -1
    assert evaluate(ir.binop("%", k, 4), {k: -1}) == 3


def test_thread_vectors_and_conditions():
    tx = ir.Var("tx")
    tid = np.arange(128)
    warp = evaluate(tx // 32, {tx: tid})
    assert list(np.unique(warp)) == [0, 1, 2, 3]
    cond = evaluate(ir.cmp("==", tx % 32, 0), {tx: tid})
    assert cond.sum() == 4
    both = evaluate(ir.binop("and", ir.cmp("<", tx, 64), ir.cmp("==", tx % 32, 0)), {tx: tid})
    assert list(np.nonzero(both)[0]) == [0, 32]


def test_unknown_values_raise():
    k = ir.Var("k")
    with pytest.raises(Unknown):
        evaluate(k + 1, {})
    buf = ir.Buffer("x", (ir.const(4),), ir.dtypes.int32, "local")
    with pytest.raises(Unknown):
        evaluate(ir.BufferLoad(buf, (ir.const(0),), ir.dtypes.int32), {})
    with pytest.raises(Unknown):
        as_int(np.arange(4))  # differs between threads
    assert as_int(np.full(4, 7)) == 7
