"""The IR verifier (ir/verify.py): what it rejects, and that the pass manager names the pass that broke the IR.

The suite runs with TILEWORKBENCH_VERIFY_IR=1 (conftest.py), so every lowering in every test is
verified after each pass; these tests show the verifier is not a no-op.
"""

import dataclasses

import pytest

import tileworkbench as tw
from tileworkbench.errors import InternalCompilerError
from tileworkbench.examples import matmul_tma_copy
from tileworkbench.ir import nodes as ir
from tileworkbench.ir import verify
from tileworkbench.passes import manager, pipeline

SM90 = {"kind": "cuda", "arch": "sm_90"}


def spec_gemm():
    return matmul_tma_copy(256, 256, 256, 128, 128, 32, "float16", "float16", "float32", 128, 2)


def small_func(body_of) -> ir.PrimFunc:
    """A one-block function with a global A (16 x 16) whose body ``body_of(A, tx)`` makes."""
    tx, bx = ir.Var("tx"), ir.Var("bx")
    a = ir.Buffer("A", (ir.const(16), ir.const(16)), ir.dtypes.float32, "global")
    launch = ir.Launch((ir.const(1),), 128, (bx,), tx)
    return ir.PrimFunc("f", [a], body_of(a, tx), launch)


def store(buf, indices, value=None, flat=False):
    return ir.BufferStore(buf, tuple(indices), value if value is not None else ir.const(1.0, ir.dtypes.float32),
                          flat=flat)


def test_a_well_formed_function_has_no_problems():
    func = small_func(lambda a, tx: store(a, [tx % 16, tx // 16]))
    assert verify.verify(func) == []


def test_every_lowering_of_the_spec_gemm_verifies():
    art = tw.lower(spec_gemm(), target=SM90)
    assert verify.verify(art.func) == []
    forms = verify.forms(art.func)
    assert not forms.tile_ops and not forms.fragments and forms.logical_accesses and not forms.flat_accesses


def test_an_unbound_variable_is_found():
    ghost = ir.Var("ghost")
    func = small_func(lambda a, tx: store(a, [tx % 16, ghost]))
    assert verify.verify(func) == ["variable ghost used where it is not bound"]


def test_a_loop_variable_is_bound_only_in_its_body():
    i = ir.Var("i")
    func = small_func(lambda a, tx: ir.seq([ir.For(i, ir.const(16), store(a, [i, tx % 16])),
                                            store(a, [i, tx % 16])]))
    assert verify.verify(func) == ["variable i used where it is not bound"]


def test_a_let_binds_for_the_rest_of_its_block_but_not_outside_a_branch():
    x = ir.Var("x")
    func = small_func(lambda a, tx: ir.seq([
        ir.IfThenElse(ir.binop("<", tx, ir.const(16)), ir.seq([ir.LetStmt(x, tx % 16), store(a, [x, x])])),
        store(a, [x, x]),
    ]))
    assert verify.verify(func) == ["variable x used where it is not bound"] * 2


def test_an_undeclared_buffer_is_found():
    s = ir.Buffer("S", (ir.const(16),), ir.dtypes.float32, "shared")
    func = small_func(lambda a, tx: store(s, [tx % 16]))
    assert verify.verify(func) == ["buffer S (shared) used before it is declared"]
    declared = small_func(lambda a, tx: ir.seq([ir.Allocate(s), store(s, [tx % 16])]))
    assert verify.verify(declared) == []


def test_the_number_of_indices_must_match_the_buffer():
    func = small_func(lambda a, tx: store(a, [tx]))
    assert verify.verify(func) == ["BufferStore: 1 indices for A, which has 2 dimensions"]
    flat = small_func(lambda a, tx: store(a, [tx, tx], flat=True))
    assert verify.verify(flat) == ["BufferStore: a flat access to A has 2 indices"]


def test_a_float_index_is_found():
    func = small_func(lambda a, tx: store(a, [ir.const(1.5, ir.dtypes.float32), tx % 16]))
    assert verify.verify(func) == ["BufferStore: an index of A is a float32 (1.5)"]


def test_partly_flat_ir_is_found():
    func = small_func(lambda a, tx: ir.seq([store(a, [tx], flat=True), store(a, [tx % 16, tx // 16])]))
    assert "the IR is partly flat: the codegen phase leaves every access flat" in verify.verify(func)


def test_regressions_are_what_comes_back():
    gone, back = verify.Forms(tile_ops=False, fragments=False), verify.Forms(tile_ops=True, fragments=False)
    assert verify.regressions(gone, back) == ["brings back tile ops, which an earlier pass removed"]
    assert verify.regressions(back, gone) == []


def _dropping_allocations(func, ctx):
    """A broken pass: it forgets every shared tile's Allocate."""
    def drop(s):
        if isinstance(s, ir.SeqStmt):
            return ir.seq([drop(x) for x in s.stmts if not (isinstance(x, ir.Allocate) and x.buffer.scope == "shared")])
        if isinstance(s, ir.For):
            return dataclasses.replace(s, body=drop(s.body))
        return s
    return func.with_body(drop(func.body))


def test_the_pass_that_breaks_the_ir_is_named(monkeypatch):
    manager.register("drop_allocations", "lower")(_dropping_allocations)
    monkeypatch.setattr(pipeline, "PIPELINE", pipeline.PIPELINE[:3] + ["drop_allocations"] + pipeline.PIPELINE[3:])
    monkeypatch.setenv(manager.VERIFY_ENV, "1")
    with pytest.raises(InternalCompilerError, match=r"pass drop_allocations left invalid IR: buffer A_shared"):
        tw.lower(spec_gemm(), target=SM90)


def test_the_switch_is_off_without_the_variable_or_the_config(monkeypatch):
    manager.register("drop_allocations", "lower")(_dropping_allocations)
    monkeypatch.setattr(pipeline, "PIPELINE", pipeline.PIPELINE[:3] + ["drop_allocations"] + pipeline.PIPELINE[3:])
    monkeypatch.delenv(manager.VERIFY_ENV, raising=False)
    with pytest.raises(Exception) as unverified:  # found later, or not at all: not by the verifier
        tw.lower(spec_gemm(), target=SM90)
        raise AssertionError("lowered")
    assert "left invalid IR" not in str(unverified.value)
    with pytest.raises(InternalCompilerError, match="pass drop_allocations left invalid IR"):
        tw.lower(spec_gemm(), target=SM90, pass_configs={tw.PassConfigKey.TW_VERIFY_IR: True})
