"""The lowered program as a numbered list of statements.

Both analyses speak about "statement *i*": the pre-order index of a statement in the lowered
function body, counting every statement except the ``SeqStmt`` containers (a ``For`` or an
``if`` counts once, before its body). This numbering follows the printed IR line by line, so
:func:`ir_lines` can map a statement to its line in ``print_ir(func)`` as well.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir

_SKIP_FIELDS = ("loc", "attrs", "annotations", "dtype")
# Lines ``print_ir`` writes before the body: decorator, def, ``with T.Kernel``, thread binding.
_HEADER_LINES = 4


def func_of(artifact) -> ir.PrimFunc:
    """The lowered function of an artifact of ``tileworkbench.lower`` (or the PrimFunc itself)."""
    func = getattr(artifact, "func", artifact)
    if not isinstance(func, ir.PrimFunc):
        raise TypeError(f"expected a lowering artifact or a PrimFunc, got {type(artifact).__name__}")
    return func


def children(stmt) -> list:
    """The statements nested directly in ``stmt`` (in execution order)."""
    if isinstance(stmt, ir.SeqStmt):
        return list(stmt.stmts)
    if isinstance(stmt, (ir.For, ir.While)):
        return [stmt.body]
    if isinstance(stmt, ir.IfThenElse):
        return [stmt.then_body] + ([stmt.else_body] if stmt.else_body is not None else [])
    if isinstance(stmt, ir.WarpSpecialize):
        return [stmt.producer, stmt.consumer]
    if isinstance(stmt, ir.ThreadScope):
        return [stmt.body]
    return []


def preorder(body) -> list:
    """Every statement of ``body`` except SeqStmt containers, in pre-order."""
    out: list = []

    def walk(s):
        if s is None:
            return
        if not isinstance(s, ir.SeqStmt):
            out.append(s)
        for c in children(s):
            walk(c)

    walk(body)
    return out


def numbering(body) -> dict:
    """``id(stmt) -> index`` for :func:`preorder`."""
    return {id(s): i for i, s in enumerate(preorder(body))}


def span(stmt, index: dict) -> tuple[int, int]:
    """First and last statement index covered by ``stmt`` (itself and everything nested)."""
    stmts = preorder(stmt)
    if not stmts:
        return (-1, -1)
    return index[id(stmts[0])], index[id(stmts[-1])]


def ir_lines(func: ir.PrimFunc) -> dict:
    """``id(stmt) -> 1-based line`` of the statement in ``print_ir(func)``."""
    lines: dict = {}
    line = _HEADER_LINES

    def walk(s):
        nonlocal line
        if s is None:
            return
        if isinstance(s, ir.SeqStmt):
            for c in s.stmts:
                walk(c)
            return
        line += 1
        lines[id(s)] = line
        if isinstance(s, (ir.For, ir.While, ir.ThreadScope)):
            walk(s.body)
        elif isinstance(s, ir.IfThenElse):
            walk(s.then_body)
            if s.else_body is not None:
                line += 1  # the "else:" line
                walk(s.else_body)
        elif isinstance(s, ir.WarpSpecialize):
            walk(s.producer)
            line += 1  # the "with T.ws_consumer" line
            walk(s.consumer)

    walk(func.body)
    return lines


def buffer_refs(stmt) -> set[str]:
    """Names of the buffers a statement itself mentions (not those of nested statements)."""
    found: set[str] = set()

    def visit(value):
        if isinstance(value, ir.Buffer):
            found.add(value.name)
        elif isinstance(value, ir.Stmt):
            return
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                if f.name not in _SKIP_FIELDS:
                    visit(getattr(value, f.name))

    for f in dataclasses.fields(stmt):
        if f.name in _SKIP_FIELDS:
            continue
        value = getattr(stmt, f.name)
        if isinstance(value, ir.Stmt):
            continue
        visit(value)
    return found
