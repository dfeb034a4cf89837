"""stage_fragment_operands: a gemm's A in a fragment goes through shared memory where no register-A
path takes it.

Expects: tile-level IR from the front end (gemms with their operands as written).
Guarantees: every ``T.gemm`` whose A is a fragment either runs on register-A wgmma (``rules.gemm``
says so for this target and launch: sm_90a, 16-bit operands, A not transposed, whole 64-row blocks
of A per warpgroup) or reads A from shared memory:
  * from the shared tile A was copied from, where that copy is earlier in the same sequence of
    statements, whole, of A's shape and type, and neither was written since (``T.copy(S_shared,
    P); T.gemm(P, V, O)`` reads ``S_shared``); the copy into P and P itself go where nothing else
    reads P;
  * else from a new shared tile ``<A>_shared`` (numbered where that name is taken), allocated
    beside A: the gemm becomes ``T.copy(A, A_shared); T.gemm(A_shared, B, C)``, with a
    ``TileworkbenchWarning`` at the gemm (the copy costs a trip through shared memory, and room
    there, that register A would not).
That is what the refusal this replaces told the user to write (TileLang's MLA decode keeps P in a
fragment for a gemm whose 64 rows two warpgroups share side by side along N; register-A wgmma
would need each warpgroup to hold all of A); the later passes treat it as written so: the copy's
barrier, the async-proxy fence before wgmma reads the tile, the shared-memory plan.
"""

from __future__ import annotations

import dataclasses
import warnings

from ..errors import TileworkbenchWarning
from ..ir import nodes as ir
from ..ir.visitor import IRMutator, buffer_roles, buffers_written, collect
from .rules import gemm as gemm_rules
from .manager import register


class _Stage(IRMutator):
    def __init__(self, func: ir.PrimFunc, ctx):
        self.func, self.threads, self.ctx = func, func.launch.threads, ctx
        self.staged: dict = {}  # fragment -> its shared tile
        self.forwarded: set = set()  # fragments a gemm no longer reads (it reads their source tile)

    def visit_SeqStmt(self, node: ir.SeqStmt):
        # Within one sequence: the fragment each whole shared tile was last copied into unchanged
        # (``T.copy(S_shared, acc_s_cast)``, neither written since): a gemm reads that tile instead.
        copied_from: dict = {}
        out = []
        for stmt in node.stmts:
            if isinstance(stmt, ir.Gemm) and self._staged(stmt):
                source = copied_from.get(stmt.a.buffer)
                if source is not None:
                    self.forwarded.add(stmt.a.buffer)
                out.append(dataclasses.replace(stmt, a=source) if source is not None else self.visit(stmt))
            else:
                out.append(self.visit(stmt))
            written = _written(stmt)
            copied_from = {f: src for f, src in copied_from.items()
                           if f not in written and src.buffer not in written}
            if isinstance(stmt, ir.Copy) and _same_tile(stmt):
                copied_from[stmt.dst.buffer] = stmt.src
        if all(new is old for new, old in zip(out, node.stmts)):
            return node
        return ir.seq(out)

    def _fresh(self, name: str) -> str:
        """``name``, or ``name_1``, ``name_2`` ... where the kernel has a buffer of that name."""
        taken = {p.name for p in self.func.params if isinstance(p, ir.Buffer)}
        taken |= {x.buffer.name for x in collect(self.func.body, ir.Allocate)} | {b.name for b in self.staged.values()}
        n, fresh = 0, name
        while fresh in taken:
            n += 1
            fresh = f"{name}_{n}"
        return fresh

    def _staged(self, node: ir.Gemm) -> bool:
        return node.a.buffer.scope == "fragment" and not gemm_rules.register_a(node, self.threads, self.ctx)

    def visit_Gemm(self, node: ir.Gemm):
        if not self._staged(node):
            return node
        a = node.a.buffer
        tile = self.staged.get(a)
        if tile is None:
            tile = self.staged[a] = ir.Buffer(self._fresh(f"{a.name}_shared"), a.shape, a.dtype, "shared", loc=a.loc)
            line = node.loc.line if node.loc is not None else self.func.source_line
            warnings.warn_explicit(TileworkbenchWarning(
                f"T.gemm: A ({a.name}) is a fragment that register-A wgmma cannot read here "
                f"({gemm_rules.why_not_register_a(node, self.threads, self.ctx)}); it is copied into a shared "
                f"tile ({tile.name}) for the gemm"), TileworkbenchWarning, self.func.source_file, line or 0)
        region = ir.Region(tile, node.a.starts, node.a.extents)
        return ir.seq([ir.Copy(ir.Region.full(a), ir.Region.full(tile), None, loc=node.loc),
                       dataclasses.replace(node, a=region)])


def _same_tile(copy: ir.Copy) -> bool:
    """A whole shared tile copied into a whole fragment of its shape and type: the fragment holds
    exactly the tile."""
    src, dst = copy.src, copy.dst
    return (src.buffer.scope == "shared" and dst.buffer.scope == "fragment" and src.is_full and dst.is_full
            and src.buffer.dtype == dst.buffer.dtype and src.buffer.static_shape() == dst.buffer.static_shape()
            and src.buffer.attrs.get("versions", 1) == 1)


def _written(stmt) -> set:
    """Buffers a statement may write: its stores and tile-operation destinations, and any buffer
    whose element address a call takes (atomics, TMA)."""
    out = set(buffers_written(stmt))
    for call in collect(stmt, ir.Call):
        for load in collect(call, ir.BufferLoad):
            out.add(load.buffer)
    return out


class _Declare(IRMutator):
    """Each staged tile's ``Allocate`` right after its fragment's."""

    def __init__(self, staged: dict):
        self.staged = staged

    def visit_Allocate(self, node: ir.Allocate):
        tile = self.staged.get(node.buffer)
        return node if tile is None else ir.seq([node, ir.Allocate(tile, loc=node.loc)])


class _DropUnread(IRMutator):
    """The copies into fragments nothing reads any more, and their ``Allocate``s."""

    def __init__(self, unread: set):
        self.unread = unread

    def visit_Copy(self, node: ir.Copy):
        return None if node.dst.buffer in self.unread else node

    def visit_Allocate(self, node: ir.Allocate):
        return None if node.buffer in self.unread else node

    def visit_SeqStmt(self, node: ir.SeqStmt):
        kept = [s for s in (self.visit(x) for x in node.stmts) if s is not None]
        return ir.seq(kept)


def _unread(body, fragments: set) -> set:
    """Of ``fragments``, those the body mentions only as a copy's destination (and allocates)."""
    return {f for f in fragments if set(buffer_roles(body, f)) <= {"allocate", "copy_dst"}}


@register("stage_fragment_operands", "tile")
def stage_fragment_operands(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    stage = _Stage(func, ctx)
    body = stage.visit(func.body)
    if body is func.body:
        return func
    if stage.forwarded:
        unread = _unread(body, stage.forwarded)
        if unread:
            body = _DropUnread(unread).visit(body)
    return func.with_body(_Declare(stage.staged).visit(body) if stage.staged else body)
