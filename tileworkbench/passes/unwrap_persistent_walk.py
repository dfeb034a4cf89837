"""unwrap_persistent_walk: a user's ``T.Persistent`` GEMM walk becomes a grid of one block per tile.

Expects: tile-level IR from the front end, where a ``T.Persistent`` loop is a serial loop over
waves annotated ``ir.PERSISTENT_WALK`` (an ``ir.records.PersistentWalk``) whose body binds the
tile's coordinates and runs the user's body under two guards (the tile is one of the walk's places,
its last coordinate inside the domain).
Applies when every condition below holds (otherwise the IR is unchanged and
``func.attrs["persistent_walk"]`` says why):
  * the kernel's top level is allocations, scalar names and comments, then the walk, and nothing after it;
  * the grid is one-dimensional, as many blocks as a wave (``wave_size``), and the walk's index is
    the block index: every tile of the domain is visited exactly once;
  * the domain has one or two dimensions and the body has a ``T.Pipelined`` loop at its top level
    (a GEMM-shaped walk, which ``warp_specialize`` can make persistent again in its own way);
  * the body reads neither the wave nor the block index other than through the tile's coordinates,
    and no tile can see another tile's data: every shared, fragment or local buffer allocated before the
    walk is written whole by the body before the body reads it (``stale_read``).
Guarantees, when it applies: the grid is the domain (its last dimension along x, as TileLang's
GEMMs launch theirs: for ``T.Persistent([m, n], ...)`` as ``bx, by`` the grid is ``(n, m)``, ``by``
on x), the coordinates are the block indices, and the body runs once per block without the
guards. Each tile runs the same statements on the same data as in the walk, so the results are the
same; only which block runs which tile, and when, changes, which is what a grid leaves to the
hardware and what ``warp_specialize``'s persistence decides again (``Runtime.persistent_blocks``
launches as many blocks as run at once, each walking its tiles with the producer loading ahead
across them). ``func.attrs["persistent_walk"]``: ``{"applied": True, "grid": ...}``.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.visitor import collect, uses_var
from .manager import register


def _loads(node) -> list:
    return [load.buffer for load in collect(node, ir.BufferLoad)]


def _reads(stmt) -> list:
    """The buffers a leaf tile-level statement reads (a kind not named here: every buffer it names)."""
    if isinstance(stmt, (ir.Copy, ir.Im2Col)):
        return [stmt.src.buffer] + _loads(stmt)
    if isinstance(stmt, ir.Fill):
        return _loads(stmt)
    if isinstance(stmt, ir.Gemm):
        return [stmt.a.buffer, stmt.b.buffer] + ([] if stmt.always_clears else [stmt.c.buffer]) + _loads(stmt)
    if isinstance(stmt, ir.Reduce):
        return [stmt.src] + ([] if stmt.clear else [stmt.dst]) + _loads(stmt)
    if isinstance(stmt, (ir.BufferStore, ir.Assign, ir.LetStmt)):
        return _loads(stmt)
    return collect(stmt, ir.Buffer)


def _written_whole(stmt) -> list:
    """The buffers a leaf statement writes in full (so nothing of their earlier value survives it)."""
    if isinstance(stmt, (ir.Copy, ir.Fill, ir.Im2Col)) and stmt.dst.is_full:
        return [stmt.dst.buffer]
    if isinstance(stmt, ir.Gemm) and stmt.always_clears and stmt.c.is_full:
        return [stmt.c.buffer]
    if isinstance(stmt, ir.Reduce) and stmt.clear:
        return [stmt.dst]
    if isinstance(stmt, ir.BufferStore) and stmt.buffer.numel == 1:
        return [stmt.buffer]
    return []


def stale_read(stmts: list, carried: set) -> ir.Buffer | None:
    """The first buffer of ``carried`` (ids) that ``stmts``, run in order, read before writing it
    whole, else None. Conservative: a write counts only where it runs unconditionally at this
    level (not inside a loop or a branch), and a loop's body is read as its first iteration."""

    def walk(stmts: list, written: set) -> ir.Buffer | None:
        for stmt in stmts:
            if isinstance(stmt, ir.SeqStmt):
                found = walk(stmt.stmts, written)
            elif isinstance(stmt, (ir.Comment, ir.Allocate)):
                continue
            elif isinstance(stmt, (ir.For, ir.While, ir.IfThenElse, ir.ThreadScope)):
                heads, bodies = ir.heads_and_bodies(stmt)
                found = next((b for h in heads for b in _loads(h) if id(b) in carried and id(b) not in written), None)
                for body in bodies:  # what a loop or a branch writes does not count after it
                    found = found or walk(ir.statements(body), set(written))
            else:
                found = next((b for b in _reads(stmt) if id(b) in carried and id(b) not in written), None)
                written |= {id(b) for b in _written_whole(stmt)}
            if found is not None:
                return found
        return None

    return walk(stmts, set())


def _user_body(loop: ir.For) -> list | None:
    """The user's body of a walk as the front end builds it (inside the coordinates' lets and the
    two guards), else None."""
    walk = loop.annotations[ir.PERSISTENT_WALK]
    outer = loop.body
    if not isinstance(outer, ir.IfThenElse) or outer.else_body is not None:
        return None
    inner = ir.statements(outer.then_body)
    lets, guard = inner[:-1], inner[-1]
    if [x.var for x in lets if isinstance(x, ir.LetStmt)] != list(walk.coords) or len(lets) != len(walk.coords):
        return None
    if not isinstance(guard, ir.IfThenElse) or guard.else_body is not None:
        return None
    return ir.statements(guard.then_body)


def why_not(func: ir.PrimFunc) -> tuple[str | None, ir.For | None, list]:
    """(None, the walk, the user's body) when the walk can become a grid, else (why not, ...)."""
    top = [x for x in ir.statements(func.body) if not isinstance(x, ir.Comment)]
    walks = [x for x in top if isinstance(x, ir.For) and x.annotations.get(ir.PERSISTENT_WALK)]
    if not walks:
        return "no T.Persistent loop", None, []
    loop = walks[0]
    walk = loop.annotations[ir.PERSISTENT_WALK]
    if top[-1] is not loop or any(not isinstance(x, (ir.Allocate, ir.LetStmt)) for x in top[:-1]):
        return "the T.Persistent loop is not the kernel's only statement besides allocations", loop, []
    launch = func.launch
    if len(launch.grid) != 1 or ir.const_int(launch.grid[0]) != walk.wave_size:
        return "the grid is not one-dimensional with as many blocks as a wave", loop, []
    if walk.index is not launch.block_vars[0]:
        return "the walk's index is not the block index", loop, []
    if len(walk.domain) > 2:
        return "the domain has more than two dimensions", loop, []
    body = _user_body(loop)
    if body is None:
        return "the walk's loop is not in the front end's form", loop, []
    if not any(isinstance(x, ir.For) and x.kind == "pipelined" for x in body):
        return "the body has no T.Pipelined loop at its top level", loop, []
    if any(uses_var(x, v) for x in body + top[:-1] for v in (loop.var, launch.block_vars[0])):
        return "the kernel reads the wave or block index other than through the tile's coordinates", loop, []
    carried = {id(x.buffer) for x in top[:-1] if isinstance(x, ir.Allocate) and x.buffer.scope != "global"}
    stale = stale_read(body, carried)
    if stale is not None:
        return (f"{stale.name} may be read before the tile writes it, so a tile could see the previous tile's "
                "values"), loop, []
    return None, loop, body


@register("unwrap_persistent_walk", "tile")
def unwrap_persistent_walk(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    reason, loop, body = why_not(func)
    out = func.with_body(func.body)
    if loop is None:
        return out
    if reason is not None:
        out.attrs["persistent_walk"] = {"applied": False, "reason": reason}
        return out
    walk = loop.annotations[ir.PERSISTENT_WALK]
    top = [x for x in ir.statements(func.body) if x is not loop]
    out = func.with_body(ir.seq(top + body))
    # the last coordinate along x (TileLang's GEMMs put N's blocks there), the first along y
    out.launch = dataclasses.replace(func.launch, grid=tuple(ir.const(d) for d in reversed(walk.domain)),
                                     block_vars=tuple(reversed(walk.coords)))
    out.attrs["persistent_walk"] = {"applied": True, "grid": list(reversed(walk.domain))}
    return out
