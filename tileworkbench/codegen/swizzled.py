"""Swizzled shared tiles addressed in CUDA: ``tw::swizzled<T, SPAN>(tile, offset)``, the pattern
TMA writes, and where whole periods of the pattern can stay out of it,
``tw::swizzled<T, SPAN>(tile, offset, aligned)`` (``split_swizzle_period``).

``SwizzledAccesses`` is the part of ``cuda.CudaRenderer`` that prints such accesses: it follows the
loops around the statement it renders (which stay loops, which no pragma keeps rolled) and prints
each swizzled element through the split where that pays."""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.visitor import collect


def split_swizzle_period(index: ir.Expr, span: int, dtype, splittable=lambda var: True
                         ) -> tuple[ir.Expr, ir.Expr | None]:
    """``index`` (a swizzled tile's flat element offset) as (the terms the swizzle reads, the terms
    that are whole multiples of its period), or (index, None) where no term is. A swizzle of span
    S bytes XORs bits 4-6 of a byte offset with three bits above them; its pattern repeats every
    8 S bytes, so ``swizzle(a + p) == swizzle(a) + p`` (mod 2^32) for p a multiple of that
    (``tw::swizzled(base, index, aligned)``). Written so, the copies of an unrolled loop that
    differ only in aligned terms (a gather's row blocks, a stage, a panel) share one swizzle: the
    seesaw sparse MLA's producer swizzled each of its 72 cp.async an iteration anew (727 -> 364
    instructions a producer iteration). A term is aligned where it is a constant, or a product
    with a constant factor, that the period's elements divide, and its variables are all
    ``splittable`` (the renderer's: loop variables of loops not rolled by a pragma; a rolled
    loop's, or a name bound from one, stays inside: taking it out leaves the rest the same on every
    iteration, and NVVM then holds one swizzled offset per unrolled copy across the loop, which
    made the ragged GEMMs spill 200 bytes more). Where the aligned terms are all constants the
    offset stays whole (NVVM folds them itself)."""
    if dtype.packed or dtype.storage_bits % 8:
        return index, None
    period = 8 * span // (dtype.storage_bits // 8)  # elements
    terms: list[tuple[int, ir.Expr]] = []

    def flatten(e: ir.Expr, sign: int):
        if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
            flatten(e.a, sign)
            flatten(e.b, sign if e.op == "+" else -sign)
        else:
            terms.append((sign, e))

    def aligned(e: ir.Expr) -> bool:
        value = ir.const_int(e)
        if value is not None:
            return value % period == 0
        return isinstance(e, ir.BinOp) and e.op == "*" and any(
            (c := ir.const_int(x)) is not None and c % period == 0 for x in (e.a, e.b)) and \
            all(splittable(v) for v in collect(e, ir.Var))

    flatten(index, 1)
    whole = [aligned(t) for _, t in terms]
    if all(ir.const_int(t) is not None for (_, t), w in zip(terms, whole) if w):
        return index, None  # constants only: NVVM folds them itself

    def total(parts) -> ir.Expr:
        out = ir.Const(0, index.dtype)
        for sign, term in parts:
            out = ir.binop("+" if sign > 0 else "-", out, term)
        return out

    return (total([t for t, w in zip(terms, whole) if not w]),
            total([t for t, w in zip(terms, whole) if w]))


class SwizzledAccesses:
    """Mixed into the CUDA renderer before ``CStyleRenderer``: ``element`` of a swizzled shared
    tile, and ``s_For`` keeping what ``split_swizzle_period`` needs: the variables of the loops
    around the statement that no pragma keeps rolled, and how many of those loops are not
    unrolled by one (code that runs again and again: outside them, a pipeline's prologue, the
    split buys nothing, and ptxas's register allocation moved for nothing)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # (ids of the loop variables no pragma keeps rolled, how many enclosing loops repeat)
        self._swizzle_loops: tuple = ((), 0)

    def element(self, access) -> str:
        buf = access.buffer
        span = buf.attrs.get("swizzle", 0) if buf.scope == "shared" else 0
        if not span:
            return super().element(access)
        self.offset(access)  # refuses an access left unflattened
        unrollable, repeating = self._swizzle_loops
        swizzled, aligned = split_swizzle_period(access.indices[0], span, buf.dtype, lambda v: id(v) in unrollable) \
            if repeating else (access.indices[0], None)
        name = f"tw::swizzled<{buf.dtype.cpp}, {span}>"
        if aligned is None:
            return f"{name}({self.buffer_name(buf)}, {self.expr(swizzled)})"
        return f"{name}({self.buffer_name(buf)}, {self.expr(swizzled)}, {self.expr(aligned)})"

    def s_For(self, s, d):
        pragma = self.loop_pragma(s)
        outer = self._swizzle_loops
        variables = outer[0] + ((id(s.var),) if pragma != "#pragma unroll 1" else ())
        self._swizzle_loops = (variables, outer[1] + (pragma != "#pragma unroll"))
        try:
            super().s_For(s, d)
        finally:
            self._swizzle_loops = outer
