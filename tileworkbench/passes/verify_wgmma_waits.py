"""verify_wgmma_waits: reject a program that touches what a running ``T.wgmma_gemm`` reads or
writes before ``T.wait_wgmma`` lets it finish, with the kernel line.

Expects: the IR straight from the front end.
Guarantees: the same IR (this pass never changes it). A ``T.wgmma_gemm`` (``ir.Gemm`` with
``in_flight`` None) is a wgmma group still running until a ``T.wait_wgmma(n)`` leaves at most
``n`` groups running (the oldest finish first). While it runs, the threads that issued it read
and write nothing of its accumulator (its registers are still being written: a read sees a
partial sum, a write is lost or lands in the sum; a fill of them, ``clear_accum``, is one too) and
write nothing of its A or B; another ``T.wgmma_gemm`` into the same accumulator may follow (wgmma
groups on one accumulator run in order). Checked in program order per thread: a loop of a few
constant iterations an iteration at a time (so ``clear_accum=(j == 0)`` is known in each), any
other loop's body twice (what an iteration leaves running meets the next one's statements), both
sides of a branch,
each thread scope on its own (other threads' groups are theirs). What the other threads do to the
tiles while a group runs (a ``T.barrier_arrive`` that hands a tile to a producer before the wait)
is the program's mbarriers' to order and is not checked here.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.simplify import simplify
from ..ir.visitor import collect, substitute
from .manager import register

_NESTED = (ir.SeqStmt, ir.For, ir.While, ir.IfThenElse, ir.ThreadScope)


def _written(stmt) -> set:
    """The buffers a statement (not one holding others) writes."""
    if isinstance(stmt, ir.BufferStore):
        return {stmt.buffer}
    if isinstance(stmt, (ir.Copy, ir.TmaCopy, ir.ThreadCopy, ir.Im2Col)):
        return {stmt.dst.buffer}
    if isinstance(stmt, ir.Fill):
        return {stmt.dst.buffer}
    if isinstance(stmt, ir.Gemm):
        return {stmt.c.buffer}
    if isinstance(stmt, (ir.Reduce, ir.Scan)):
        dst = stmt.dst
        return {dst.buffer if isinstance(dst, ir.Region) else dst}
    return set()


def _line(node) -> str:
    return f"line {node.loc.line}" if node.loc is not None and node.loc.line else "an earlier line"


class _Groups:
    """Walks statements with the wgmma groups each point leaves running (oldest first); ``env``
    holds the values of the short loops' variables around (walked an iteration at a time)."""

    def __init__(self):
        self.env: dict = {}

    def clears(self, gemm: ir.Gemm) -> bool | None:
        """Whether the gemm clears its accumulator here (None: not known)."""
        if isinstance(gemm.clear_accum, bool):
            return gemm.clear_accum
        value = ir.const_int(simplify(substitute(gemm.clear_accum, self.env)))
        return None if value is None else bool(value)

    def run(self, stmt, running: list) -> list:
        if stmt is None:
            return running
        if isinstance(stmt, ir.SeqStmt):
            for s in stmt.stmts:
                running = self.run(s, running)
            return running
        if isinstance(stmt, ir.For) and _short(stmt):  # each iteration with its value (T.unroll's)
            start, extent = ir.const_int(stmt.start), ir.const_int(stmt.extent)
            for value in range(start, start + extent):
                self.env[stmt.var] = ir.const(value)
                running = self.run(stmt.body, running)
            self.env.pop(stmt.var, None)
            return running
        if isinstance(stmt, (ir.For, ir.While)):
            once = self.run(stmt.body, running)
            twice = self.run(stmt.body, once)
            return _merged(running, _merged(once, twice))
        if isinstance(stmt, ir.IfThenElse):
            return _merged(self.run(stmt.then_body, running), self.run(stmt.else_body, running))
        if isinstance(stmt, ir.ThreadScope):
            self.run(stmt.body, [])
            return running
        return self.leaf(stmt, running)

    def leaf(self, stmt, running: list) -> list:
        if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call):
            n = ir.wgmma_waited(stmt.call.name)
            if n is not None:
                return running[len(running) - n:] if n else []
        if isinstance(stmt, ir.Gemm) and stmt.in_flight is None:
            for g in running:
                if g.c.buffer is stmt.c.buffer and self.clears(stmt) is False:
                    continue  # accumulating in turn: wgmma groups on one accumulator run in order
                self.check(stmt, g, {stmt.a.buffer, stmt.b.buffer, stmt.c.buffer}, {stmt.c.buffer})
            return running + [stmt]
        touched = set(collect(stmt, ir.Buffer))
        written = _written(stmt)
        for g in running:
            self.check(stmt, g, touched, written)
        return running

    def check(self, stmt, g: ir.Gemm, touched: set, written: set):
        acc = g.c.buffer
        if acc in touched:
            raise CompileError(
                f"{acc.name} is the accumulator of the T.wgmma_gemm at {_line(g)}, which may still be running here: "
                f"wait for it first (T.wait_wgmma(0), or T.wait_wgmma(n) leaving only later groups running)",
                stmt.loc)
        hit = next((r.buffer for r in (g.a, g.b) if r.buffer in written), None)
        if hit is not None:
            raise CompileError(
                f"this writes {hit.name}, which the T.wgmma_gemm at {_line(g)} reads and may still be reading "
                f"here: wait for it first (T.wait_wgmma)", stmt.loc)


SHORT_LOOP = 16  # loops of at most this many iterations are walked an iteration at a time


def _short(loop: ir.For) -> bool:
    start, extent = ir.const_int(loop.start), ir.const_int(loop.extent)
    return start is not None and extent is not None and extent <= SHORT_LOOP


def _merged(a: list, b: list) -> list:
    """The groups either path may leave running, in an order no ``T.wait_wgmma`` can retire one
    too early by: the longer path's (one gemm issued in two iterations is two groups), then the
    other path's groups it lacks, counted as the latest."""
    longer, other = (a, b) if len(a) >= len(b) else (b, a)
    return longer + [g for g in other if all(g is not x for x in longer)]


@register("verify_wgmma_waits", "tile")
def verify_wgmma_waits(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if any(g.in_flight is None for g in collect(func.body, ir.Gemm)):
        _Groups().run(func.body, [])
    return func
