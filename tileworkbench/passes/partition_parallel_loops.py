"""partition_parallel_loops: map ``T.Parallel`` iterations onto the block's threads.

Expects: lowered tile ops; fragments with layouts (``infer_fragment_layouts``).
Guarantees: no parallel loop and no fragment remains.
  * A parallel nest that touches a fragment becomes ``for j in T.unroll(local_size)`` over the
    thread's own elements, with the loop indices recovered from the fragment's layout, so the
    thread that holds an element is the one that computes it.
    When the nest only stores fp32 fragment values into a 16-bit global tensor or shared tile
    (swizzles and 128-byte panels move 16-byte chunks, so an aligned pair stays one), the layout
    keeps element pairs ``(2m, 2m + 1)`` side by side in a row, and the store's indices provably
    put them side by side in the tensor too (the simplifier must reduce the distance to 1), the
    loop runs over pairs and each thread stores both with one 32-bit ``tw::store_pair`` (the
    tensor must be 4-byte aligned: the launcher checks ``align_bytes``).
    Into a shared tile on sm_90+ from a wgmma accumulator, whose pairs are 8x8 matrices across a
    warp, four pairs go out with one ``tw::store_matrix_x4`` (``stmatrix``) instead: a quarter of
    the store instructions, and a quarter of the unrolled address arithmetic NVVM and ptxas
    compile (the spec GEMM's NVRTC time: 0.21 -> 0.16 s on the CPU machine); each matrix row
    must be 8 neighbours in the tensor starting 16-byte aligned. ``stmatrix`` is a
    warp-wide instruction, so only where every condition around the store is the same for a whole
    warp (``tx < 256`` splitting warpgroups is; anything finer keeps ``store_pair``), and not with
    ``tw.disable_matrix_stores``.
  * Any other parallel nest is split round-robin: flat iteration ``it * threads + tx``.
  * Fragments become per-thread ``local`` arrays of ``local_size`` elements.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.layout import strided_offset, unravel
from ..ir.simplify import Affine, is_multiple_of, launch_ranges, simplify
from ..ir.visitor import IRMutator, collect, substitute, uses_var
from ..target import PassConfigKey
from .manager import register

UNROLL_LIMIT = 32


def _nest(loop: ir.For):
    """The perfectly nested parallel loops starting at ``loop`` and the innermost body."""
    loops = [loop]
    body = loop.body
    while isinstance(body, ir.For) and body.kind == "parallel":
        loops.append(body)
        body = body.body
    for inner in collect(body, ir.For):
        if inner.kind == "parallel":
            raise CompileError("nested T.Parallel loops must be perfectly nested "
                               "(write T.Parallel(M, N) for a 2-D loop)", inner.loc or loop.loc)
    return loops, body


class _FragmentAccess(IRMutator):
    """Rewrites ``F[v0, v1]`` (identity indices) to ``F_local[j]``."""

    def __init__(self, loop_vars, j, layout, loc, to_local):
        self.loop_vars, self.j, self.layout, self.loc, self.to_local = loop_vars, j, layout, loc, to_local

    def check(self, buf, indices):
        identity = len(indices) == len(self.loop_vars) and all(i is v for i, v in zip(indices, self.loop_vars))
        if not identity:
            raise CompileError(f"fragment {buf.name} must be indexed by the T.Parallel loop variables "
                               f"in order, like {buf.name}[{', '.join(v.name for v in self.loop_vars)}]",
                               self.loc)
        if buf.attrs["layout"] != self.layout:
            raise CompileError(f"fragment {buf.name} has a different thread layout "
                               f"({buf.attrs['layout'].describe()}) from the loop's "
                               f"({self.layout.describe()}); copy through shared memory", self.loc)

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        if node.buffer.scope != "fragment":
            return node
        self.check(node.buffer, node.indices)
        return ir.BufferLoad(self.to_local(node.buffer), (self.j,), node.dtype)

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        if node.buffer.scope != "fragment":
            return node
        self.check(node.buffer, node.indices)
        return ir.BufferStore(self.to_local(node.buffer), (self.j,), node.value, loc=node.loc)


class _Partition(IRMutator):
    def __init__(self, func: ir.PrimFunc, to_local, matrix_stores: bool):
        self.threads = func.launch.threads
        self.tid = func.launch.thread_var
        self.to_local = to_local
        self.ranges = launch_ranges(func)
        self.matrix_stores = matrix_stores
        self.conditions: list = []  # the conditions of the ifs around the statement being visited
        self.thread_index = {self.tid}  # the thread index and the kernel's names for it (tid = tx)
        self.thread_dependent = {self.tid}  # every scalar whose value may differ between threads

    def visit_LetStmt(self, node: ir.LetStmt):
        if node.value in self.thread_index:
            self.thread_index.add(node.var)
        if any(uses_var(node.value, v) for v in self.thread_dependent):
            self.thread_dependent.add(node.var)
        return self.generic_visit(node)

    def visit_IfThenElse(self, node: ir.IfThenElse):
        self.conditions.append(node.cond)
        try:
            return self.generic_visit(node)
        finally:
            self.conditions.pop()

    def warp_uniform(self, cond: ir.Expr) -> bool:
        """True when ``cond`` has the same value for every thread of a warp: it does not use the
        thread index, or compares it with a warp boundary (``tx < 256``, ``tx >= 128``)."""
        if not any(uses_var(cond, v) for v in self.thread_dependent):
            return True
        if isinstance(cond, ir.BinOp) and cond.op in ("and", "or"):
            return self.warp_uniform(cond.a) and self.warp_uniform(cond.b)
        if not (isinstance(cond, ir.BinOp) and cond.op in ("<", ">=", "<=", ">") and cond.a in self.thread_index):
            return False
        bound = ir.const_int(cond.b)
        if bound is None:
            return False
        return bound % 32 == (0 if cond.op in ("<", ">=") else 31)

    def visit_For(self, node: ir.For):
        if node.kind != "parallel":
            return self.generic_visit(node)
        loops, body = _nest(node)
        loop_vars = [lp.var for lp in loops]
        extents = [ir.const_int(lp.extent) for lp in loops]
        if None in extents:
            raise CompileError("T.Parallel needs constant extents", node.loc)
        fragments = [a.buffer for a in collect(body, (ir.BufferLoad, ir.BufferStore)) if a.buffer.scope == "fragment"]
        if fragments:
            return self.by_layout(node, loop_vars, extents, body, fragments[0])
        return self.round_robin(node, loop_vars, extents, body)

    def by_layout(self, node, loop_vars, extents, body, frag: ir.Buffer):
        layout = frag.attrs["layout"]
        if tuple(extents) != tuple(layout.shape):
            raise CompileError(f"this T.Parallel loop is {tuple(extents)} but fragment {frag.name} is "
                               f"{tuple(layout.shape)}; loop over the whole fragment", node.loc)
        paired = self.paired_stores(node, loop_vars, body, layout)
        if paired is not None:
            return paired
        j = ir.Var("j")
        indices, guard = layout.forward(self.tid, j)
        rewritten = _FragmentAccess(loop_vars, j, layout, node.loc, self.to_local).visit(body)
        lets = [ir.LetStmt(v, i) for v, i in zip(loop_vars, indices) if uses_var(rewritten, v)]
        inner = ir.seq(lets + [rewritten if guard is None else ir.IfThenElse(guard, rewritten)])
        return ir.For(j, ir.const(layout.local_size), inner, "unrolled",
                      annotations={"layout": layout.describe()}, loc=node.loc)

    def paired_stores(self, node, loop_vars, body, layout):
        """``for jj in T.unroll(local_size / 2): tw::store_pair(&out[...], lo, hi)``, or None
        where the nest is not a plain fp32-fragment -> 16-bit global store (module doc)."""
        if isinstance(body, ir.IfThenElse) and body.else_body is None:  # a bounds check, if always true
            ranges = {**self.ranges, **{v: (0, n - 1) for v, n in zip(loop_vars, layout.shape)}}
            if not isinstance(cond := simplify(body.cond, ranges), ir.Const) or not cond.value:
                return None
            body = body.then_body
        if not (getattr(layout, "adjacent_pairs", False) and isinstance(body, ir.BufferStore)):
            return None
        out = body.buffer
        if out.scope not in ("global", "shared") or out.dtype.name not in ("float16", "bfloat16") or \
                layout.local_size % 2:
            return None
        value = body.value.value if isinstance(body.value, ir.Cast) and body.value.dtype == out.dtype else body.value
        if value.dtype.name != "float32" or collect(value, ir.Call):
            return None
        jj = ir.Var("jj")
        halves = []
        for j in (jj * 2, jj * 2 + 1):
            indices, guard = layout.forward(self.tid, j)
            if guard is not None:
                return None
            bind = dict(zip(loop_vars, indices))
            local = _FragmentAccess(loop_vars, j, layout, node.loc, self.to_local).visit(value)
            halves.append((tuple(substitute(i, bind) for i in body.indices), substitute(local, bind)))
        (first, lo), (_, hi) = halves
        column = _unit_column(out, body.indices, loop_vars[-1])
        if column is None or not is_multiple_of(simplify(strided_offset(out, first)), 2):
            return None  # the pair's two elements are not neighbours in the tensor, or not aligned
        if out.scope == "global":  # shared tiles are 128-byte aligned; swizzle and panels keep pairs
            out.attrs["align_bytes"] = max(out.attrs.get("align_bytes", 1), 4)
        matrices = self.matrix_stores_of(node, loop_vars, body, value, layout, column)
        if matrices is not None:
            return matrices
        address = ir.Call("address_of", (ir.BufferLoad(out, first, out.dtype),), ir.dtypes.handle)
        store = ir.Evaluate(ir.Call("tw::store_pair", (address, lo, hi)))
        return ir.For(jj, ir.const(layout.local_size // 2), store, "unrolled",
                      annotations={"layout": layout.describe(), "pairs": True}, loc=node.loc)

    def matrix_stores_of(self, node, loop_vars, body, value, layout, column: Affine):
        """``for mm in T.unroll(local_size / 8): tw::store_matrix_x4(&out[row start], 8 values)``,
        or None where ``stmatrix`` does not apply (module doc). Lane ``l`` gives the start of row
        ``l % 8`` of the matrix of pair ``4 mm + l / 8`` and passes its own pairs ``4 mm .. 4 mm + 3``."""
        out = body.buffer
        groups = getattr(layout, "matrix_groups", None)
        if not (self.matrix_stores and out.scope == "shared" and groups
                and all(self.warp_uniform(c) for c in self.conditions)):
            return None
        # stmatrix writes each matrix row as 8 neighbours from a 16-byte aligned start: the column
        # steps one element (``column``), and a row start (whose column matrix_row keeps a
        # multiple of 8) lands on a multiple of 8 when every other term and the constant do
        others = [coef for atom, coef in column.terms.values() if atom is not loop_vars[-1]]
        if column.const % 8 or any(coef % 8 for coef in others):
            return None
        mm = ir.Var("mm")
        row, col = layout.matrix_row(self.tid, mm)
        start = tuple(substitute(i, dict(zip(loop_vars, (row, col)))) for i in body.indices)
        values = []
        for e in range(8):  # pair 4 mm + e // 2, element e % 2
            j = mm * 8 + e
            values.append(_FragmentAccess(loop_vars, j, layout, node.loc, self.to_local).visit(value))
        address = ir.Call("address_of", (ir.BufferLoad(out, start, out.dtype),), ir.dtypes.handle)
        store = ir.Evaluate(ir.Call("tw::store_matrix_x4", (address, *values)))
        return ir.For(mm, ir.const(groups), store, "unrolled",
                      annotations={"layout": layout.describe(), "matrices": True}, loc=node.loc)

    def round_robin(self, node, loop_vars, extents, body):
        total = 1
        for e in extents:
            total *= e
        iters = -(-total // self.threads)
        it = ir.Var("it")
        flat = ir.Var("flat")
        lets = [ir.LetStmt(flat, it * self.threads + self.tid)]
        lets += [ir.LetStmt(v, i) for v, i in zip(loop_vars, unravel(flat, tuple(extents)))]
        inner = ir.seq(lets + [body])
        if total % self.threads:
            inner = ir.seq([lets[0], ir.IfThenElse(ir.cmp("<", flat, total), ir.seq(lets[1:] + [body]))])
        kind = "unrolled" if iters <= UNROLL_LIMIT else "serial"
        vector = node.annotations.get("vector")
        ann = {"vector": vector} if vector else {}
        return ir.For(it, ir.const(iters), inner, kind, annotations=ann, loc=node.loc)


def _unit_column(buf: ir.Buffer, indices, column: ir.Var) -> Affine | None:
    """The element offset of ``buf[indices]`` as an affine form when ``column`` (the fragment's
    last loop variable) enters it only as ``+ column``, so neighbouring columns of the fragment are
    neighbouring elements of the tensor; else None. Checked on the store's own index expressions,
    a few terms, not on per-thread addresses."""
    form = Affine.of(simplify(strided_offset(buf, indices)))
    uses = [(atom, coef) for atom, coef in form.terms.values() if uses_var(atom, column)]
    return form if len(uses) == 1 and uses[0][0] is column and uses[0][1] == 1 else None


class _FragmentsToLocal(IRMutator):
    """Fragments become per-thread arrays; any access left outside a T.Parallel loop is an error."""

    def __init__(self):
        self.map: dict = {}
        self.loc = None

    def local(self, buf):
        if buf.scope != "fragment":
            return buf
        if buf not in self.map:
            layout = buf.attrs["layout"]
            self.map[buf] = ir.Buffer(buf.name, (ir.const(layout.local_size),), buf.dtype, "local",
                                      attrs={"layout": layout, "fragment_shape": buf.static_shape()}, loc=buf.loc)
        return self.map[buf]

    def visit_Allocate(self, node):
        return ir.Allocate(self.local(node.buffer), loc=node.loc)

    def _outside(self, buf, loc):
        return CompileError(f"fragment {buf.name} can only be accessed inside a T.Parallel loop over it "
                            "or by tile operations (each thread holds only part of it)", loc)

    def visit_BufferLoad(self, node):
        if node.buffer.scope == "fragment":
            raise self._outside(node.buffer, self.loc)
        return self.generic_visit(node)

    def visit_BufferStore(self, node):
        if node.buffer.scope == "fragment":
            raise self._outside(node.buffer, node.loc)
        self.loc = node.loc
        return self.generic_visit(node)

    def generic_visit(self, node):
        if getattr(node, "loc", None) is not None and isinstance(node, ir.Stmt):
            self.loc = node.loc
        return super().generic_visit(node)


@register("partition_parallel_loops", "lower")
def partition_parallel_loops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    to_local = _FragmentsToLocal()
    matrix_stores = ctx.target.compute_version >= (9, 0) and not ctx.flag(PassConfigKey.TW_DISABLE_MATRIX_STORES)
    body = _Partition(func, to_local.local, matrix_stores).visit(func.body)
    body = to_local.visit(body)
    return func.with_body(body)
