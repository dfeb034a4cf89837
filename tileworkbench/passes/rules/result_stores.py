"""16-bit, FP8, FP4 and float32 results stored from a fragment two or eight at a time, for
``partition_parallel_loops``: :meth:`ResultStores.paired_stores` (one 32-bit ``tw::store_pair``,
a 16-bit ``tw::store_pair_e4m3``/``_e5m2``, or for packed FP4 one byte ``tw::store_pair_e2m1``,
which is the only way a thread writes into a packed tile, per element pair where the layout and the store's
indices keep pairs side by side; likewise a float32 ``T.atomic_add`` into a global tensor, one
8-byte ``tw::atomic_add_pair`` per pair: half the atomics, which the L2 serves one instruction at
a time, for FlashAttention backward's dQ) and
:meth:`ResultStores.matrix_stores_of` (``stmatrix``, four 8x8 matrices per
``tw::store_matrix_x4``, into a shared tile from a wgmma accumulator, where every condition
around the store is the same for a whole warp: :meth:`ResultStores.warp_uniform`)."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.layout import BlockedLayout, strided_offset
from ...ir.simplify import Affine, is_multiple_of, simplify
from ...ir.visitor import collect, substitute, uses_var
from .calls import needs_alignment
from .fragments import FragmentAccess


def unit_column(buf: ir.Buffer, indices, column: ir.Var) -> Affine | None:
    """The element offset of ``buf[indices]`` as an affine form when ``column`` (the fragment's
    last loop variable) enters it only as ``+ column``, so neighbouring columns of the fragment are
    neighbouring elements of the tensor; else None. Checked on the store's own index expressions,
    a few terms, not on per-thread addresses."""
    form = Affine.of(simplify(strided_offset(buf, indices)))
    uses = [(atom, coef) for atom, coef in form.terms.values() if uses_var(atom, column)]
    return form if len(uses) == 1 and uses[0][0] is column and uses[0][1] == 1 else None


# The call that stores two neighbouring float32 results rounded to each type: one 32-bit store of
# two 16-bit values, one 16-bit store of two FP8 values, or one 64-bit store of two float32 values.
PAIR_STORES = {"float16": "tw::store_pair", "bfloat16": "tw::store_pair", "float8_e4m3": "tw::store_pair_e4m3",
               "float8_e5m2": "tw::store_pair_e5m2", "float32": "tw::store_pair",
               "float4_e2m1fn": "tw::store_pair_e2m1"}  # FP4: one byte of two packed codes, the only way in
ATOMIC_ADD_PAIR = "tw::atomic_add_pair"  # two neighbouring float32 sums with one 8-byte atomic (sm_90)


def pair_target(body):
    """``(out, indices, value, call)`` of a nest's one store or float32 atomic add, the call that
    writes a pair of them; None for any other body."""
    if isinstance(body, ir.BufferStore):
        out = body.buffer
        if out.scope not in ("global", "shared") or out.dtype.name not in PAIR_STORES:
            return None
        value = body.value.value if isinstance(body.value, ir.Cast) and body.value.dtype == out.dtype else body.value
        return out, body.indices, value, PAIR_STORES[out.dtype.name]
    call = body.call if isinstance(body, ir.Evaluate) else None
    if not (isinstance(call, ir.Call) and call.name == ir.ATOMIC_ADD):
        return None
    target = call.args[0].args[0]  # address_of(out[...])
    out = target.buffer
    if out.scope != "global" or out.dtype.name != "float32":
        return None
    return out, target.indices, call.args[1], ATOMIC_ADD_PAIR


class ResultStores:
    """Needs the pass's ``tid``, ``ranges``, ``to_local``, ``matrix_stores``, ``conditions``,
    ``thread_index`` and ``thread_dependent``."""

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

    def paired_stores(self, node, loop_vars, body, layout):
        """``for jj in T.unroll(local_size / 2): tw::store_pair(&out[...], lo, hi)``, or None
        where the nest is not a plain fp32-fragment -> 16-bit store or float32 atomic add (module doc)."""
        body, row_conditions = self.row_conditions(body, loop_vars, layout)
        if body is None:
            return None
        target = pair_target(body)
        # a blocked layout's runs of an even length hold neighbours two by two, each pair's first at
        # an even column (runs stay in a row of even length); taken for packed FP4 only, which has
        # no other way in, so other kernels keep their stores
        run_pairs = target is not None and target[0].dtype.packed and isinstance(layout, BlockedLayout) \
            and layout.vec % 2 == 0 and not layout.row and layout.shape[-1] % 2 == 0
        if target is None or not (getattr(layout, "adjacent_pairs", False) or run_pairs) or layout.local_size % 2:
            return None
        out, out_indices, value, writer = target
        # float32 results; into packed FP4 also FP4 values (a fragment's codes, computed as float32)
        carried = value.dtype.name == "float32" or (out.dtype.packed and value.dtype.computed_in_float32)
        if not carried or collect(value, ir.Call):
            return None
        jj = ir.Var("jj")
        halves, binds = [], []
        for j in (jj * 2, jj * 2 + 1):
            indices, guard = layout.forward(self.tid, j)
            if guard is not None:
                return None
            bind = dict(zip(loop_vars, indices))
            local = FragmentAccess(loop_vars, j, layout, node.loc, self.to_local).visit(value)
            halves.append((tuple(substitute(i, bind) for i in out_indices), substitute(local, bind)))
            binds.append(bind)
        (first, lo), (_, hi) = halves
        column = unit_column(out, out_indices, loop_vars[-1])
        if column is None:
            return None  # the pair's two elements are not neighbours in the tensor
        # the first of each pair at an even offset: shown on its address, or, for runs, by the store's
        # offset being even but for the column (whose value at a pair's first is even)
        even = is_multiple_of(simplify(strided_offset(out, first)), 2) or (run_pairs and column.const % 2 == 0 and all(
            coef % 2 == 0 for atom, coef in column.terms.values() if atom is not loop_vars[-1]))
        if not even:
            return None
        if out.scope == "global":  # shared tiles are 128-byte aligned; swizzle and panels keep pairs
            needs_alignment(out, out.dtype.bytes_for(2))
        matrices = self.matrix_stores_of(node, loop_vars, body, value, layout, column) \
            if out.dtype.bits == 16 and not row_conditions else None  # stmatrix moves 16-bit elements
        if matrices is not None:
            return matrices
        address = ir.Call("address_of", (ir.BufferLoad(out, first, out.dtype),), ir.dtypes.handle)
        store = ir.Evaluate(ir.Call(writer, (address, lo, hi)))
        if row_conditions:  # the pair's row decides for both of its elements
            store = ir.IfThenElse(ir.logical_and(*(substitute(c, binds[0]) for c in row_conditions)), store)
        return ir.For(jj, ir.const(layout.local_size // 2), store, "unrolled",
                      annotations={"layout": layout.describe(), "pairs": True}, loc=node.loc)

    def row_conditions(self, body, loop_vars, layout) -> tuple:
        """``(store, conditions)`` of a nest's body that is a store under ifs without else: the ifs'
        conditions the loop's ranges do not prove, each of which may use the rows (every loop
        variable but the last) and nothing that reads memory, so that it holds for both elements of
        a pair alike (TileLang's sparse MLA backward stores half of its rows at a time:
        ``if bi_i < BS // 2``); ``(None, [])`` where a condition is always false or uses the column."""
        ranges = {**self.ranges, **{v: (0, n - 1) for v, n in zip(loop_vars, layout.shape)}}
        conditions = []
        while isinstance(body, ir.IfThenElse) and body.else_body is None:
            cond = simplify(body.cond, ranges)
            if isinstance(cond, ir.Const):
                if not cond.value:
                    return None, []
            elif uses_var(cond, loop_vars[-1]) or collect(cond, (ir.BufferLoad, ir.Call)):
                return None, []
            else:
                conditions.append(cond)
            body = body.then_body
        return body, conditions

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
            indices, guard = layout.forward(self.tid, j)
            if guard is not None:
                return None
            # the value may use the loop's variables beside the fragment's element (a causal mask:
            # ``T.if_then_else(row >= col, s[row, col], 0)``): each is element j's own coordinate
            local = FragmentAccess(loop_vars, j, layout, node.loc, self.to_local).visit(value)
            values.append(substitute(local, dict(zip(loop_vars, indices))))
        address = ir.Call("address_of", (ir.BufferLoad(out, start, out.dtype),), ir.dtypes.handle)
        store = ir.Evaluate(ir.Call("tw::store_matrix_x4", (address, *values)))
        return ir.For(mm, ir.const(groups), store, "unrolled",
                      annotations={"layout": layout.describe(), "matrices": True}, loc=node.loc)
