"""carry_stage_counters: a ring's slot and phase carried from one iteration to the next.

Expects: lowered, simplified IR (run last). Pipelined loops (``For.pipeline``, steady: the
software-pipelined steady state and the warp-specialised role loops) index their ring of ``s``
stages with ``E % s`` and read the barrier phase as ``E // s % 2`` or ``(E // s + 1) % 2``, where
``E`` is the loop variable plus something the loop does not change (``k + 2``, ``tile_iter *
64 + k``).
Guarantees: for ``s`` not a power of two (a power of two costs a mask or a shift already), each
such ``E`` gets two scalars declared before the loop, ``E % s`` and ``E // s % 2`` at the first
iteration, which the end of every iteration advances (the slot wraps at ``s``, the phase flips
when it does); inside the loop the expressions above read them. Values are unchanged in every
iteration, only the arithmetic: a division by a constant is a multiply-high and corrections,
several per iteration, and the spec GEMM at 3 stages spends 5-8% of its time on them
(docs/experiments.md, 'Spec kernels: carried stage counters and raster panels').
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.simplify import Affine, simplify
from ..ir.visitor import IRMutator, collect, substitute, uses_var
from .manager import register


def _is_power_of_two(n: int) -> bool:
    return n & (n - 1) == 0


class _Counters:
    """The carried scalars of one loop, one pair per stage expression ``E``."""

    def __init__(self, loop: ir.For, stages: int, inner_vars: set):
        self.loop, self.stages, self.inner_vars = loop, stages, inner_vars
        self.slots: dict = {}  # expr_text(E) -> (E, slot var, phase var)
        self.phases_read: set = set()  # the phase vars some expression reads

    def stage_expr(self, e) -> ir.Expr | None:
        """``e`` when it is the loop variable (coefficient 1) plus terms the loop does not change."""
        aff = Affine.of(e)
        coefs = [coef for atom, coef in aff.terms.values() if isinstance(atom, ir.Var) and atom is self.loop.var]
        if coefs != [1]:
            return None
        for atom, _ in aff.terms.values():
            if atom is self.loop.var:
                continue
            if collect(atom, (ir.BufferLoad, ir.Call, ir.Raw)) or \
                    any(uses_var(atom, v) for v in self.inner_vars | {self.loop.var}):
                return None
        return e

    def pair(self, e: ir.Expr) -> tuple:
        key = expr_text(e)
        if key not in self.slots:
            n = len(self.slots)
            base = self.loop.var.name
            self.slots[key] = (e, ir.Var(f"{base}_slot{n}"), ir.Var(f"{base}_phase{n}"))
        return self.slots[key]

    def declarations(self) -> list:
        first = {self.loop.var: self.loop.start}
        s = self.stages
        out = []
        for e, slot, phase in self.slots.values():
            e0 = substitute(e, first)
            out.append(ir.LetStmt(slot, simplify(e0 % s)))
            if phase in self.phases_read:
                out.append(ir.LetStmt(phase, simplify((e0 // s) % 2)))
        return out

    def advance(self) -> list:
        s = self.stages
        out = []
        for _, slot, phase in self.slots.values():
            out.append(ir.Assign(slot, ir.Select(ir.cmp("==", slot, s - 1), ir.const(0), slot + 1)))
            if phase in self.phases_read:  # flips as the slot wraps
                out.append(ir.Assign(phase, ir.Select(ir.cmp("==", slot, 0), 1 - phase, phase)))
        return out


class _Rewrite(IRMutator):
    """Inside one loop's body: ``E % s`` -> slot, ``E // s % 2`` -> phase, ``(E // s + 1) % 2`` -> 1 - phase."""

    def __init__(self, counters: _Counters):
        self.c = counters

    def visit_BinOp(self, node):
        s = self.c.stages
        if node.op == "%" and ir.const_int(node.b) == 2:
            inner, flip = node.a, False
            if isinstance(inner, ir.BinOp) and inner.op == "+" and ir.const_int(inner.b) == 1:
                inner, flip = inner.a, True
            if isinstance(inner, ir.BinOp) and inner.op == "//" and ir.const_int(inner.b) == s:
                e = self.c.stage_expr(inner.a)
                if e is not None:
                    _, _, phase = self.c.pair(e)
                    self.c.phases_read.add(phase)
                    return 1 - phase if flip else phase
        if node.op == "%" and ir.const_int(node.b) == s:
            e = self.c.stage_expr(node.a)
            if e is not None:
                return self.c.pair(e)[1]
        return self.generic_visit(node)


def _bound_inside(body) -> set:
    return {s.var for s in collect(body, ir.LetStmt)} | {f.var for f in collect(body, ir.For)}


class _CarryCounters(IRMutator):
    def __init__(self):
        self.loops: list = []

    def visit_SeqStmt(self, node):
        return ir.seq([self.visit(stmt) for stmt in node.stmts])  # a rewritten loop's declarations join it

    def visit_For(self, node):
        node = self.generic_visit(node)
        stages = node.pipeline.stages if node.pipeline is not None and node.pipeline.steady else 0
        if stages < 3 or _is_power_of_two(stages):
            return node
        counters = _Counters(node, stages, _bound_inside(node.body))
        body = _Rewrite(counters).visit(node.body)
        if not counters.slots:
            return node
        self.loops.append({"loop": node.var.name, "stages": stages,
                           "counters": [expr_text(e) for e, _, _ in counters.slots.values()]})
        loop = dataclasses.replace(node, body=ir.seq([body, *counters.advance()]))
        return ir.SeqStmt([*counters.declarations(), loop])


@register("carry_stage_counters", "lower")
def carry_stage_counters(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    mutator = _CarryCounters()
    body = mutator.visit(func.body)
    out = func.with_body(body)
    out.attrs["stage_counters"] = mutator.loops
    return out
