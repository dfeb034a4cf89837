"""rebase_shifted_nests: a ``T.Parallel`` nest that indexes a fragment at its variables plus a shift
the nest does not change becomes a nest over the fragment's own indices.

Expects: tile-level IR (a ``T.Parallel`` nest is ``For`` loops of kind ``"parallel"``, one per
dimension, each the only statement of the one around it; names for tile offsets inlined).
Guarantees: where every fragment access of a nest over ``(v0, v1, ...)`` (extents ``E``) is
``F[v0 + c0, v1 + c1, ...]`` with the same shifts ``c`` (expressions of names outside the nest,
one of them not 0), all those fragments have one shape ``S``, and every iteration that does
anything reads inside it (the nest's body is one ``if`` whose condition keeps ``v + c`` within
``S``, by the ranges of the loops around: DeepSeek's sparse MLA backward stores half of its
``acc_dkv`` at a time, ``if bi_i < BS // 2: staged[bi_i, d_i] = acc_dkv[bi_i + s * (BS // 2),
d_i]``; or no iteration can leave it), the nest runs over ``(u0, u1, ...)`` in ``S`` instead:
the fragments are indexed ``F[u0, u1, ...]``, every other use of ``v`` is ``u - c``, and the
body runs where ``0 <= u - c < E``. The same iterations run (those that would read outside the
fragment did nothing), so the program means the same; the passes after place the nest on the
threads by the fragment's layout, as they place any nest that indexes a fragment by its
variables in order (before, such a read was refused: no thread holds ``F[v + c]`` for the
iterations it runs).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.simplify import interval, narrowed_ranges, simplify
from ..ir.visitor import IRMutator, collect, substitute, uses_var
from .manager import register
from .rules.fragments import parallel_nest


class _Rebase(IRMutator):
    def __init__(self):
        self.ranges: dict = {}  # the loops around: variable -> (lowest, highest)

    def visit_For(self, node: ir.For):
        if node.kind == "parallel":
            rebased = self._rebased(*parallel_nest(node))
            return rebased if rebased is not None else node
        lo, n = ir.const_int(node.start), ir.const_int(node.extent)
        if lo is None:
            return self.generic_visit(node)
        self.ranges[node.var] = (lo, None if n is None else lo + n - 1)
        try:
            return self.generic_visit(node)
        finally:
            del self.ranges[node.var]

    def _rebased(self, nest: list, body: ir.Stmt) -> ir.For | None:
        loop_vars = [loop.var for loop in nest]
        extents = [ir.const_int(loop.extent) for loop in nest]
        if None in extents or any(ir.const_int(loop.start) != 0 for loop in nest):
            return None
        accesses = [x for x in collect(body, (ir.BufferLoad, ir.BufferStore)) if x.buffer.scope == "fragment"]
        if not accesses:
            return None
        shape = accesses[0].buffer.static_shape()
        shifts = None
        for access in accesses:
            if access.buffer.static_shape() != shape or len(access.indices) != len(loop_vars):
                return None
            these = [simplify(index - v) for index, v in zip(access.indices, loop_vars)]
            if any(uses_var(c, v) for c in these for v in loop_vars):
                return None
            if shifts is None:
                shifts = these
            elif [expr_text(c) for c in shifts] != [expr_text(c) for c in these]:
                return None
        if all(ir.const_int(c) == 0 for c in shifts) or len(shape) != len(loop_vars):
            return None
        ranges = {**self.ranges, **{v: (0, n - 1) for v, n in zip(loop_vars, extents)}}
        if isinstance(body, ir.IfThenElse) and body.else_body is None:
            ranges = narrowed_ranges(ranges, body.cond)
        for v, c, n in zip(loop_vars, shifts, shape):
            lo, hi = interval(simplify(v + c), ranges)
            if lo is None or hi is None or lo < 0 or hi >= n:
                return None
        return self._rebuilt(nest, loop_vars, extents, shifts, shape, body)

    @staticmethod
    def _rebuilt(nest, loop_vars, extents, shifts, shape, body) -> ir.For:
        new_vars = [ir.Var(v.name, v.dtype) for v in loop_vars]
        body = _FragmentIndices(new_vars).visit(body)
        body = substitute(body, {v: simplify(u - c) for v, u, c in zip(loop_vars, new_vars, shifts)})
        inside = []  # the nest's own iterations: 0 <= u - c < E (where the fragment's extent is not E)
        for u, c, n, size in zip(new_vars, shifts, extents, shape):
            if ir.const_int(c) != 0:
                inside += [simplify(u - c) >= 0, simplify(u - c) < n]
            elif size != n:
                inside.append(u < n)
        guard = inside[0]
        for cond in inside[1:]:
            guard = ir.logical_and(guard, cond)
        out = ir.IfThenElse(guard, body, None, loc=body.loc)
        for loop, u, n in reversed(list(zip(nest, new_vars, shape))):
            out = dataclasses.replace(loop, var=u, extent=ir.const(n), body=out)
        return out


class _FragmentIndices(IRMutator):
    """Every fragment access indexed by the new variables in order."""

    def __init__(self, new_vars: list):
        self.new_vars = tuple(new_vars)

    def visit_BufferLoad(self, node: ir.BufferLoad):
        if node.buffer.scope == "fragment":
            return dataclasses.replace(node, indices=self.new_vars)
        return self.generic_visit(node)

    def visit_BufferStore(self, node: ir.BufferStore):
        node = self.generic_visit(node)
        if node.buffer.scope == "fragment":
            return dataclasses.replace(node, indices=self.new_vars)
        return node


@register("rebase_shifted_nests", "tile")
def rebase_shifted_nests(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    body = _Rebase().visit(func.body)
    return func if body is func.body else func.with_body(body)
