"""Shared tiles that stand in for fragments where a fragment's registers cannot serve a read: one
tile per fragment, named after it, declared beside it, and the reads sent to it
(``stage_fragment_operands``: gemm operands and transposed reads; ``localize_read_fragments``:
column reads of a fragment no thread can hold whole)."""

from __future__ import annotations

import dataclasses

from ...ir import nodes as ir
from ...ir.visitor import IRMutator, collect
from .reductions import loop_nest


class SharedStandIns:
    """The shared tile of each fragment staged so far (``tiles``: fragment -> tile), named
    ``<fragment>_shared``, numbered where the kernel already has a buffer of that name."""

    def __init__(self, func: ir.PrimFunc):
        self.func = func
        self.tiles: dict = {}

    def tile(self, fragment: ir.Buffer) -> ir.Buffer:
        tile = self.tiles.get(fragment)
        if tile is None:
            tile = self.tiles[fragment] = ir.Buffer(self._fresh(f"{fragment.name}_shared"), fragment.shape,
                                                    fragment.dtype, "shared", loc=fragment.loc)
        return tile

    def _fresh(self, name: str) -> str:
        taken = {p.name for p in self.func.params if isinstance(p, ir.Buffer)}
        taken |= {x.buffer.name for x in collect(self.func.body, ir.Allocate)} | {b.name for b in self.tiles.values()}
        n, fresh = 0, name
        while fresh in taken:
            n += 1
            fresh = f"{name}_{n}"
        return fresh

    def declared(self, body: ir.Stmt) -> ir.Stmt:
        """``body`` with each tile's ``Allocate`` right after its fragment's."""
        return _DeclareBeside(self.tiles).visit(body) if self.tiles else body


class _DeclareBeside(IRMutator):
    def __init__(self, tiles: dict):
        self.tiles = tiles

    def visit_Allocate(self, node: ir.Allocate):
        tile = self.tiles.get(node.buffer)
        return node if tile is None else ir.seq([node, ir.Allocate(tile, loc=node.loc)])


class ReadFrom(IRMutator):
    """Loads of each fragment of ``tiles`` (fragment -> tile) read its tile instead."""

    def __init__(self, tiles: dict):
        self.tiles = tiles

    def visit_BufferLoad(self, node: ir.BufferLoad):
        tile = self.tiles.get(node.buffer)
        return node if tile is None else dataclasses.replace(node, buffer=tile)


def copied_in_before(loop: ir.For, tiles: dict) -> ir.Stmt:
    """``loop`` reading the tiles of ``tiles`` (fragment -> tile), each filled from its fragment
    just before it by a ``T.Parallel`` loop over the fragment (what ``T.copy`` of a fragment lowers
    to; a loop rather than the tile operation, which a kernel that has none by now must not get
    back: ``ir.verify``)."""
    def filled(frag, tile):
        return loop_nest(frag.static_shape(), lambda idx: ir.BufferStore(tile, idx, ir.BufferLoad(frag, idx, frag.dtype)),
                         loc=loop.loc)

    return ir.seq([*(filled(f, t) for f, t in tiles.items()), ReadFrom(tiles).visit(loop)])
