"""split_uniform_selects: a T.if_then_else that decides alike for a whole tile is decided once per
tile. The corner conditions it writes are checked against brute force over every element (for
random affine comparisons), and the nests it must leave alone are left alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.edge_cases import masked_scores
from tileworkbench.ir import nodes as ir
from tileworkbench.analysis.evaluate import evaluate
from tileworkbench.passes.split_uniform_selects import corner_conditions

SM90 = {"kind": "cuda", "arch": "sm_90"}


def after_pass(func):
    return tw.lower(func, target=SM90).trace.ir_after("split_uniform_selects")


def test_a_causal_mask_is_decided_once_per_tile_with_the_per_element_form_kept_for_the_diagonal():
    text = after_pass(masked_scores(op=">", shift=3))
    assert "if bx * 64 - by * 64 - 66 > 0:" in text  # every element: i = 0, j = 63
    assert "if bx * 64 - by * 64 + 60 <= 0:" in text  # no element: i = 63, j = 0
    assert text.count("s[i, j] = 1.0") == 1 and text.count("s[i, j] = 0.0") == 1
    assert "T.if_then_else(bx * 64 + i > by * 64 + j + 3, 1.0, 0.0)" in text


def test_causal_attention_masks_only_the_tiles_on_the_diagonal():
    from tileworkbench.examples.attention import mha_fwd

    src = tw.lower(mha_fwd(1, 2, 512, 64, True, block_M=64, block_N=64, num_stages=2, threads=128),
                   target=SM90).device_source
    assert "if (((((bx * 64) - (k_1 * 64)) - 63) >= 0)) {" in src


OPS = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b}


@settings(max_examples=200, deadline=None)
@given(op=st.sampled_from(sorted(OPS)), ci=st.integers(-3, 3), cj=st.integers(-3, 3), cb=st.integers(-130, 130),
       const=st.integers(-200, 200), ei=st.integers(1, 9), ej=st.integers(1, 9), bx=st.integers(0, 5))
def test_corner_conditions_agree_with_every_element(op, ci, cj, cb, const, ei, ej, bx):
    """``cb * bx + ci * i + const OP cj * j``: the 'all true' and 'all false' expressions, evaluated
    at bx, say what the comparison does for every (i, j) of an ei x ej tile."""
    i, j, b = ir.Var("i"), ir.Var("j"), ir.Var("bx")
    lhs = ir.binop("+", ir.binop("+", ir.binop("*", b, cb), ir.binop("*", i, ci)), const)
    cond = ir.cmp(op, lhs, ir.binop("*", j, cj))
    decided = corner_conditions(cond, {i: (0, ei - 1), j: (0, ej - 1)}, {b})
    if ci == 0 and cj == 0:
        assert decided is None  # nothing varies over the tile: left to simplify
        return
    all_true, all_false = (bool(evaluate(e, {b: bx})) for e in decided)
    values = [OPS[op](cb * bx + ci * ii + const, cj * jj) for ii in range(ei) for jj in range(ej)]
    assert all_true == all(values) and all_false == (not any(values))


def kernel_with(which):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), Out: T.Tensor((4, 64), "float32")):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_fragment((64,), "float32")
            for i in T.Parallel(64):
                if which == "thread":  # the thread index differs within the block
                    s[i] = T.if_then_else(bx * 16 + i >= tx, 1.0, 0.0)
                elif which == "loaded":  # a value loaded from memory
                    s[i] = T.if_then_else(A[i] >= bx, 1.0, 0.0)
                elif which == "not-affine":
                    s[i] = T.if_then_else(i * i >= bx, 1.0, 0.0)
                else:  # nothing varies over the tile
                    s[i] = T.if_then_else(bx >= 2, 1.0, 0.0)
            T.copy(s, Out[bx, :])

    return main


@pytest.mark.parametrize("which", ["thread", "loaded", "not-affine", "uniform"])
def test_selects_that_cannot_be_decided_per_tile_are_left_alone(which):
    before = tw.lower(kernel_with(which), target=SM90).trace
    assert before.ir_after("split_uniform_selects") == before.ir_after("lower_tile_ops")
