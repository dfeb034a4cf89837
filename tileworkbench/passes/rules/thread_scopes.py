"""The threads a statement runs on: the block's, or a ``T.ws`` scope's (``ir.ThreadScope``).

Tile operations inside ``with T.ws(1):`` are spread over that warpgroup's 128 threads, indexed
from 0 by the scope's own variable, not over the block. The passes that spread work over threads
(``lower_tma``'s election, ``lower_tile_ops``, ``partition_parallel_loops``) hold the current
count and index in ``threads`` and ``tid``; :class:`ScopedThreads` swaps them inside a scope.
The analyses that plan per operation (a gemm's warpgroups, a fragment's layout) ask
:func:`threads_of` for the count where each operation stands.
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.simplify import enter_thread_scope, leave_thread_scope
from ...ir.visitor import IRVisitor, collect


class ScopedThreads:
    """Mixin for a pass visitor with ``threads`` and ``tid``: inside a ``ThreadScope`` they are
    the scope's thread count and index."""

    def visit_ThreadScope(self, node: ir.ThreadScope):
        saved = self.threads, self.tid
        ranges = getattr(self, "ranges", None)
        saved_ranges = enter_thread_scope(ranges, node, self.tid) if ranges is not None else None
        self.threads, self.tid = node.count, node.var
        try:
            return self.generic_visit(node)
        finally:
            self.threads, self.tid = saved
            if ranges is not None:
                leave_thread_scope(ranges, saved_ranges)


def has_thread_scopes(func: ir.PrimFunc) -> bool:
    return bool(collect(func.body, ir.ThreadScope))


class _Where(IRVisitor):
    def __init__(self, threads: int):
        self.threads = threads
        self.count: dict = {}  # id(stmt) -> threads running it (tile ops and parallel loops)
        self.fragments: dict = {}  # id(buffer) -> (threads, the first statement using it)

    def visit_ThreadScope(self, node: ir.ThreadScope):
        saved, self.threads = self.threads, node.count
        self.generic_visit(node)
        self.threads = saved

    def note(self, stmt, buffers):
        self.count[id(stmt)] = self.threads
        for buf in buffers:
            if buf.scope != "fragment":
                continue
            seen = self.fragments.setdefault(id(buf), (self.threads, stmt))
            if seen[0] != self.threads:
                raise CompileError(
                    f"fragment {buf.name} is used by {seen[0]} threads at line {_line(seen[1])} and by "
                    f"{self.threads} here: a fragment lives in the registers of the threads of one "
                    f"`T.ws` or `if tx < C:` scope (or of the whole block); copy it through shared memory",
                    stmt.loc)

    def visit_For(self, node: ir.For):
        if node.kind == "parallel":
            self.note(node, [a.buffer for a in collect(node.body, (ir.BufferLoad, ir.BufferStore))])
        self.generic_visit(node)

    def visit_Copy(self, node):
        self.note(node, [node.src.buffer, node.dst.buffer])

    def visit_Fill(self, node):
        self.note(node, [node.dst.buffer])

    def visit_Gemm(self, node):
        self.note(node, [node.a.buffer, node.b.buffer, node.c.buffer])

    def visit_Reduce(self, node):
        self.note(node, [node.src, node.dst])

    def visit_Scan(self, node):
        self.note(node, [node.src.buffer, node.dst.buffer])


def _line(stmt) -> str:
    return str(stmt.loc.line) if stmt.loc is not None and stmt.loc.line else "?"


def threads_of(func: ir.PrimFunc) -> tuple[dict, dict]:
    """``(count, fragments)``: ``id(stmt) -> threads`` for every tile operation and parallel loop,
    and ``id(fragment) -> threads`` for every fragment used in one (a ``CompileError`` where one
    fragment is used by the threads of two different scopes)."""
    where = _Where(func.launch.threads)
    where.visit(func.body)
    return where.count, {k: v[0] for k, v in where.fragments.items()}
