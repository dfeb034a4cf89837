"""Index-expression simplifier of our own: affine canonical form plus floor-div/mod rules.

``simplify(e, ranges)`` rewrites integer expressions into a sum of ``coef * atom`` terms plus a
constant, where atoms are variables or non-affine sub-expressions, and applies
``(q*c + r) // c == q + r // c`` and ``(q*c + r) % c == r % c`` (exact for floor division), then
drops ``r // c`` and keeps ``r`` for ``r % c`` when interval analysis proves ``0 <= r < c``.
When ``r`` is not in range, a finer split may be: with ``d`` dividing ``c``, terms whose
coefficients ``d`` divides (``coarse``) plus the rest (``fine``) proven ``0 <= fine < d`` give
``(coarse + fine) // c == coarse // c`` and ``(coarse + fine) % c == coarse % c + fine`` (so a
column ``16*i + 8*(lane/16)`` splits into its loop part and its thread part under a 64-wide panel).
``ranges`` maps Vars to inclusive ``(lo, hi)`` bounds (loop and thread indices).
Comparisons that the intervals decide fold to constants.
"""

from __future__ import annotations

import math

from . import nodes as ir
from .printer import expr_text
from .visitor import IRMutator, reassigned_vars

Interval = tuple  # (lo, hi) with None for unbounded


# What CUDA guarantees of the built-in indices that lowering passes use verbatim (``ir.Raw``).
HARDWARE_RANGES = {ir.HW_BLOCK.text: (0, None), ir.HW_BLOCKS.text: (1, None)}


def narrowed_ranges(ranges: dict, cond: ir.Expr) -> dict:
    """``ranges`` (name -> inclusive bounds) where ``cond`` holds, as far as its conjuncts bound one
    name each: a comparison whose sides differ by ``c * v + k`` for one name ``v`` (``c``, ``k``
    constants) bounds ``v`` from below or above (the pipeline's ``if (k + 1 < 8)`` around the copies
    it issues ahead, the sparse MLA's ``if bi_i < 16``, ``if bx < bx + bx``: ``bx >= 1``). Only names
    ``ranges`` has, only where the bound is tighter, and never to an empty range."""
    out = dict(ranges)
    for c in ir.conjuncts(cond):
        if not (isinstance(c, ir.BinOp) and c.op in ("<", "<=", ">", ">=")) or c.a.dtype.is_float \
                or c.b.dtype.is_float:
            continue
        small, big = (c.a, c.b) if c.op in ("<", "<=") else (c.b, c.a)
        form = Affine.of(simplify(big - small))  # the condition: big - small >= need
        if len(form.terms) != 1:
            continue
        ((atom, coef),) = form.terms.values()
        if not isinstance(atom, ir.Var) or atom not in out or coef == 0:
            continue
        need = (1 if c.op in ("<", ">") else 0) - form.const  # coef * v >= need
        lo, hi = out[atom]
        if coef > 0:
            lo = max(lo, -(-need // coef)) if lo is not None else -(-need // coef)
        else:
            hi = min(hi, need // coef) if hi is not None else need // coef
        if lo is None or hi is None or lo <= hi:
            out[atom] = (lo, hi)
    return out


def interval(e: ir.Expr, ranges: dict) -> Interval:
    """Inclusive bounds of an integer expression (None where unknown)."""
    if isinstance(e, ir.Const):
        if isinstance(e.value, bool):
            return (int(e.value), int(e.value))
        return (e.value, e.value) if isinstance(e.value, int) else (None, None)
    if isinstance(e, ir.Var):
        return ranges.get(e, (None, None))
    if isinstance(e, ir.Raw):
        return HARDWARE_RANGES.get(e.text, (None, None))
    if isinstance(e, ir.BinOp) and not e.dtype.is_float:
        a, b = interval(e.a, ranges), interval(e.b, ranges)
        exact = _one_value(e.op, a, b)
        if exact is not None:  # one value each side (a grid of one block): the result's own
            return (exact, exact)
        if e.op == "+":
            return (_add(a[0], b[0]), _add(a[1], b[1]))
        if e.op == "-":
            return (_sub(a[0], b[1]), _sub(a[1], b[0]))
        if e.op == "*" and None not in a + b:
            prods = [x * y for x in a for y in b]
            return (min(prods), max(prods))
        if e.op == "*" and a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
            return (a[0] * b[0], None)  # non-negative factors, one without an upper bound
        if e.op in ("//", "truncdiv") and b[0] is not None and b[0] == b[1] and b[0] > 0:
            return (None if a[0] is None else a[0] // b[0], None if a[1] is None else a[1] // b[0])
        if e.op in ("%", "truncmod") and b[0] is not None and b[0] == b[1] and b[0] > 0:
            if a[0] is not None and a[0] >= 0 and a[1] is not None and a[1] < b[0]:
                return a
            # floor-mod by a positive constant: a multiple of what the dividend and the divisor share
            # (``(tx * 4) % 128`` is at most 124)
            return (0, b[0] - math.gcd(_common_factor(e.a), b[0]))
        if e.op in ("min", "max") and None not in a + b:
            f = min if e.op == "min" else max
            return (f(a[0], b[0]), f(a[1], b[1]))
        if e.op in ir.COMPARISONS or e.op in ir.LOGICAL or e.dtype.kind == "bool":
            return (0, 1)
        shift = b[0] if b[0] is not None and b[0] == b[1] and 0 <= b[0] < 31 else None
        if e.op == "<<" and shift is not None and None not in a:
            return (a[0] << shift, a[1] << shift)  # a multiplication by 2^shift
        if e.op == ">>" and shift is not None and a[0] is not None and a[0] >= 0:
            return (a[0] >> shift, None if a[1] is None else a[1] >> shift)
        if e.op == "&":  # at most either non-negative operand, and not negative
            tops = [x[1] for x in (a, b) if x[0] is not None and x[0] >= 0 and x[1] is not None]
            if tops:
                return (0, min(tops))
        if e.op in ("|", "^") and None not in a + b:
            if a[0] >= 0 and b[0] >= 0:  # both non-negative: below the next power of two
                top = (1 << max(a[1], b[1]).bit_length()) - 1
                return (max(a[0], b[0]) if e.op == "|" else 0, top)
    return (None, None)


# The operations whose bounds ``interval`` does not work out exactly from one-valued sides itself
# (+, -, *, min and max it does): floor division and modulo by any divisor, shifts, bit operations.
_EXACT = {"//": lambda x, y: x // y if y else None, "%": lambda x, y: x % y if y else None,
          "<<": lambda x, y: x << y if 0 <= y < 31 else None, ">>": lambda x, y: x >> y if 0 <= y < 31 else None,
          "&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y}


def _one_value(op: str, a: Interval, b: Interval) -> int | None:
    """``a op b`` where each side holds one value (floor division and modulo, as the IR's ``//``
    and ``%``); None where either side may hold more, or the operation is not one of ``_EXACT``'s."""
    if op not in _EXACT or None in a + b or a[0] != a[1] or b[0] != b[1]:
        return None
    return _EXACT[op](a[0], b[0])


def _common_factor(e: ir.Expr) -> int:
    """A factor every value of ``e`` has: the gcd of its affine coefficients and constant."""
    aff = Affine.of(e)
    return math.gcd(aff.const, *(coef for _, coef in aff.terms.values()))


def _add(x, y):
    return None if x is None or y is None else x + y


def _sub(x, y):
    return None if x is None or y is None else x - y


def is_multiple_of(e: ir.Expr, v: int) -> bool:
    """Provably a multiple of v: every affine coefficient and the constant are."""
    aff = Affine.of(e)
    return aff.const % v == 0 and all(coef % v == 0 for _, coef in aff.terms.values())


def is_nonnegative(e: ir.Expr, ranges: dict) -> bool:
    lo = interval(e, ranges)[0]
    return lo is not None and lo >= 0


# ---- affine form ---------------------------------------------------------------------------


class Affine:
    """sum(coef * atom) + const, atoms keyed by their printed text."""

    def __init__(self, terms=None, const=0):
        self.terms: dict[str, list] = terms or {}  # key -> [atom, coef]
        self.const = const

    @staticmethod
    def of(e: ir.Expr) -> "Affine":
        if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
            return Affine(const=e.value)
        if isinstance(e, ir.BinOp) and e.op in ("+", "-"):
            a, b = Affine.of(e.a), Affine.of(e.b)
            return a.plus(b, 1 if e.op == "+" else -1)
        if isinstance(e, ir.BinOp) and e.op == "*":
            a, b = Affine.of(e.a), Affine.of(e.b)
            if not a.terms:
                return b.scaled(a.const)
            if not b.terms:
                return a.scaled(b.const)
        return Affine({_key(e): [e, 1]})

    def plus(self, other: "Affine", sign: int = 1) -> "Affine":
        terms = {k: list(v) for k, v in self.terms.items()}
        for k, (atom, coef) in other.terms.items():
            if k in terms:
                terms[k][1] += sign * coef
            else:
                terms[k] = [atom, sign * coef]
        return Affine({k: v for k, v in terms.items() if v[1] != 0}, self.const + sign * other.const)

    def scaled(self, c: int) -> "Affine":
        if c == 0:
            return Affine()
        return Affine({k: [a, coef * c] for k, (a, coef) in self.terms.items()}, self.const * c)

    def split(self, c: int) -> tuple["Affine", "Affine"]:
        """(q, r) with self == q*c + r, q taking every term whose coefficient c divides."""
        q, r = Affine(const=0), Affine(const=0)
        for k, (atom, coef) in self.terms.items():
            if coef % c == 0:
                q.terms[k] = [atom, coef // c]
            else:
                r.terms[k] = [atom, coef]
        q.const, r.const = divmod(self.const, c)
        return q, r

    def remainders_folded(self, dtype) -> "Affine":
        """``k*x - k*c*(x // c)`` as ``k*(x % c)`` (exact for floor division), wherever the sum holds
        both (an index taken apart and put back: ``bs - (bs // 64) * 64``), repeated while it applies."""
        form = self
        while True:
            for key, (atom, coef) in form.terms.items():
                c = ir.const_int(atom.b) if isinstance(atom, ir.BinOp) and atom.op == "//" else None
                if not c or c < 0 or coef % c:
                    continue
                x = Affine.of(atom.a).scaled(-coef // c)
                if all(k in form.terms and form.terms[k][1] == v for k, (_, v) in x.terms.items()) and x.terms:
                    rest = form.plus(x, -1).plus(Affine({key: [atom, coef]}), -1)
                    form = rest.plus(Affine.of(ir.BinOp("%", atom.a, atom.b, dtype)).scaled(-coef // c))
                    break
            else:
                return form

    def to_expr(self, dtype) -> ir.Expr:
        out = None
        # Stable order: the order atoms first appeared keeps output close to what users wrote.
        for atom, coef in self.terms.values():
            if coef == 1:
                term = atom
            elif coef == -1 and out is not None:
                out = ir.BinOp("-", out, atom, dtype)
                continue
            else:
                if out is not None and coef < 0:
                    out = ir.BinOp("-", out, ir.binop("*", atom, ir.Const(-coef, dtype)), dtype)
                    continue
                term = ir.binop("*", atom, ir.Const(coef, dtype))
            out = term if out is None else ir.BinOp("+", out, term, dtype)
        if out is None:
            return ir.Const(self.const, dtype)
        if self.const > 0:
            out = ir.BinOp("+", out, ir.Const(self.const, dtype), dtype)
        elif self.const < 0:
            out = ir.BinOp("-", out, ir.Const(-self.const, dtype), dtype)
        return out


def loop_range(node: ir.For, ranges: dict) -> Interval:
    """Inclusive bounds of a loop's variable over the iterations it runs, from the least start to
    the greatest last value ``start + extent - 1``, simplified first so that a start the extent
    subtracts cancels (a causal loop from ``by`` with extent ``16 - by`` stays within 0..15)."""
    start, extent = ir.const_int(node.start), ir.const_int(node.extent)
    if start is not None and extent is not None:
        return (start, start + extent - 1)
    int32 = ir.dtypes.int32
    last = simplify(ir.BinOp("-", ir.BinOp("+", node.start, node.extent, int32), ir.const(1), int32), ranges)
    return (interval(node.start, ranges)[0], interval(last, ranges)[1])


def _key(e: ir.Expr) -> str:
    if isinstance(e, ir.Var):
        return f"var:{id(e)}"
    text = expr_text(e)
    if "tw_rng." in text:  # a random draw (ir.RNG_DRAWS): two that print alike are two numbers, not one term
        return f"draw:{id(e)}"
    return text


class RangeTracker:
    """For IR walkers: ``self.ranges`` (Var -> inclusive (lo, hi)) holds the loop variables and the
    never re-assigned integer scalars the walk has passed, as ``track_loop`` / ``track_let`` see
    their ``For`` and ``LetStmt``. ``reassigned`` must be the scalars some ``Assign`` changes (their
    LetStmt value is only the first, so it gives them no range)."""

    ranges: dict
    reassigned: set | None

    def track_loop(self, node: ir.For):
        lo, hi = loop_range(node, self.ranges)
        if lo is not None and (hi is None or lo <= hi):
            self.ranges[node.var] = (lo, hi)

    def track_let(self, node: ir.LetStmt):
        if not node.var.dtype.is_float and node.var not in (self.reassigned or ()):
            lo, hi = interval(node.value, self.ranges)
            if lo is not None or hi is not None:
                self.ranges[node.var] = (lo, hi)

    def forget(self, var: ir.Var):
        self.ranges.pop(var, None)  # a re-assigned scalar has no known range


def enter_thread_scope(ranges: dict, node: ir.ThreadScope, tid: ir.Var | None) -> dict:
    """Inside ``node`` its thread index ranges over its threads and the block's ``tid`` over the
    scope's part of the block; returns what :func:`leave_thread_scope` restores."""
    saved = {v: ranges.get(v) for v in (node.var, tid) if v is not None}
    ranges[node.var] = (0, node.count - 1)
    if tid is not None:
        ranges[tid] = node.thread_range
    return saved


def leave_thread_scope(ranges: dict, saved: dict):
    for v, r in saved.items():
        if r is None:
            ranges.pop(v, None)
        else:
            ranges[v] = r


class _Simplifier(RangeTracker, IRMutator):
    def __init__(self, ranges):
        self.ranges = dict(ranges or {})
        # Found on the first statement visited, the root.
        self.reassigned: set | None = None

    def visit(self, node):
        if self.reassigned is None and isinstance(node, ir.Stmt):
            self.reassigned = reassigned_vars(node)
        return super().visit(node)

    def visit_For(self, node):
        self.track_loop(node)
        return self.generic_visit(node)

    def visit_LetStmt(self, node):
        node = self.generic_visit(node)
        self.track_let(node)
        return node

    def visit_Assign(self, node):
        self.forget(node.var)
        return self.generic_visit(node)

    def visit_Select(self, node):
        node = self.generic_visit(node)
        if isinstance(node, ir.Select) and isinstance(node.cond, ir.Const):  # decided: the side it takes
            return node.a if node.cond.value else node.b
        return node

    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        if not isinstance(node, ir.BinOp) or node.dtype.is_float:
            return node
        if node.a.dtype.is_float or node.b.dtype.is_float:
            return node
        op = node.op
        if op in ("+", "-", "*"):
            return Affine.of(node).remainders_folded(node.dtype).to_expr(node.dtype)
        c = ir.const_int(node.b)
        if op in ("//", "%") and c is not None and c > 0:
            total = Affine.of(node.a)
            q, r = total.split(c)
            r_expr = r.to_expr(node.dtype)
            lo, hi = interval(r_expr, self.ranges)
            r_in_range = lo is not None and hi is not None and 0 <= lo and hi < c
            if not r_in_range and r.terms:
                finer = self.finer_split(total, c, node)
                if finer is not None:
                    return finer
            if op == "//":
                rest = Affine() if r_in_range else Affine.of(ir.BinOp("//", r_expr, node.b, node.dtype))
                if not q.terms and not r_in_range and not r.terms:
                    return ir.Const(r.const // c + q.const, node.dtype)
                return q.plus(rest).to_expr(node.dtype)
            if r_in_range:
                return r_expr
            if not r.terms:
                return ir.Const(r.const % c, node.dtype)
            return ir.BinOp("%", r_expr, node.b, node.dtype)
        if op in ir.COMPARISONS:
            diff = ir.binop("-", node.a, node.b)
            diff = self.visit(diff) if isinstance(diff, ir.BinOp) else diff
            lo, hi = interval(diff, self.ranges)
            decided = _decide(op, lo, hi)
            if decided is not None:
                return ir.Const(decided, node.dtype)
        if op in ("min", "max"):
            (alo, ahi), (blo, bhi) = interval(node.a, self.ranges), interval(node.b, self.ranges)
            if op == "min" and ahi is not None and blo is not None and ahi <= blo:
                return node.a
            if op == "min" and bhi is not None and alo is not None and bhi <= alo:
                return node.b
            if op == "max" and alo is not None and bhi is not None and alo >= bhi:
                return node.a
            if op == "max" and blo is not None and ahi is not None and blo >= ahi:
                return node.b
        if op == "and":
            for x, y in ((node.a, node.b), (node.b, node.a)):
                if isinstance(x, ir.Const):
                    return y if x.value else ir.Const(False, node.dtype)
        return node

    def finer_split(self, total: Affine, c: int, node: ir.BinOp):
        """``node`` (``total // c`` or ``total % c``) rewritten with the largest proper divisor ``d``
        of ``c`` that splits ``total`` into ``coarse`` (a multiple of ``d``) and ``fine`` with
        ``0 <= fine < d`` (module doc), or None. ``coarse`` must keep a term (else nothing is
        gained); ``fine`` may be a constant (``(2*j + 1) // 4 == (2*j) // 4``)."""
        # The only useful d: c's common divisors with a term's coefficient (each makes some terms
        # coarse); the largest first.
        for d in sorted({math.gcd(coef, c) for _, coef in total.terms.values()} - {1, c}, reverse=True):
            coarse, fine = total.split(d)
            if not coarse.terms or (not fine.terms and fine.const == 0):
                continue  # nothing to gain, or nothing split off (which would recurse forever)
            fine_expr = fine.to_expr(node.dtype)
            lo, hi = interval(fine_expr, self.ranges)
            if lo is None or hi is None or lo < 0 or hi >= d:
                continue
            coarse_expr = coarse.scaled(d).to_expr(node.dtype)
            if node.op == "//":
                return self.visit(ir.BinOp("//", coarse_expr, node.b, node.dtype))
            return ir.binop("+", self.visit(ir.BinOp("%", coarse_expr, node.b, node.dtype)), fine_expr)
        return None


def _decide(op, lo, hi):
    """Truth of ``diff op 0`` when the interval of diff decides it, else None."""
    if lo is None and hi is None:
        return None
    checks = {
        "<": (hi is not None and hi < 0, lo is not None and lo >= 0),
        "<=": (hi is not None and hi <= 0, lo is not None and lo > 0),
        ">": (lo is not None and lo > 0, hi is not None and hi <= 0),
        ">=": (lo is not None and lo >= 0, hi is not None and hi < 0),
        "==": (lo == 0 and hi == 0, (lo is not None and lo > 0) or (hi is not None and hi < 0)),
        "!=": ((lo is not None and lo > 0) or (hi is not None and hi < 0), lo == 0 and hi == 0),
    }
    true, false = checks[op]
    if true:
        return True
    if false:
        return False
    return None


def launch_ranges(func: ir.PrimFunc) -> dict:
    """Ranges of the thread index (every thread the hardware launches) and the block indices."""
    ranges = {func.launch.thread_var: (0, func.launch.total_threads - 1)}
    for var, extent in zip(func.launch.block_vars, func.launch.grid):
        n = ir.const_int(extent)
        ranges[var] = (0, n - 1 if n is not None else None)
    return ranges


def simplify(node, ranges: dict | None = None):
    """Simplify every integer expression under ``node`` (an Expr or a Stmt)."""
    return _Simplifier(ranges).visit(node)
