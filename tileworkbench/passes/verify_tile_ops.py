"""verify_tile_ops: reject tile operations no later pass can lower, with the kernel line.

Expects: the IR straight from the front end.
Guarantees: the same IR (this pass never changes it); no ``Copy`` reads or writes a tile the
kernel allocates where it is known to lie past the tile's bounds (``s[0, bx - 1]`` with one
block: the generated code read the word before the tile); every ``TmaCopy`` has constant extents
and legal dtypes (no store from ``float4_e2m1_unpacked`` shared memory), and it and every ``Copy``
with ``prefer_instruction="tma"`` one dtype on both sides (TMA converts nothing: a float32 tile
stored to a float16 tensor so wrote raw bytes), every ``Copy`` out of
an unpacked FP4 buffer is rejected, no element of a packed FP4 tensor or shared tile is written
one at a time, by the kernel or by a fill, reduction, scan or gemm (half a byte: the thread holding
the other half would race; copies into one move whole bytes) and only a fragment's copy converts
into one (in pairs, or refused by ``partition_parallel_loops``),
no value is cast to int4 (its tiles are only moved and multiplied), no warp shuffle, vote or
election stands inside a ``T.Parallel`` loop (its lanes would hold elements as the layout decides,
and those past the loop's end would not make the call), every buffer accessed
by index has the right rank, no copy
runs between two overlapping regions of one buffer (known from constants and the launch's ranges), no
fill's value reads the region it fills (unless known to lie outside it); no tile
operation stands inside a ``T.Parallel`` loop (it runs once for the whole block, its threads
sharing the work: inside a loop over elements it would run once per element, each element's
threads racing over the whole tile; the lowering had made ``T.fill(T0, i)`` in a loop over ``i``
two threads storing different values into one element); and no tile operation spread over the
threads, nor a ``T.Parallel`` loop, stands under an ``if`` or ``while`` whose condition may differ
between the threads (``if tx < 32: T.fill(s, 0)``: each thread does its share, so the threads that
skip the ``if`` would leave theirs undone and only part of the tile would be written, where the
tile-level interpreter wrote all of it). Copies, fills, reductions and scans of per-thread
``local`` buffers are each thread's own serial loops and may stand there; so may a TMA copy
(one elected thread issues it; the barrier checker reports a condition that leaves it out).
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.simplify import interval, launch_ranges, narrowed_ranges, simplify
from ..ir.visitor import IRVisitor, buffers_written, collect
from .manager import register
from .rules.uniformity import Variance

FP4_UNPACK_ONLY = "only supports float4_e2m1_unpacked as an FP4 unpack load"
# A tensor or shared tile of packed FP4 holds two values a byte: one element written by a thread is
# half a byte, which the thread holding the other half would race on.
FP4_PACKED_WRITES = ("packed FP4 tensors and shared tiles are written in whole bytes only: by TMA, by T.copy "
                     "from another packed FP4 tile or tensor (even starts and extents), or by T.copy from a "
                     "fragment whose layout gives each thread neighbouring pairs; compute in a float4_e2m1fn "
                     "fragment or local array, a float4_e2m1_unpacked shared tile (one value a byte), or float32")


_USER_NAMES = {ir.Copy: "T.copy", ir.TmaCopy: "T.tma_copy", ir.Im2Col: "T.im2col", ir.Fill: "T.fill",
               ir.Gemm: "T.gemm", ir.Reduce: "T.reduce_*", ir.Scan: "T.cumsum / T.cummax"}


def _per_thread(node) -> bool:
    """A tile operation each thread runs whole by itself: one on a per-thread ``local`` buffer."""
    operands = [getattr(node, name) for name in ("src", "dst") if hasattr(node, name)]  # regions, or a reduction's buffers
    return any((r.buffer if isinstance(r, ir.Region) else r).scope == "local" for r in operands)


def _spread_over_threads(node) -> bool:
    """A statement whose work the block's threads share: a tile operation (but one on a local
    buffer, and a TMA copy, which one elected thread issues: the barrier checker finds a condition
    that leaves that thread out) or a ``T.Parallel`` loop."""
    if isinstance(node, ir.For):
        return node.kind == "parallel"
    return isinstance(node, ir.TILE_OPS) and not isinstance(node, ir.TmaCopy) and not _per_thread(node)


class _Verify(IRVisitor):
    def __init__(self, func: ir.PrimFunc):
        self.func = func
        self.ranges = launch_ranges(func)  # the block and thread indices' (an overlap's distance may name them)
        self.parallel = 0  # T.Parallel loops around the statement being visited
        self.loc = None  # the statement being visited, for errors about the expressions in it
        self.variant_condition = None  # the innermost if or while around it whose condition may differ between threads
        self._variance = None

    def variance(self) -> Variance:
        self._variance = self._variance or Variance(self.func, tile_level=True)
        return self._variance

    def visit_For(self, node: ir.For):
        inside = node.kind == "parallel"
        self.parallel += inside
        self.generic_visit(node)
        self.parallel -= inside

    def visit_IfThenElse(self, node):
        self._under(node, node.then_body, node.else_body)

    def visit_While(self, node):
        self._under(node, node.body)

    def _under(self, guard, *bodies):
        """Visit ``bodies`` under ``guard`` (an if or a while), the variant condition around them
        if it is the first whose condition may differ between threads and they hold shared work."""
        self.visit(guard.cond)
        saved = self.variant_condition
        bodies = [b for b in bodies if b is not None]
        if saved is None and any(_spread_over_threads(n) for b in bodies for n in collect(b, (ir.For, *ir.TILE_OPS))) \
                and not self.variance().is_uniform(guard.cond):
            self.variant_condition = guard
        ranges = self.ranges
        for body in bodies:
            if isinstance(guard, ir.IfThenElse) and body is guard.then_body:
                self.ranges = narrowed_ranges(ranges, guard.cond)  # where the condition holds
            self.visit(body)
            self.ranges = ranges
        self.variant_condition = saved

    def visit(self, node):
        if isinstance(node, ir.Stmt) and getattr(node, "loc", None) is not None:
            self.loc = node.loc
        dtype = getattr(node, "dtype", None) if isinstance(node, ir.Expr) and not isinstance(node, ir.BufferLoad) else None
        if dtype is not None and dtype.name == "int4":
            raise CompileError(f"{expr_text(node)} has type int4 here (a cast or a constant of that type): int4 values "
                               "are only moved (T.copy) and multiplied (T.gemm); the code has no int4 arithmetic (a "
                               "cast to int4 would keep int8's range)", self.loc)
        if isinstance(node, (ir.Fill, ir.Reduce, ir.Scan, ir.Gemm, ir.Im2Col)):
            packed = next((b for b in buffers_written(node) if b.packed_in_memory), None)
            if packed is not None:
                raise CompileError(f"{_USER_NAMES[type(node)]} writes {packed.name}, which holds FP4 values two a byte: "
                                   f"{FP4_PACKED_WRITES}", node.loc)
        if self.parallel and isinstance(node, ir.LetStmt) and isinstance(node.value, ir.Call) \
                and node.value.name in ir.ATOMIC_UPDATES:
            raise CompileError("T.atomic_add(..., return_prev=True) inside a T.Parallel loop is not supported: "
                               "the value is each thread's own; use it in code every thread runs", node.loc)
        if self.parallel and isinstance(node, ir.Call) and _warp_level(node.name):
            raise CompileError(f"{node.name} inside a T.Parallel loop: a warp shuffle, vote or election needs every "
                               "lane its mask names to make the call with the value that lane holds, and a loop over "
                               "elements gives lanes elements (or none, past the loop's end) as its layout decides; "
                               "call it in code each thread runs (with T.get_thread_binding())", self.loc)
        if self.parallel and isinstance(node, ir.TILE_OPS):
            raise CompileError(f"{_USER_NAMES[type(node)]} inside a T.Parallel loop: a tile operation runs once for "
                               "the whole block, its threads sharing the work; put it outside the loop, or write the "
                               "elements in the loop", node.loc)
        if self.variant_condition is not None and not self.parallel and _spread_over_threads(node):
            raise self._under_variant_condition(node)
        return super().visit(node)

    def _under_variant_condition(self, node) -> CompileError:
        what = "a T.Parallel loop" if isinstance(node, ir.For) else _USER_NAMES[type(node)]
        guard = self.variant_condition
        kind = "`while` loop" if isinstance(guard, ir.While) else "`if`"
        line = f" (line {guard.loc.line})" if guard.loc is not None and guard.loc.line else ""
        return CompileError(
            f"{what} inside an {kind}{line} whose condition ({expr_text(guard.cond)}) may differ between the "
            f"block's threads: the block's threads share its work, each doing its part, so the threads that "
            f"skip the {kind} would leave their parts undone. Move it out of the {kind} (a T.Parallel loop may "
            f"test the condition per element inside), or write the elements with T.serial loops", node.loc)

    def visit_BufferStore(self, node: ir.BufferStore):
        if node.buffer.packed_in_memory:
            raise CompileError(f"{node.buffer.name} holds FP4 values two a byte, and one element is written here: "
                               f"{FP4_PACKED_WRITES}", self.loc)
        self.generic_visit(node)

    def visit_TmaCopy(self, node: ir.TmaCopy):
        for r in (node.src, node.dst):
            if r.static_extents() is None:
                raise CompileError(f"T.tma_copy needs constant tile extents, {r.buffer.name} has "
                                   f"{[str(e) for e in r.extents]}", node.loc)
        if not node.is_load and node.src.buffer.dtype.name == "float4_e2m1_unpacked":
            raise CompileError(f"T.tma_copy {FP4_UNPACK_ONLY}; {node.src.buffer.name} holds unpacked "
                               "FP4 and cannot be stored to global memory", node.loc)
        if node.is_load and node.dst.buffer.dtype.name == "float4_e2m1_unpacked" and \
                node.src.buffer.dtype.name != "float4_e2m1fn":
            raise CompileError("an unpacked FP4 shared buffer can only be loaded from a "
                               "float4_e2m1fn tensor", node.loc)
        problem = _tma_conversion(node.src, node.dst)
        if problem:
            raise CompileError(f"T.tma_copy: {problem}; copy into a tile of {node.src.buffer.dtype.name} and "
                               "convert with T.copy", node.loc)

    def visit_Fill(self, node: ir.Fill):
        for load in collect(node.value, ir.BufferLoad):
            if load.buffer is node.dst.buffer and not _outside(load.indices, node.dst, self.ranges):
                raise CompileError(f"T.fill of {node.dst.buffer.name} with a value that reads {node.dst.buffer.name} "
                                   "where the fill writes: each thread computes the value and writes its share, in "
                                   "no set order with the others' writes (a thread's own array is filled one element "
                                   "after another), so later elements may see the new value; read it into a "
                                   "variable first", node.loc)

    def visit_Copy(self, node: ir.Copy):
        for region, verb in ((node.src, "reads"), (node.dst, "writes")):
            beyond = _beyond_its_tile(region, self.ranges)
            if beyond:
                raise CompileError(f"T.copy {verb} {region.buffer.name} outside its shape {beyond}: no element "
                                   "there belongs to it (a shared or register tile is not guarded as a tensor is)",
                                   node.loc)
        if node.src.buffer is node.dst.buffer and _overlap(node.src, node.dst, self.ranges):
            raise CompileError(f"T.copy within {node.src.buffer.name} between regions that overlap: the threads copy "
                               "the elements in no set order, so what lands is undefined; copy through a tile of "
                               "its own", node.loc)
        if node.src.buffer.dtype.name == "float4_e2m1_unpacked":
            raise CompileError(f"T.copy {FP4_UNPACK_ONLY}; {node.src.buffer.name} cannot be a source",
                               node.loc)
        if node.dst.buffer.packed_in_memory and node.instruction != "tma" and \
                node.src.buffer.dtype != node.dst.buffer.dtype and node.src.buffer.scope != "fragment":
            raise CompileError(f"a copy into packed FP4 {node.dst.buffer.name} from {node.src.buffer.dtype.name}: "
                               f"{FP4_PACKED_WRITES}", node.loc)
        problem = _tma_conversion(node.src, node.dst) if node.instruction == "tma" else None
        if problem:
            raise CompileError(f"T.copy with prefer_instruction='tma': {problem}; without it T.copy converts "
                               "them, by threads", node.loc)


def _warp_level(name: str) -> bool:
    """A call every lane of a warp (or of its mask) must make together."""
    return name in ir.SHUFFLES or name in ir.VOTES or name == ir.SYNCWARP or ir.elected_group(name) is not None


def _tma_conversion(src: ir.Region, dst: ir.Region) -> str | None:
    """Why a TMA copy from ``src`` to ``dst`` would be wrong: TMA moves bytes as they are, so the two
    dtypes must be one (or the load of packed FP4 that TMA unpacks); None where it is not."""
    a, b = src.buffer.dtype, dst.buffer.dtype
    if a == b or (a.name == "float4_e2m1fn" and b.name == "float4_e2m1_unpacked"):
        return None
    return (f"TMA moves bytes as they are and cannot convert {src.buffer.name} ({a.name}) to "
            f"{dst.buffer.name} ({b.name})")


def _overlap(a: ir.Region, b: ir.Region, ranges: dict) -> bool:
    """Two regions of one buffer known to share elements without being the same region (a copy of
    a region onto itself changes nothing): along every dimension the extents are constants and the
    distance between the starts, wherever the launch's ranges put it, is less than the extent on
    the side it points to, and along some dimension it is never zero (``A[bx, 0:64]`` onto
    ``A[bx, 1:65]``; ``A[0:4, 0:16]`` onto ``A[1, bx]`` for any ``bx`` in ``0..1``), or is zero
    along none but one exactly known distance (``A[0, 1:65]`` in a grid of one block)."""
    apart = False
    for sa, ea, sb, eb in zip(a.starts, a.extents, b.starts, b.extents):
        lo, hi = interval(simplify(sb - sa, ranges), ranges)
        ea, eb = ir.const_int(ea), ir.const_int(eb)
        if lo is None or hi is None or ea is None or eb is None or not (-eb < lo and hi < ea):
            return False
        apart = apart or lo > 0 or hi < 0 or (lo == hi == 0 and ea != eb)
    return apart


def _beyond_its_tile(region: ir.Region, ranges: dict) -> str | None:
    """Where a region of a tile the kernel allocates (shared, fragment, local) is known to lie past
    the tile's bounds along some dimension, wherever the launch's ranges put it (``s[0, bx - 1]`` in
    a grid of one block), as words; None where it may lie inside (a loop's variable: not known)."""
    if region.buffer.scope not in ("shared", "fragment", "local"):
        return None
    shape = region.buffer.static_shape()
    if shape is None:
        return None
    for dim, (start, extent, size) in enumerate(zip(region.starts, region.extents, shape)):
        lo, hi = interval(simplify(start, ranges), ranges)
        n = ir.const_int(extent)
        if (hi is not None and hi < 0) or (lo is not None and n is not None and lo + n > size):
            where = f"{lo}" if lo == hi else f"{lo}..{hi}"
            return (f"{tuple(shape)}: along dimension {dim} it starts at {expr_text(start)} (= {where}) and "
                    f"spans {extent}, of {size}")
    return None


def _outside(indices, region: ir.Region, ranges: dict) -> bool:
    """Whether an element read at ``indices`` is known to lie outside ``region`` (along some
    dimension, wherever the launch's ranges put it)."""
    for i, start, extent in zip(indices, region.starts, region.extents):
        lo, hi = interval(simplify(i - start, ranges), ranges)
        n = ir.const_int(extent)
        if (hi is not None and hi < 0) or (lo is not None and n is not None and lo >= n):
            return True
    return False


@register("verify_tile_ops", "tile")
def verify_tile_ops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    _Verify(func).visit(func.body)
    return func
