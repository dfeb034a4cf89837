"""The front end's ``break``: leaving a ``T.serial`` loop early (TileLang's top-k selector stops its
rounds once it has found all it needs: ``if l_new_topk <= 0: break``).

A kernel loop runs all its iterations; a ``break`` sets a flag declared before the loop
(``broke = 0``), and what could run after it is guarded by ``if broke == 0``: the rest of the
statements after the one holding the ``break`` (in every block it stands in) and the whole body of
each later iteration. Nothing else changes: the compiler's barrier placement sees ordinary
assignments and ``if``s, so a ``break`` under a condition every thread shares keeps its barriers
inside the guards, and one under a condition that differs between threads is refused where it
would need one (``insert_thread_syncs``), as any such ``if`` is. Only ``T.serial`` (and ``range``)
loops take it: ``T.Parallel``'s iterations are the threads', a pipeline's stages run ahead,
``T.unroll`` has no loop left to leave. ``continue`` is not supported.

:class:`Breaks` is the part of the parser (``parser.Parser``) that visits ``break``;
``statements.Statements.visit_For`` opens a :class:`LoopFrame` for each loop it builds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import dtypes as _dt
from ..ir import nodes as ir
from ..ir.visitor import collect


@dataclass
class LoopFrame:
    """A kernel loop being built: its kind, and the flag its ``break``s set (None: no ``break``)."""

    kind: str
    flag: ir.Var | None = None


class Breaks:
    """Needs the parser's ``builder`` and ``error``."""

    def visit_Break(self, node):
        frames = self.builder.loop_frames
        if not frames:
            raise self.error(node, "`break` outside a kernel loop")
        frame = frames[-1]
        if frame.kind != "serial":
            what = {"parallel": "a T.Parallel loop (its iterations are the threads')",
                    "pipelined": "a T.Pipelined loop (its stages run ahead of the iteration)",
                    "unrolled": "an unrolled loop", "while": "a `while` loop (put the condition in the loop's own)"}
            raise self.error(node, f"`break` in {what.get(frame.kind, 'this loop')} is not supported; "
                                   "it leaves T.serial loops only")
        if frame.flag is None:
            frame.flag = ir.Var(self.builder.fresh_name("broke"), _dt.int32)
        self.builder.emit(ir.Assign(frame.flag, ir.const(1)))


def with_breaks(frame: LoopFrame, body: ir.Stmt) -> tuple[list, ir.Stmt]:
    """(statements before the loop, the loop's body) for a loop whose body ``frame``'s breaks may
    leave: the flag's declaration, and the body guarded after each ``break`` and as a whole."""
    if frame.flag is None:
        return [], body
    running = ir.cmp("==", frame.flag, ir.const(0))
    return [ir.LetStmt(frame.flag, ir.const(0))], ir.IfThenElse(running, _guarded(body, frame.flag, running))


def _sets(stmt: ir.Stmt, flag: ir.Var) -> bool:
    return any(a.var is flag for a in collect(stmt, ir.Assign))


def _guarded(stmt: ir.Stmt, flag: ir.Var, running: ir.Expr) -> ir.Stmt:
    """``stmt`` with what follows a statement that may set ``flag`` run only while it is unset."""
    if isinstance(stmt, ir.IfThenElse) and _sets(stmt, flag):
        return dataclasses.replace(stmt, then_body=_guarded(stmt.then_body, flag, running),
                                   else_body=None if stmt.else_body is None else _guarded(stmt.else_body, flag, running))
    if isinstance(stmt, ir.ThreadScope) and _sets(stmt, flag):  # `if tx < C:` made a scope
        return dataclasses.replace(stmt, body=_guarded(stmt.body, flag, running))
    if not isinstance(stmt, ir.SeqStmt):
        return stmt
    out = []
    for i, s in enumerate(stmt.stmts):
        if _sets(s, flag):
            out.append(_guarded(s, flag, running))
            rest = stmt.stmts[i + 1:]
            if rest:
                out.append(ir.IfThenElse(running, _guarded(ir.seq(list(rest)), flag, running)))
            return ir.seq(out)
        out.append(s)
    return ir.seq(out)
