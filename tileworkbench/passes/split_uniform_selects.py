"""split_uniform_selects: a ``T.Parallel`` nest whose select decides the same way for the whole tile
in most iterations gets that decision made once, per tile, instead of once per element.

Causal attention's mask is the example: ``acc_s[i, j] = T.if_then_else(bx * 128 + i >= k * 128 + j,
0, -inf)`` is true for every element of every key tile below the diagonal and false for every one
above it; only the diagonal tile needs the comparison per element (FlashAttention-3 masks only
there). The same holds for a sequence's ragged last tile (``k * block_N + j >= seq_len``).

Expects: lowered tile ops; parallel nests not yet spread over the threads (it runs right before
``partition_parallel_loops``).
Guarantees: a perfectly nested parallel loop nest with constant extents whose body holds a select
``T.if_then_else(lhs OP rhs, a, b)`` (OP one of <, <=, >, >=), where ``lhs - rhs`` is affine in the
nest's loop variables with constant coefficients and otherwise uses only the block indices and the
variables of enclosing serial loops (the same value in every thread of the block), becomes

    if <true for every element>:  the nest with the select replaced by a
    elif <false for every element>:  the nest with the select replaced by b
    else:  the nest as written

The two conditions are the comparison at the nest's extreme corners (the smallest and largest
``lhs - rhs`` over the tile), so every element takes the branch the select would have given it:
the result is unchanged, element for element. One select per nest (the first found); a nest whose
select is already decided by its constants is left to ``simplify``.
"""

from __future__ import annotations

from ..ir import nodes as ir
from ..ir.simplify import Affine, simplify
from ..ir.visitor import IRMutator, collect, with_fresh_bindings
from .manager import register
from .rules.fragments import parallel_nest

COMPARISONS = ("<", "<=", ">", ">=")


@register("split_uniform_selects", "lower")
def split_uniform_selects(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    uniform = set(func.launch.block_vars)
    return func.with_body(_Splitter(uniform).visit(func.body))


class _Splitter(IRMutator):
    def __init__(self, uniform: set):
        self.uniform = set(uniform)  # grows with the serial loops we are inside

    def visit_For(self, node):
        if node.kind == "parallel":
            return _split(node, self.uniform)
        if node.kind != "serial":
            return self.generic_visit(node)  # an unrolled or vectorised loop's variable differs per element
        added = node.var not in self.uniform
        self.uniform.add(node.var)
        try:
            return self.generic_visit(node)
        finally:
            if added:
                self.uniform.discard(node.var)


def _split(nest: ir.For, uniform: set):
    loops, body = parallel_nest(nest)
    ranges = {}
    for loop in loops:
        start, extent = ir.const_int(loop.start), ir.const_int(loop.extent)
        if start is None or extent is None or extent < 1:
            return nest
        ranges[loop.var] = (start, start + extent - 1)
    for select in collect(body, ir.Select):
        decided = corner_conditions(select.cond, ranges, uniform)
        if decided is not None:
            all_true, all_false = decided
            return ir.IfThenElse(all_true, _replaced(nest, select, select.a),
                                 ir.IfThenElse(all_false, _replaced(nest, select, select.b), nest))
    return nest


def corner_conditions(cond: ir.Expr, ranges: dict, uniform: set):
    """(true for every element, false for every element) as expressions of uniform values only,
    or None where the condition is not such a comparison."""
    if not (isinstance(cond, ir.BinOp) and cond.op in COMPARISONS) or cond.a.dtype.is_float:
        return None
    diff = Affine.of(ir.BinOp("-", cond.a, cond.b, cond.a.dtype))
    low = high = diff.const
    rest = Affine(const=0)
    varies = False
    for key, (atom, coef) in diff.terms.items():
        if isinstance(atom, ir.Var) and atom in ranges:
            lo, hi = ranges[atom]
            low += min(coef * lo, coef * hi)
            high += max(coef * lo, coef * hi)
            varies = True
        elif all(v in uniform for v in collect(atom, ir.Var)) and not collect(atom, ir.BufferLoad):
            rest.terms[key] = [atom, coef]
        else:
            return None  # depends on the thread, a value loaded, or a name bound in the nest
    if not varies:
        return None
    dtype = cond.a.dtype

    def margin(const):  # lhs - rhs at a corner, as an expression of the uniform terms
        return Affine(dict(rest.terms), const).to_expr(dtype)

    zero = ir.Const(0, dtype)
    smallest, largest = margin(low), margin(high)
    if cond.op == ">=":
        return simplify(ir.cmp(">=", smallest, zero)), simplify(ir.cmp("<", largest, zero))
    if cond.op == ">":
        return simplify(ir.cmp(">", smallest, zero)), simplify(ir.cmp("<=", largest, zero))
    if cond.op == "<=":
        return simplify(ir.cmp("<=", largest, zero)), simplify(ir.cmp(">", smallest, zero))
    return simplify(ir.cmp("<", largest, zero)), simplify(ir.cmp(">=", smallest, zero))


class _ReplaceOne(IRMutator):
    def __init__(self, target: ir.Select, value: ir.Expr):
        self.target, self.value = target, value

    def visit_Select(self, node):
        return self.value if node is self.target else self.generic_visit(node)


def _replaced(nest: ir.For, select: ir.Select, value: ir.Expr) -> ir.For:
    """The nest with ``select`` replaced by ``value``, its loops binding fresh variables (each
    loop variable stays bound by exactly one loop)."""
    return with_fresh_bindings(_ReplaceOne(select, value).visit(nest))
