"""Generic traversal of the IR.

``IRVisitor`` walks every node; ``IRMutator`` rebuilds only the nodes whose children changed.
Subclasses define ``visit_<ClassName>`` for the nodes they care about and call
``self.generic_visit(node)`` to recurse. ``Var`` and ``Buffer`` are leaves: a mutator may
return another Var/Buffer for them (substitution, renaming, versioning).
"""

from __future__ import annotations

import dataclasses

from . import nodes as ir

_LEAVES = (ir.Var, ir.Buffer, ir.Const, ir.Raw)
_NODE_TYPES = (ir.Expr, ir.Stmt, ir.Region, ir.BarrierRef)


def _child_fields(node):
    for f in dataclasses.fields(node):
        if f.name in ("loc", "attrs", "annotations", "dtype"):
            continue
        yield f.name, getattr(node, f.name)


class IRVisitor:
    def visit(self, node):
        if node is None:
            return
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        if isinstance(node, _LEAVES):
            return
        for _, value in _child_fields(node):
            self._visit_value(value)

    def _visit_value(self, value):
        if isinstance(value, (list, tuple)):
            for v in value:
                self._visit_value(v)
        elif isinstance(value, (*_NODE_TYPES, ir.Buffer)):
            self.visit(value)


class IRMutator:
    def visit(self, node):
        if node is None:
            return None
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        if isinstance(node, _LEAVES):
            return node
        changes = {}
        for name, value in _child_fields(node):
            new = self._mutate_value(value)
            if new is not value:
                changes[name] = new
        if not changes:
            return node
        if isinstance(node, ir.SeqStmt):
            return ir.seq(changes.get("stmts", node.stmts))
        return dataclasses.replace(node, **changes)

    def _mutate_value(self, value):
        if isinstance(value, (list, tuple)):
            new = [self._mutate_value(v) for v in value]
            if all(a is b for a, b in zip(new, value)):
                return value
            if isinstance(value, list):
                return [v for v in new if v is not None]
            return tuple(new)
        if isinstance(value, (*_NODE_TYPES, ir.Buffer)):
            return self.visit(value)
        return value


class Substitute(IRMutator):
    """Replace Vars (by identity) with expressions, and Buffers with Buffers."""

    def __init__(self, var_map=None, buffer_map=None):
        self.var_map = var_map or {}
        self.buffer_map = buffer_map or {}

    def visit_Var(self, node):
        return self.var_map.get(node, node)

    def visit_Buffer(self, node):
        return self.buffer_map.get(node, node)


def substitute(node, var_map=None, buffer_map=None):
    return Substitute(var_map, buffer_map).visit(node)


def collect(node, kind) -> list:
    """Every node of type ``kind`` under ``node``, in pre-order."""
    found = []

    class _Collect(IRVisitor):
        def visit(self, n):
            if isinstance(n, kind):
                found.append(n)
            return super().visit(n)

    _Collect().visit(node)
    return found


def uses_var(node, var) -> bool:
    return any(v is var for v in collect(node, ir.Var))


def buffers_written(node) -> list:
    """Buffers a statement writes (stores, copy/fill/gemm destinations), in order, unique."""
    out = []

    def add(b):
        if all(b is not x for x in out):
            out.append(b)

    class _W(IRVisitor):
        def visit_BufferStore(self, n):
            add(n.buffer)
            self.generic_visit(n)

        def visit_Copy(self, n):
            add(n.dst.buffer)

        def visit_TmaCopy(self, n):
            add(n.dst.buffer)

        def visit_Fill(self, n):
            add(n.dst.buffer)

        def visit_Gemm(self, n):
            add(n.c.buffer)

        def visit_Reduce(self, n):
            add(n.dst)

    _W().visit(node)
    return out
