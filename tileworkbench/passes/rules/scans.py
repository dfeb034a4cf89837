"""How ``lower_tile_ops`` lowers ``T.cumsum`` / ``T.cummax`` (``ir.Scan``).

A scan runs along ``dim`` of a tile; every other index names one *line*. Each line is cut into
``chunks`` runs of ``run`` elements, and one thread takes each (line, chunk) pair, so a block of
``threads`` scans ``lines * chunks`` runs at once (a line per thread when there are more lines than
threads):
  1. each thread combines its run into a total, written to a shared ``(lines..., chunks)`` tile;
  2. after a block barrier, each thread combines the totals of the chunks before its own (after
     it, for ``reverse``) and then walks its run again, writing the running value at each element.
With one chunk per line the first step is left out. ``chunks`` is chosen to make ``2 * run +
chunks`` (the elements one thread walks) small, among the divisors of the line's length so no
run needs a guard (a line of prime length gets the guard instead).

Values are combined in the accumulator type (``rules.reductions.accumulator``: float32 for 16- and
8-bit floats, int32 for narrow integers) and rounded to the destination's type once per element. A fragment
operand goes through a shared tile of the accumulator type (as TileLang's own scan of a fragment
does), and so does a source that is another region of the destination's buffer, which the threads'
writes could otherwise overwrite before they read it. The scan opens and closes with a block
barrier (after the copy back into a shared destination too), so it needs no ordering from
``insert_thread_syncs``, as reductions through shared memory.
"""

from __future__ import annotations

import math

from ... import dtypes
from ...ir import nodes as ir
from .reductions import REDUCERS, accumulator, loop_nest


def identity(kind: str, acc: dtypes.DType) -> ir.Expr:
    return REDUCERS[kind][0](acc)


def join(kind: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return REDUCERS[kind][2](a, b)


def chunking(length: int, lines: int, threads: int) -> tuple[int, int]:
    """(chunks per line, elements per chunk) for ``lines`` lines of ``length`` on ``threads``."""
    most = max(1, min(length, threads // lines))

    def cost(chunks: int) -> int:
        return 2 * -(-length // chunks) + chunks

    divisors = [c for c in range(1, most + 1) if length % c == 0]
    best = min(divisors, key=cost)
    guarded = min(range(1, most + 1), key=cost)
    if 2 * cost(guarded) < cost(best):  # a prime length: no divisor cuts it usefully
        best = guarded
    return best, -(-length // best)


class _Lines:
    """The element of a region at (line index, position along the scan)."""

    def __init__(self, region: ir.Region, dim: int):
        self.region, self.dim = region, dim
        self.buffer = region.buffer

    def at(self, line: tuple, pos: ir.Expr) -> tuple:
        local = list(line)
        local.insert(self.dim, pos)
        return tuple(s + i for s, i in zip(self.region.starts, local))

    def load(self, line, pos):
        return ir.BufferLoad(self.buffer, self.at(line, pos), self.buffer.dtype)

    def store(self, line, pos, value):
        return ir.BufferStore(self.buffer, self.at(line, pos), ir.cast(value, self.buffer.dtype))


class _PaddedLines(_Lines):
    """A shared scratch of the lines, one per row, each one word longer every 32 elements: the
    threads of a warp walk runs side by side (thread c at element c * run + j), which for a run of
    32 k elements would all fall in one bank; one word more per 32 puts them in 32 banks."""

    def __init__(self, name: str, line_shape: list, length: int, dtype, loc):
        self.buffer = ir.Buffer(name, tuple(ir.const(e) for e in line_shape + [length + (length - 1) // 32]),
                                dtype, "shared", attrs={"swizzle": 0}, loc=loc)

    def at(self, line: tuple, pos: ir.Expr) -> tuple:
        return (*line, pos + pos // ir.const(32))


def _conflicted(region: ir.Region, dim: int, run: int, chunks: int) -> bool:
    """Walking runs of ``run`` elements along the innermost dimension of a shared tile, a thread a
    run, would put a warp's threads in the same banks (4 or more to a bank): a padded scratch is cheaper."""
    return (region.buffer.scope == "shared" and chunks > 1 and dim == len(region.extents) - 1
            and region.buffer.ndim == len(region.extents) and math.gcd(run, 32) >= 4)


def lower_scan(node: ir.Scan, threads: int) -> ir.Stmt:
    extents = list(node.src.static_extents())
    acc = accumulator(node.src.buffer.dtype)
    length = extents[node.dim]
    line_shape = [e for d, e in enumerate(extents) if d != node.dim]
    lines = math.prod(line_shape)
    chunks, run = chunking(length, lines, threads)
    loc = node.loc

    src, dst = node.src, node.dst
    through_shared = (src.buffer.scope == "fragment" or dst.buffer.scope == "fragment"
                      or (src.buffer is dst.buffer and not _same_region(src, dst))
                      or _conflicted(src, node.dim, run, chunks) or _conflicted(dst, node.dim, run, chunks))
    before, after = [ir.SyncThreads()], []
    reading, writing = _Lines(src, node.dim), _Lines(dst, node.dim)
    if through_shared:
        work = _PaddedLines(f"{src.buffer.name}_scan", line_shape, length, acc, loc)
        before = [ir.Allocate(work.buffer), ir.SyncThreads(), _copy(reading, work, extents, node.dim, loc),
                  ir.SyncThreads()]
        # the steps end with a barrier; the copy back into a shared destination by this mapping of
        # threads gets one after it too, before any other thread's access of the destination
        after = [_copy(work, writing, extents, node.dim, loc)]
        if dst.buffer.scope == "shared":
            after.append(ir.SyncThreads())
        reading = writing = work

    def position(chunk, j):
        i = chunk * ir.const(run) + j
        return (ir.const(length - 1) - i if node.reverse else i), i

    def walk(line, chunk, total: ir.Var, write: bool) -> ir.Stmt:
        j = ir.Var("j")
        pos, i = position(chunk, j)
        step = [ir.Assign(total, join(node.kind, total, ir.cast(reading.load(line, pos), acc)))]
        if write:
            step.append(writing.store(line, pos, total))
        body = ir.seq(step)
        if chunks * run != length:
            body = ir.IfThenElse(ir.cmp("<", i, ir.const(length)), body, None)
        return ir.For(j, ir.const(run), body, "serial")

    if chunks == 1:
        def scan_line(idx):
            total = ir.Var(f"cum{node.kind}", acc)
            return ir.seq([ir.LetStmt(total, identity(node.kind, acc)), walk(idx, ir.const(0), total, True)])

        steps = [loop_nest(line_shape or [1], lambda idx: scan_line(idx if line_shape else ()), loc=loc)]
        return ir.seq(before + steps + [ir.SyncThreads()] + after)

    totals = ir.Buffer(f"{node.src.buffer.name}_scan_totals", tuple(ir.const(e) for e in line_shape + [chunks]),
                       acc, "shared", attrs={"swizzle": 0}, loc=loc)

    def chunk_total(idx):
        line, chunk = idx[:-1], idx[-1]
        total = ir.Var(f"cum{node.kind}", acc)
        return ir.seq([ir.LetStmt(total, identity(node.kind, acc)), walk(line, chunk, total, False),
                       ir.BufferStore(totals, idx, total)])

    def scan_chunk(idx):
        line, chunk = idx[:-1], idx[-1]
        total, other = ir.Var(f"cum{node.kind}", acc), ir.Var("c")
        earlier = ir.IfThenElse(ir.cmp("<", other, chunk), ir.Assign(
            total, join(node.kind, total, ir.BufferLoad(totals, (*line, other), acc))), None)
        return ir.seq([ir.LetStmt(total, identity(node.kind, acc)),
                       ir.For(other, ir.const(chunks), earlier, "serial"),
                       walk(line, chunk, total, True)])

    shape = line_shape + [chunks]
    steps = [ir.Allocate(totals), loop_nest(shape, chunk_total, loc=loc), ir.SyncThreads(),
             loop_nest(shape, scan_chunk, loc=loc), ir.SyncThreads()]
    return ir.seq(before + steps + after)


def _same_region(a: ir.Region, b: ir.Region) -> bool:
    from ...ir.simplify import simplify

    return all(ir.const_int(simplify(x - y)) == 0 for x, y in zip(a.starts, b.starts))


def _copy(src: _Lines, dst: _Lines, extents, dim: int, loc) -> ir.Stmt:
    """Every element of the scanned extents from ``src`` to ``dst`` (one of them the scratch)."""
    def move(idx):
        line, pos = tuple(i for d, i in enumerate(idx) if d != dim), idx[dim]
        return dst.store(line, pos, src.load(line, pos))

    return loop_nest(extents, move, loc=loc)
