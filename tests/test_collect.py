"""``ir.visitor.collect`` walks the IR itself (no visitor dispatch); it must find what an
``IRVisitor`` finds, in the same pre-order, for every kind of node, over real kernels at every
stage of the pipeline."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.examples import attention, matmul
from tileworkbench.examples.mla_pieces import halves_staged
from tileworkbench.ir import nodes as ir
from tileworkbench.ir.visitor import IRVisitor, collect


class _Reference(IRVisitor):
    def __init__(self, kind):
        self.kind, self.found = kind, []

    def visit(self, node):
        if isinstance(node, self.kind):
            self.found.append(node)
        return super().visit(node)


KINDS = [ir.Stmt, ir.Expr, ir.Var, ir.Buffer, ir.BufferLoad, ir.BufferStore, ir.For, ir.LetStmt, ir.Call,
         ir.BinOp, ir.Const, ir.IfThenElse, ir.SeqStmt, (ir.BufferLoad, ir.BufferStore), ir.BarrierWait]


@pytest.mark.parametrize("program", [matmul(256, 256, 256, 128, 128, 32), attention.mha_fwd(1, 2, 256, 64, True),
                                     halves_staged()], ids=["matmul", "attention", "halves_staged"])
def test_collect_finds_what_a_visitor_finds_in_its_order(program):
    art = tw.lower(program, target="sm_90a")
    checked = 0
    for body in (art.source_func.body, art.func.body):  # the tile-level IR and the lowered one
        for kind in KINDS:
            reference = _Reference(kind)
            reference.visit(body)
            found = collect(body, kind)
            assert len(found) == len(reference.found) and all(a is b for a, b in zip(found, reference.found)), kind
            checked += len(found)
    assert checked > 500  # the walk saw real IR
