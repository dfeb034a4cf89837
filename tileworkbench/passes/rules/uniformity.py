"""Which values are the same in every thread of a block (block-uniform) and which may differ.

A block barrier (``__syncthreads``) may stand inside an ``if`` only when every thread of the block
takes the same branch, so ``insert_thread_syncs`` asks this module about each ``if``'s condition.
A value is *thread-variant* when it may differ between the threads of one block:

* the thread index, and the variable of a ``T.Parallel`` loop, whose iterations are spread over
  the threads;
* an element of a fragment (each thread holds its own elements);
* a scalar or local buffer given a thread-variant value, or given one inside a ``T.Parallel``
  loop or under a thread-variant condition (followed to a fixed point, so ``flag = A[tx]`` taints
  ``flag`` and all computed from it); a local buffer a ``T.copy`` fills from a fragment, a variant
  local buffer or a region at variant indices, or a ``T.fill`` with a variant value;
* a load of any buffer at a thread-variant index; the value an atomic update returns
  (``T.atomic_add(..., return_prev=True)``); anything the compiler cannot see through (raw code).

Everything else (constants, block indices, serial and pipelined loop variables, scalars computed
from them, loads of global or shared memory at such indices: ``BlockMask[by, bx, k]``) is
block-uniform. The answer is conservative: "variant" may be said of a value that happens to be
uniform, never the other way round.

``Variance(func, tile_level=True)`` asks about the tile-level IR, before fragments are laid out
over the threads: there a fragment is one tile, and an element of it read at block-uniform indices
(``block_mask[k]`` outside a ``T.Parallel`` loop) is one value, which the lowering gives every
thread that reads it (``localize_read_fragments``).
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import IRVisitor

_THREAD_LOOPS = ("parallel",)


class _Taint(IRVisitor):
    """One walk of the function: marks what is assigned a variant value (or in a variant place)."""

    def __init__(self, variance: "Variance"):
        self.variance = variance
        self.changed = False
        self.context_variant = 0  # depth of thread loops and variant conditions around the walk

    def _mark_var(self, var):
        if var not in self.variance.variant_vars:
            self.variance.variant_vars.add(var)
            self.changed = True

    def _mark_buffer(self, buf):
        if buf not in self.variance.variant_buffers:
            self.variance.variant_buffers.add(buf)
            self.changed = True

    def visit_For(self, n):
        threaded = n.kind in _THREAD_LOOPS
        if threaded:
            self._mark_var(n.var)
        self.context_variant += threaded
        self.generic_visit(n)
        self.context_variant -= threaded

    def visit_While(self, n):
        self.visit_IfThenElse(n)  # a thread-variant condition makes its body variant, as an if's

    def visit_ThreadScope(self, n):
        self._mark_var(n.var)  # the thread index within a T.ws scope
        self.generic_visit(n)

    def visit_IfThenElse(self, n):
        variant = not self.variance.is_uniform(n.cond)
        self.context_variant += variant
        self.generic_visit(n)
        self.context_variant -= variant

    def visit_LetStmt(self, n):
        if self.context_variant or not self.variance.is_uniform(n.value):
            self._mark_var(n.var)
        self.generic_visit(n)

    def visit_Assign(self, n):
        if self.context_variant or not self.variance.is_uniform(n.value):
            self._mark_var(n.var)
        self.generic_visit(n)

    def visit_Copy(self, n):
        if n.dst.buffer.scope == "local" and (self.context_variant or not self._region_uniform(n.src)
                                              or not self._region_uniform(n.dst)):
            self._mark_buffer(n.dst.buffer)
        self.generic_visit(n)

    def visit_Fill(self, n):
        if n.dst.buffer.scope == "local" and (self.context_variant or not self.variance.is_uniform(n.value)
                                              or not self._region_uniform(n.dst)):
            self._mark_buffer(n.dst.buffer)
        self.generic_visit(n)

    def _region_uniform(self, region) -> bool:
        """The same elements in every thread, holding the same values (not a fragment's, nor a
        variant local array's)."""
        buf = region.buffer
        return ((buf.scope != "fragment" or self.variance.tile_level) and buf not in self.variance.variant_buffers
                and all(self.variance.is_uniform(e) for e in (*region.starts, *region.extents)))

    def visit_BufferStore(self, n):
        if n.buffer.scope == "local" and (self.context_variant or not self.variance.is_uniform(n.value)
                                          or not all(self.variance.is_uniform(i) for i in n.indices)):
            self._mark_buffer(n.buffer)
        self.generic_visit(n)


class _Uses(IRVisitor):
    def __init__(self, variance: "Variance"):
        self.variance = variance
        self.variant = False

    def visit_Var(self, n):
        if n in self.variance.variant_vars:
            self.variant = True

    def visit_BufferLoad(self, n):
        if (n.buffer.scope == "fragment" and not self.variance.tile_level) or n.buffer in self.variance.variant_buffers:
            self.variant = True
        self.generic_visit(n)

    def visit_Raw(self, n):
        self.variant = True

    def visit_Call(self, n):
        if n.name in ir.ATOMIC_UPDATES or n.name in ir.RNG_DRAWS:  # an atomic's value, a random draw:
            self.variant = True  # each thread's own
        self.generic_visit(n)


class Variance:
    """The thread-variant scalars and local buffers of one kernel; ``is_uniform(expr)`` asks."""

    def __init__(self, func: ir.PrimFunc, tile_level: bool = False):
        self.tile_level = tile_level
        self.variant_vars = {func.launch.thread_var}
        self.variant_buffers: set = set()
        while True:  # a fixed point: each walk can only add to the two sets
            walk = _Taint(self)
            walk.visit(func.body)
            if not walk.changed:
                break

    def is_uniform(self, expr: ir.Expr) -> bool:
        uses = _Uses(self)
        uses.visit(expr)
        return not uses.variant
