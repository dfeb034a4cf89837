"""stage_fragment_operands: a fragment read where its registers cannot serve goes through shared
memory: a gemm operand no register path takes, and a ``T.Parallel`` loop's read of a fragment at
its variables in another order.

Expects: tile-level IR from the front end (gemms and loops as written).
Guarantees: every ``T.gemm`` reads B from shared memory, and A too unless it runs on register-A
wgmma (``rules.gemm`` says so for this target and the threads the gemm runs on, the block's or its
``T.ws`` / ``if tx < C:`` scope's: sm_90a, 16-bit operands, A not transposed, whole 64-row blocks
of A per warpgroup, B in shared memory). An operand in a fragment
is read:
  * from the shared tile it was copied from, where that copy is earlier in the same sequence of
    statements, whole, of the fragment's shape and type, and neither was written since
    (``T.copy(S_shared, P); T.gemm(P, V, O)`` reads ``S_shared``); the copy into the fragment and
    the fragment itself go where nothing else reads it;
  * else from a new shared tile ``<fragment>_shared`` (numbered where that name is taken),
    allocated beside the fragment: the gemm becomes ``T.copy(P, P_shared); T.gemm(P_shared, B, C)``,
    with a ``TileworkbenchWarning`` at the gemm (the copy costs a trip through shared memory, and
    room there, that register A would not).
That is what the refusal this replaces told the user to write (TileLang's MLA decode keeps P in a
fragment for a gemm whose 64 rows two warpgroups share side by side along N; register-A wgmma
would need each warpgroup to hold all of A; TileLang's KDA backward multiplies by a B it computed
in a fragment); the later passes treat it as written so: the copy's barrier, the async-proxy fence
before wgmma reads the tile, the shared-memory plan.

Transposes (``_Transposes``): a ``T.Parallel`` nest that stores a fragment only at its variables
in one other order (GDN backward's ``Q_t[k, s] = Q[s, k]`` in a loop over ``(s, k)``) runs its
loops in that order (its iterations are independent), and so does a nest that stores no fragment
and reads fragments at all of its variables in one other order only (an indexer's ``logits[n, q]``
stored to ``Logits[q, n]`` in a loop over ``(q, n)``: each thread then stores what it holds); then
a fragment the nest still reads at all of its variables in another order and does not store
(Mamba's ``xt_local[i, j] = x_local[j, i]`` in a loop over ``(i, j)``) is read from a shared copy
made just before the nest, ``T.copy(x_local, x_local_shared)``, with a
``TileworkbenchWarning``: no thread holds the elements the loop's thread needs (a fragment's layout
follows its own indices), and a shared tile is what TileLang's layouts would avoid here.
"""

from __future__ import annotations

import dataclasses
import warnings

from ..errors import TileworkbenchWarning
from ..ir import nodes as ir
from ..ir.visitor import IRMutator, buffer_roles, buffers_written, collect
from .rules import gemm as gemm_rules
from .rules.fragments import parallel_nest
from .rules.staging import SharedStandIns, copied_in_before
from .rules.thread_scopes import threads_of
from .manager import register


class _Stage(IRMutator):
    def __init__(self, func: ir.PrimFunc, ctx):
        self.func, self.threads, self.ctx = func, func.launch.threads, ctx
        self.gemm_threads, _ = threads_of(func)  # a gemm in an `if tx < 128:` scope runs on 128 threads
        self.stand_ins = SharedStandIns(func)  # fragment -> its shared tile
        self.forwarded: set = set()  # fragments a gemm no longer reads (it reads their source tile)

    def visit_SeqStmt(self, node: ir.SeqStmt):
        # Within one sequence: the fragment each whole shared tile was last copied into unchanged
        # (``T.copy(S_shared, acc_s_cast)``, neither written since): a gemm reads that tile instead.
        copied_from: dict = {}
        out = []
        for stmt in node.stmts:
            out.append(self._gemm(stmt, copied_from) if isinstance(stmt, ir.Gemm) else self.visit(stmt))
            written = _written(stmt)
            copied_from = {f: src for f, src in copied_from.items()
                           if f not in written and src.buffer not in written}
            if isinstance(stmt, ir.Copy) and _same_tile(stmt):
                copied_from[stmt.dst.buffer] = stmt.src
        if all(new is old for new, old in zip(out, node.stmts)):
            return node
        return ir.seq(out)

    def visit_Gemm(self, node: ir.Gemm):
        return self._gemm(node, {})

    def _gemm(self, node: ir.Gemm, copied_from: dict) -> ir.Stmt:
        """The gemm reading each fragment operand that needs it from shared memory (B first: whether
        register-A wgmma takes A depends on B being in shared memory), after the copies into new
        tiles it needs."""
        copies = []
        for operand in ("b", "a"):
            region = getattr(node, operand)
            threads = self.gemm_threads.get(id(node), self.threads)
            if region.buffer.scope != "fragment" or (operand == "a" and gemm_rules.register_a(node, threads, self.ctx)):
                continue
            source = copied_from.get(region.buffer)
            if source is not None:
                self.forwarded.add(region.buffer)
            else:
                source = self._tile_for(node, operand)
                copies.append(ir.Copy(ir.Region.full(region.buffer), ir.Region.full(source.buffer), None,
                                      loc=node.loc))
            node = dataclasses.replace(node, **{operand: source})
        return ir.seq([*copies, node]) if copies else node

    def _tile_for(self, node: ir.Gemm, operand: str) -> ir.Region:
        """The shared tile a fragment operand is copied into (one per fragment), announced once."""
        fragment = getattr(node, operand).buffer
        announced = fragment in self.stand_ins.tiles
        tile = self.stand_ins.tile(fragment)
        if not announced:
            why = ("and gemms read B from shared memory" if operand == "b" else
                   f"that register-A wgmma cannot read here "
                   f"({gemm_rules.why_not_register_a(node, self.gemm_threads.get(id(node), self.threads), self.ctx)})")
            line = node.loc.line if node.loc is not None else self.func.source_line
            warnings.warn_explicit(TileworkbenchWarning(
                f"T.gemm: {operand.upper()} ({fragment.name}) is a fragment {why}; it is copied into a "
                f"shared tile ({tile.name}) for the gemm"), TileworkbenchWarning, self.func.source_file, line or 0)
        return ir.Region.full(tile)


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


def _order(indices, loop_vars) -> tuple | None:
    """Where each index is among the loop variables, if the indices are all of them in some order."""
    if len(indices) != len(loop_vars):
        return None
    order = tuple(next((k for k, v in enumerate(loop_vars) if v is i), -1) for i in indices)
    return order if sorted(order) == list(range(len(loop_vars))) else None


def _read_order(body, loops) -> tuple | None:
    """The one order other than the loops' own in which the nest reads fragments at all of its
    variables, where every such read is in that order and the fragments span the loops (an
    indexer's ``logits[n, q]`` stored to ``Logits[q, n]`` in a loop over ``(q, n)``): run in that
    order, each thread reads what it holds."""
    loop_vars = [lp.var for lp in loops]
    orders = set()
    for load in collect(body, ir.BufferLoad):
        if load.buffer.scope != "fragment":
            continue
        order = _order(load.indices, loop_vars)
        if order is None:
            continue
        if any(load.buffer.static_shape()[k] != ir.const_int(loops[o].extent) for k, o in enumerate(order)):
            return None
        orders.add(order)
    if len(orders) != 1 or orders == {tuple(range(len(loops)))}:
        return None
    return orders.pop()


class _Transposes(IRMutator):
    """The transposes of the module doc: loops reordered to a permuted store, permuted reads from a
    shared copy (one tile per fragment, ``rules.staging.SharedStandIns``)."""

    def __init__(self, stage: _Stage):
        self.stage = stage

    def visit_For(self, node: ir.For):
        if node.kind != "parallel":
            return self.generic_visit(node)
        loops, body = parallel_nest(node)
        identity = tuple(range(len(loops)))
        stored = [_order(st.indices, [lp.var for lp in loops]) for st in collect(body, ir.BufferStore)
                  if st.buffer.scope == "fragment"]
        reordered = bool(stored) and len(set(stored)) == 1 and stored[0] not in (None, identity)
        if reordered:
            loops = [loops[k] for k in stored[0]]  # the store's order: it is the loop's own now
        elif not stored:
            read = _read_order(body, loops)
            if read is not None:
                loops = [loops[k] for k in read]  # the one fragment order read: the loop's own now
        loop_vars = [lp.var for lp in loops]
        written = set(buffers_written(body))
        permuted = {}
        for load in collect(body, ir.BufferLoad):
            frag = load.buffer
            order = _order(load.indices, loop_vars)
            if frag.scope != "fragment" or frag in written or frag in permuted or order in (None, identity):
                continue
            if all(frag.static_shape()[k] == ir.const_int(loops[o].extent) for k, o in enumerate(order)):
                permuted[frag] = self._tile(frag, node, reordered)
        if loops[0] is node and not permuted:
            return node
        for lp in reversed(loops):
            body = dataclasses.replace(lp, body=body)
        return copied_in_before(body, permuted)

    def _tile(self, frag: ir.Buffer, loop: ir.For, reordered: bool) -> ir.Buffer:
        tile = self.stage.stand_ins.tile(frag)
        how = (f"stores a fragment and reads {frag.name} at its loop variables in different orders" if reordered
               else f"reads {frag.name} at its loop variables in another order")
        line = loop.loc.line if loop.loc is not None else self.stage.func.source_line
        warnings.warn_explicit(TileworkbenchWarning(
            f"T.Parallel {how}: no thread holds the elements it needs of {frag.name}, so that fragment is "
            f"copied into a shared tile ({tile.name}) before the loop"),
            TileworkbenchWarning, self.stage.func.source_file, line or 0)
        return tile


@register("stage_fragment_operands", "tile")
def stage_fragment_operands(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    stage = _Stage(func, ctx)
    body = _Transposes(stage).visit(stage.visit(func.body))
    if body is func.body:
        return func
    if stage.forwarded:
        unread = _unread(body, stage.forwarded)
        if unread:
            body = _DropUnread(unread).visit(body)
    return func.with_body(stage.stand_ins.declared(body))
