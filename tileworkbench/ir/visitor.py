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
_VISITED = (*_NODE_TYPES, ir.Buffer)
_NOT_CHILDREN = ("loc", "attrs", "annotations", "dtype", "pipeline", "plan", "flat", "form")
_CHILD_NAMES: dict = {}  # node class -> names of the fields that may hold children


def _child_names(kind) -> tuple:
    """Names of the fields of node class ``kind`` that may hold children (computed once per class:
    the visitors ask for every node they pass, thousands of times per lowering)."""
    names = _CHILD_NAMES.get(kind)
    if names is None:
        names = _CHILD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(kind) if f.name not in _NOT_CHILDREN)
    return names


# What a field's value is, by its exact type (decided once per type: isinstance against a tuple of
# base classes, for every field of every node, was the walkers' largest cost).
_OTHER, _NODE, _SEQUENCE = 0, 1, 2
_KIND_OF: dict = {}


def _kind_of(kind) -> int:
    found = _KIND_OF.get(kind)
    if found is None:
        found = _KIND_OF[kind] = (_SEQUENCE if issubclass(kind, (list, tuple)) else
                                  _NODE if issubclass(kind, _VISITED) else _OTHER)
    return found


_IS_LEAF: dict = {}


def _is_leaf(kind) -> bool:
    found = _IS_LEAF.get(kind)
    if found is None:
        found = _IS_LEAF[kind] = issubclass(kind, _LEAVES)
    return found


def _method(visitor, node):
    """The visitor's ``visit_<NodeClass>``, or None (looked up once per visitor and node class)."""
    table = type(visitor).__dict__.get("_tw_methods")
    if table is None:
        table = {}
        setattr(type(visitor), "_tw_methods", table)
    kind = type(node)
    if kind not in table:
        table[kind] = getattr(type(visitor), "visit_" + kind.__name__, None)
    method = table[kind]
    return None if method is None else method.__get__(visitor)


class IRVisitor:
    def visit(self, node):
        if node is None:
            return
        method = _method(self, node)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        if _is_leaf(type(node)):
            return
        for name in _child_names(type(node)):
            self._visit_value(getattr(node, name))

    def _visit_value(self, value):
        kind = _kind_of(type(value))
        if kind == _SEQUENCE:
            for v in value:
                self._visit_value(v)
        elif kind == _NODE:
            self.visit(value)


class IRMutator:
    def visit(self, node):
        if node is None:
            return None
        method = _method(self, node)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def generic_visit(self, node):
        if _is_leaf(type(node)):
            return node
        changes = None
        for name in _child_names(type(node)):
            value = getattr(node, name)
            kind = _kind_of(type(value))
            if kind == _OTHER:
                continue
            new = self._mutate_value(value)
            if new is not value:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        if isinstance(node, ir.SeqStmt):
            return ir.seq(changes.get("stmts", node.stmts))
        return dataclasses.replace(node, **changes)

    def _mutate_value(self, value):
        kind = _kind_of(type(value))
        if kind == _SEQUENCE:
            new = [self._mutate_value(v) for v in value]
            if all(a is b for a, b in zip(new, value)):
                return value
            if isinstance(value, list):
                return [v for v in new if v is not None]
            return tuple(new)
        if kind == _NODE:
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


class _FreshBindings(IRMutator):
    """The statement with every loop and scalar variable it binds replaced by a new one."""

    def visit_For(self, node):
        var = ir.Var(node.var.name, node.var.dtype)
        return dataclasses.replace(node, var=var, body=self.visit(substitute(node.body, {node.var: var})))

    def visit_SeqStmt(self, node):
        # A LetStmt binds its variable for the statements after it in the sequence.
        stmts, out = list(node.stmts), []
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, ir.LetStmt):
                var = ir.Var(stmt.var.name, stmt.var.dtype)
                out.append(dataclasses.replace(stmt, var=var, value=self.visit(stmt.value)))
                stmts[i + 1:] = [substitute(x, {stmt.var: var}) for x in stmts[i + 1:]]
            else:
                out.append(self.visit(stmt))
        return ir.seq(out)


def with_fresh_bindings(stmt):
    """``stmt`` with every loop and scalar variable it binds replaced by a new one of the same
    name and type: a copy of a statement placed beside the original binds each variable once."""
    return _FreshBindings().visit(stmt)


def collect(node, kind) -> list:
    """Every node of type ``kind`` under ``node``, in pre-order (``IRVisitor``'s order). Walked
    without a visitor's method lookups: the passes and analyses call it over a thousand times a
    lowering, and through ``IRVisitor`` it was about 40% of FlashAttention's lowering."""
    found: list = []

    def walk(value):
        if isinstance(value, kind):
            found.append(value)
        t = type(value)
        if _is_leaf(t):
            return
        for name in _child_names(t):
            child = getattr(value, name)
            k = _kind_of(type(child))
            if k == _NODE:
                walk(child)
            elif k == _SEQUENCE:
                _walk_sequence(child)

    def _walk_sequence(values):
        for v in values:
            k = _kind_of(type(v))
            if k == _NODE:
                walk(v)
            elif k == _SEQUENCE:
                _walk_sequence(v)

    if node is not None:
        walk(node)
    return found


def reassigned_vars(node) -> set:
    """Scalars re-assigned (``Assign``) under ``node``: their ``LetStmt`` value is only the first."""
    return {a.var for a in collect(node, ir.Assign)}


def uses_var(node, var) -> bool:
    return any(v is var for v in collect(node, ir.Var))


def buffers_written(node) -> list:
    """Buffers a statement writes (stores; copy, TMA, a thread's cp.async, im2col, fill, gemm,
    reduction and scan destinations), in order, unique. Not atomic targets: see
    ``passes.rules.loop_lets.written_buffer_ids``."""
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

        def visit_ThreadCopy(self, n):
            add(n.dst.buffer)

        def visit_Im2Col(self, n):
            add(n.dst.buffer)

        def visit_Fill(self, n):
            add(n.dst.buffer)

        def visit_Gemm(self, n):
            add(n.c.buffer)

        def visit_Reduce(self, n):
            add(n.dst)

        def visit_Scan(self, n):
            add(n.dst.buffer)

    _W().visit(node)
    return out


def addressed_buffers(node) -> list:
    """Buffers whose element addresses calls under ``node`` take (``address_of(buf[i, j])``: an
    atomic's target, a copy's ends), in order, unique; not the buffers read inside those indices
    (``dKV[Indices[k], d]`` takes an address of ``dKV`` only)."""
    out = []
    for call in collect(node, ir.Call):
        if call.name == "address_of" and call.args and isinstance(call.args[0], ir.BufferLoad):
            buf = call.args[0].buffer
            if all(buf is not x for x in out):
                out.append(buf)
    return out


def always_evaluated(e: ir.Expr) -> list:
    """The subexpressions of ``e`` that C++ evaluates whenever it evaluates ``e``, children before
    their parents: not the right side of an and/or (read only where the left does not decide), not a
    select's or ``if_then_else``'s branches (read only where chosen), and of ``address_of(buf[i])``
    only the indices (the element is not read). Guards ask which loads a condition or an address
    reads for sure (``guard_global_accesses``, ``rules.vector_runs``)."""
    found: list = []

    def walk(x):
        if isinstance(x, ir.Select):
            walk(x.cond)
        elif isinstance(x, ir.Call) and x.name == "if_then_else":
            walk(x.args[0])
        elif isinstance(x, ir.Call) and x.name == "address_of":
            for i in x.args[0].indices if x.args and isinstance(x.args[0], ir.BufferLoad) else ():
                walk(i)
            return
        elif isinstance(x, ir.BinOp) and x.op in ir.LOGICAL:
            walk(x.a)
        elif not _is_leaf(type(x)):
            for name in _child_names(type(x)):
                value = getattr(x, name)
                for v in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(v, ir.Expr):
                        walk(v)
        found.append(x)

    walk(e)
    return found


def buffer_roles(node, buf) -> dict:
    """How ``node`` mentions ``buf``: the count of each role (``allocate``, ``copy_src``,
    ``copy_dst``, ``fill``, ``reduce_src``, ``reduce_dst``, ``load``, ``store``), and ``other`` for
    every mention none of them accounts for (a gemm's operand, a scan, an atomic's address ...).
    Passes that decide what may become of a buffer (``localize_read_fragments``,
    ``stage_fragment_operands``) ask which roles it has."""
    roles = {
        "allocate": sum(1 for a in collect(node, ir.Allocate) if a.buffer is buf),
        "copy_src": sum(1 for c in collect(node, ir.Copy) if c.src.buffer is buf),
        "copy_dst": sum(1 for c in collect(node, ir.Copy) if c.dst.buffer is buf),
        "fill": sum(1 for f in collect(node, ir.Fill) if f.dst.buffer is buf),
        "reduce_src": sum(1 for r in collect(node, ir.Reduce) if r.src is buf),
        "reduce_dst": sum(1 for r in collect(node, ir.Reduce) if r.dst is buf),
        "load": sum(1 for x in collect(node, ir.BufferLoad) if x.buffer is buf),
        "store": sum(1 for x in collect(node, ir.BufferStore) if x.buffer is buf),
    }
    roles["other"] = sum(1 for b in collect(node, ir.Buffer) if b is buf) - sum(roles.values())
    return {role: n for role, n in roles.items() if n}
