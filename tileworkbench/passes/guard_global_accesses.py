"""guard_global_accesses: a kernel never reads or writes a global tensor outside its shape.

Expects: tile-level IR after ``infer_fragment_layouts``: the kernel's own ``T.Parallel`` nests are
still loops of kind ``parallel``; tile copies are not lowered yet (they get their own bounds checks
in ``lower_tile_ops``, ``rules.copies``).
Guarantees: each access to a global tensor (in a ``T.Parallel`` nest or not: a ``T.serial`` loop's
store, a scalar read of an index table) whose indices the known
ranges (block indices, loop variables, never re-assigned integer names) do not prove inside the
tensor's shape is guarded (a size known only at launch counts where the grid proves it: a block
index runs below its grid extent, so ``by < batch`` on a grid of ``batch`` rows, ``bx // 2 < S`` on
one of ``2 * S`` columns): a load reads ``in_bounds ? load : 0``, and a store, or a statement
that writes through an element's address (``T.atomic_add(C[i, j], v)``), runs under ``if (in_bounds)``, ``in_bounds`` checking just the dimensions not proven (``i < extent``, and
``0 <= i`` where ``i`` may be negative), after the checks of the loads those indices read (an index
table's own bounds first: ``Out[Idx[k + i]]`` runs under ``0 <= k + i < len(Idx) && 0 <= Idx[k + i] < n``,
so the check never reads outside a tensor either). A condition the kernel already puts around the access
(an ``if`` or the ``T.if_then_else`` it sits in) that is the very check needed counts as proof,
and an ``if`` bounding a name from above (``v + c < n``) narrows its range inside.
Accesses proven inside are left as they are, so kernels whose tiles divide the problem keep their
code byte for byte. With ``tl.disable_safe_memory_legalize`` (TileLang's switch for the same
guards) the pass leaves the IR alone.

Why: TileLang's semantics (its safe-memory-access legalisation): a tile hanging over the edge of a
tensor (``M`` not a multiple of ``block_M``) is written as if it fitted, and the compiler keeps it
inside the tensor. Without the guard the last block's stores land past the end of the output,
in whatever memory follows: a wrong answer elsewhere, or a fault. TileLang guards every global
access of the kernel so, not only those of parallel loops: its DSA example's
``clean_and_maintain_logits`` stores ``Logits[bx, idx]`` in a ``T.serial`` loop for ``idx`` up to
4096 in rows of 256, which faulted here while only ``T.Parallel`` nests were guarded.
"""

from __future__ import annotations

import contextlib
import dataclasses

from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.simplify import interval, narrowed_ranges, simplify
from ..ir.visitor import always_evaluated
from ..target import PassConfigKey
from .manager import register
from .rules.codegen_ranges import CodegenWalk



class _Guard(CodegenWalk):
    """Keeps the ranges as the code generator's walk does (``rules.codegen_ranges``)."""

    def __init__(self, func: ir.PrimFunc):
        super().__init__(func)
        self.known: list[str] = []  # the text of each condition that holds where the walk is
        self.addressed: list[ir.Expr] = []  # checks of the addresses the current statement takes
        # a block index's last value where the grid's extent is a size known at launch only
        self.last_block = {v: simplify(g - 1) for v, g in zip(func.launch.block_vars, func.launch.grid)
                           if ir.const_int(g) is None}
        self.let_values: dict = {}  # never re-assigned integer names -> their values

    def visit_LetStmt(self, node: ir.LetStmt):
        node = super().visit_LetStmt(node)
        if not node.var.dtype.is_float and node.var not in self.reassigned:
            self.let_values[node.var] = node.value
        return node

    def bound(self, e: ir.Expr, upper: bool) -> ir.Expr | None:
        """An expression ``e`` never exceeds (``upper``) or never falls below, in the sizes the kernel
        is launched with: a block index runs from 0 to its grid extent's last value, a loop variable
        or name over its known range, a name as its value; sums, differences, products by constants
        and floor divisions by positive constants follow. None where no such bound is known."""
        if isinstance(e, ir.Const):
            return e
        if isinstance(e, ir.Var):
            if e in self.last_block:
                return self.last_block[e] if upper else ir.const(0)
            if e in self.let_values:
                return self.bound(self.let_values[e], upper)
            lo, hi = self.ranges.get(e, (None, None))
            known = hi if upper else lo
            return None if known is None else ir.const(known, e.dtype)
        if not isinstance(e, ir.BinOp):
            return None
        if e.op == "+":
            a, b = self.bound(e.a, upper), self.bound(e.b, upper)
            return None if a is None or b is None else a + b
        if e.op == "-":
            a, b = self.bound(e.a, upper), self.bound(e.b, not upper)
            return None if a is None or b is None else a - b
        if e.op == "*":
            for factor, other in ((e.a, e.b), (e.b, e.a)):
                c = ir.const_int(factor)
                if c is not None:
                    inner = self.bound(other, upper if c >= 0 else not upper)
                    return None if inner is None else inner * c
            return None
        if e.op == "//" and (d := ir.const_int(e.b)) is not None and d > 0:
            inner = self.bound(e.a, upper)
            return None if inner is None else inner // d
        return None

    def proven(self, difference: ir.Expr | None) -> bool:
        """``difference`` (a bound's distance from a limit) simplifies to a constant of at least 0."""
        value = ir.const_int(simplify(difference)) if difference is not None else None
        return value is not None and value >= 0

    # ---- scopes ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def assuming(self, cond: ir.Expr | None):
        """Within: ``cond``'s conjuncts hold (nothing more when it is None)."""
        depth = len(self.known)
        if cond is not None:
            self.known += [expr_text(c) for c in ir.conjuncts(cond)]
        try:
            yield
        finally:
            del self.known[depth:]

    def _under(self, cond: ir.Expr, node):
        with self.assuming(cond):
            return self.visit(node)

    def narrowed(self, cond: ir.Expr) -> dict:
        """Narrows the ranges of the names ``cond`` bounds from above (``ir.simplify.narrowed_ranges``);
        returns what to restore."""
        inside = narrowed_ranges(self.ranges, cond)
        saved = {v: self.ranges[v] for v, r in inside.items() if r != self.ranges[v]}
        self.ranges.update({v: inside[v] for v in saved})
        return saved

    def visit_IfThenElse(self, node: ir.IfThenElse):
        cond = self.visit(node.cond)
        saved = self.narrowed(cond)
        try:
            then_body = self._under(cond, node.then_body)
        finally:  # (a name the branch re-assigns has no range after it: it stays forgotten)
            self.ranges.update({v: r for v, r in saved.items() if v in self.ranges})
        else_body = self.visit(node.else_body)
        if cond is node.cond and then_body is node.then_body and else_body is node.else_body:
            return node
        return dataclasses.replace(node, cond=cond, then_body=then_body, else_body=else_body)

    def visit_Select(self, node: ir.Select):
        cond = self.visit(node.cond)
        a, b = self._under(cond, node.a), self.visit(node.b)
        if cond is node.cond and a is node.a and b is node.b:
            return node
        return dataclasses.replace(node, cond=cond, a=a, b=b)

    # ---- accesses --------------------------------------------------------------------------
    def in_bounds(self, buffer: ir.Buffer, indices) -> ir.Expr | None:
        """The checks ``indices`` need to lie inside ``buffer`` (None: proven, or not global)."""
        if buffer.scope != "global":
            return None
        checks = []
        for index, extent in zip(indices, buffer.shape):
            lo, hi = interval(simplify(index, self.ranges), self.ranges)
            size = ir.const_int(extent)
            if (lo is None or lo < 0) and not self.proven(self.bound(index, upper=False)):
                checks.append(ir.cmp(">=", index, ir.const(0, index.dtype)))
            if (hi is None or size is None or hi >= size) and not (
                    (top := self.bound(index, upper=True)) is not None and self.proven(extent - 1 - top)):
                checks.append(ir.cmp("<", index, extent))
        return ir.logical_and(*[c for c in checks if expr_text(c) not in self.known])

    def visit_BufferLoad(self, node: ir.BufferLoad):
        node = self.generic_visit(node)
        check = self.in_bounds(node.buffer, node.indices)
        if check is None:
            return node
        zero = ir.zero(node.dtype)
        return ir.Select(check, node, zero, node.dtype)

    def access_checks(self, buffer: ir.Buffer, indices) -> tuple[list, tuple]:
        """``(checks, indices)`` for a statement's own access (a store, or an address it takes): the
        checks in the order they must be tested, then the indices as they read under them. First
        each load the indices always read (inner loads first: ``Idx[k + i]`` in ``Out[Idx[k + i]]``)
        must lie inside its own tensor before it is read, then the access itself. Checked on the
        raw indices alone, the statement's condition would read ``Idx[k + i]`` past its end to
        decide whether the store may run (a load under a select is guarded in place, as ever)."""
        checks: list = []
        for load in _loads_always_read(indices):
            with self.assuming(ir.logical_and(*checks)):
                check = self.in_bounds(load.buffer, tuple(self.visit(i) for i in load.indices))
            if check is not None:
                checks.append(check)
        with self.assuming(ir.logical_and(*checks)):
            indices = tuple(self.visit(i) for i in indices)
            check = self.in_bounds(buffer, indices)
        return checks + ([] if check is None else [check]), indices

    def visit_Call(self, node: ir.Call):
        if node.name != "address_of" or not isinstance(node.args[0], ir.BufferLoad):
            return self.generic_visit(node)
        target = node.args[0]  # not a read: the statement around it must not run out of bounds
        checks, indices = self.access_checks(target.buffer, target.indices)
        self.addressed += checks
        if all(a is b for a, b in zip(indices, target.indices)):
            return node
        return dataclasses.replace(node, args=(dataclasses.replace(target, indices=indices),) + tuple(node.args[1:]))

    def _guarded_statement(self, node, own_check):
        """``node`` visited, under ``if`` the checks of its own access and of the addresses it takes."""
        outer, self.addressed = self.addressed, []
        try:
            with self.assuming(own_check):  # what a store reads at its own indices needs no second check
                stmt = self.generic_visit(node)
            check = ir.logical_and(own_check, *self.addressed)
        finally:
            self.addressed = outer
        return stmt if check is None else ir.IfThenElse(check, stmt, loc=node.loc)

    def visit_BufferStore(self, node: ir.BufferStore):
        checks, _ = self.access_checks(node.buffer, node.indices)
        return self._guarded_statement(node, ir.logical_and(*checks))

    def visit_Evaluate(self, node: ir.Evaluate):
        return self._guarded_statement(node, None)


def _loads_always_read(indices) -> list:
    """The loads ``indices`` read whenever they are evaluated, inner loads before the loads whose
    indices hold them (a load under a select is read only where the select picks it)."""
    return [e for i in indices for e in always_evaluated(i) if isinstance(e, ir.BufferLoad)]


@register("guard_global_accesses", "tile")
def guard_global_accesses(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if ctx.flag(PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS):
        return func
    return dataclasses.replace(func, body=_Guard(func).visit(func.body))
