"""split_column_blocks: a shared tile that gemms read in column blocks becomes one tile a block.

Expects: the IR straight from the front end, where ``T.gemm`` took a slice of a shared tile that
is whole along every dimension but the last (``T.gemm(Q_shared[:, :D], ...)`` and
``T.gemm(Q_shared[:, D:], ...)``, DeepSeek's sparse MLA: the query's ``D`` columns and its
rotary tail in one tile) and marked the tile ``column_blocks``.
Guarantees: every such tile whose accesses each keep to one column block is replaced by one shared
tile per block (``Q_shared_c0`` of D columns, ``Q_shared_c512`` of the tail), each access moved to
its block's tile with its columns counted from the block's first. The program is the same: no
access crosses a block, so no element moves from one to another. A tile some access takes whole,
or across blocks (a copy of the whole query, a gather at run-time columns), stays whole and loses
the mark: wgmma reads a gemm's block of whole 128-byte panels of it where it stands
(``rules.gemm.column_block``), and ``lower_tile_ops`` refuses a gemm on such a block that takes
mma.sync.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.simplify import RangeTracker, interval, launch_ranges
from ..ir.visitor import IRMutator, collect, reassigned_vars
from .manager import register

def _refuse(buf: ir.Buffer, why: str) -> CompileError:
    return CompileError(f"T.gemm reads {buf.name} in column blocks, but {why}: a gemm's operand is a whole "
                        f"shared tile to the compiler, so each block becomes a tile of its own; allocate one "
                        f"tile per block instead", buf.attrs[ir.COLUMN_BLOCKS])


class _Split(RangeTracker, IRMutator):
    def __init__(self, blocks: dict, func: ir.PrimFunc):
        self.blocks = blocks  # buffer -> {first column: (count, its tile)}
        self.ranges = launch_ranges(func)  # and the loops' variables as the walk passes them
        self.reassigned = reassigned_vars(func.body)

    def visit_For(self, node):
        self.track_loop(node)
        return self.generic_visit(node)

    def visit_LetStmt(self, node):
        self.track_let(node)
        return self.generic_visit(node)

    def part(self, buf, first: int, count: int):
        for start, (n, tile) in self.blocks[buf].items():
            if start <= first and first + count <= start + n:
                return start, tile
        raise _refuse(buf, f"columns {first}..{first + count - 1} are not inside one of its blocks")

    def visit_Region(self, node: ir.Region):
        starts = tuple(self.visit(s) for s in node.starts)
        if node.buffer not in self.blocks:
            return ir.Region(node.buffer, starts, node.extents) if starts != node.starts else node
        found = node.column_block()
        if found is None:
            raise _refuse(node.buffer, "another access takes rows or columns that are not a constant block")
        start, tile = self.part(node.buffer, *found)
        return ir.Region(tile, starts[:-1] + (ir.const(found[0] - start),), node.extents)

    def element(self, buf, indices):
        last = interval(indices[-1], self.ranges)
        if last[0] is None or last[1] is None:
            raise _refuse(buf, "an element access's column is not known to lie in one block")
        start, tile = self.part(buf, last[0], last[1] - last[0] + 1)
        return tile, tuple(indices[:-1]) + (ir.binop("-", indices[-1], start) if start else indices[-1],)

    def visit_BufferLoad(self, node):
        if node.buffer not in self.blocks:
            return self.generic_visit(node)
        tile, indices = self.element(node.buffer, tuple(self.visit(i) for i in node.indices))
        return ir.BufferLoad(tile, indices, node.dtype)

    def visit_BufferStore(self, node):
        if node.buffer not in self.blocks:
            return self.generic_visit(node)
        tile, indices = self.element(node.buffer, tuple(self.visit(i) for i in node.indices))
        return ir.BufferStore(tile, indices, self.visit(node.value), loc=node.loc)

    def visit_Allocate(self, node):
        if node.buffer not in self.blocks:
            return node
        return ir.seq([ir.Allocate(tile, loc=node.loc) for _, tile in self.blocks[node.buffer].values()])

    def visit_Buffer(self, node):
        if node in self.blocks:
            raise _refuse(node, "an operation takes the whole tile")
        return node


def _blocks_of(func: ir.PrimFunc, buf: ir.Buffer) -> dict:
    """{first column: (count, its tile)} of the column blocks ``buf``'s regions take."""
    ranges = set()
    for region in collect(func.body, ir.Region):
        if region.buffer is buf:
            found = region.column_block()
            if found is None or found == (0, ir.const_int(buf.shape[-1])):
                raise _refuse(buf, "an operation takes the whole tile" if found else
                              "another access takes rows or columns that are not a constant block")
            ranges.add(found)
    blocks, end = {}, -1
    for first, count in sorted(ranges, key=lambda r: (r[0], -r[1])):  # a range inside a block joins it
        if first + count - 1 <= end:
            continue
        if first <= end:
            raise _refuse(buf, f"two of its column ranges overlap in part (from column {first})")
        shape = tuple(buf.shape[:-1]) + (ir.const(count),)
        attrs = {k: v for k, v in buf.attrs.items() if k != ir.COLUMN_BLOCKS}
        blocks[first] = (count, ir.Buffer(f"{buf.name}_c{first}", shape, buf.dtype, buf.scope, attrs=attrs, loc=buf.loc))
        end = first + count - 1
    for gemm in collect(func.body, ir.Gemm):
        for region in (gemm.a, gemm.b):
            if region.buffer is not buf:
                continue
            first, count = region.column_block()
            if blocks.get(first, (None,))[0] != count:
                raise _refuse(buf, f"a gemm reads columns {first}..{first + count - 1}, part of a wider block "
                                   "another access takes")
    return blocks


@register("split_column_blocks", "tile")
def split_column_blocks(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    marked = [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.attrs.get(ir.COLUMN_BLOCKS)]
    blocks = {}
    for buf in marked:
        try:
            blocks[buf] = _blocks_of(func, buf)
        except CompileError:
            # an access takes the whole tile, or columns across blocks: the tile stays whole, and
            # wgmma reads each gemm's block where it stands (rules.gemm.column_block); a gemm that
            # cannot (mma.sync) is refused where it is lowered
            buf.attrs.pop(ir.COLUMN_BLOCKS)
    if not blocks:
        return func
    return func.with_body(_Split(blocks, func).visit(func.body))
