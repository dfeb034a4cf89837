"""scalarize_loop_temporaries: a thread's array that only carries a value within one loop iteration becomes a scalar.

Phase: lower, last (thread-level code: fragments are per-thread arrays, vector copies take addresses).
Expects: lowered IR; thread-local arrays (``scope == "local"``) declared by ``Allocate``.
Guarantees: an array whose every access is an element load or store in a straight-line statement
(a store, a scalar declaration or assignment, a call evaluated for its effect) directly in the body
of a loop, where in each such loop body every access names one element (the same index expressions
of constants and variables, none re-assigned in the body, no value read from memory) and the first
is a store whose value does not read the array, and which nothing reads as memory (no address
taken, as a vector copy does; no raw C++ text naming it, as a tensor-core call names the register
fragment it reads), is replaced, loop by loop, by one scalar: the first store declares it, later
stores assign it, loads read it; its declaration goes. Every value read was written earlier in the
same iteration, so nothing flows between iterations or loops through the array, and the scalar
holds what the element held (a 16-bit or FP8 element's rounding included: the store's value is
cast to the array's type, also where its type is that already, since such arithmetic runs in
float32).
Why: TileLang's Hadamard example keeps each shuffled partner value in a 128-element array indexed
by the loop variable; NVRTC took 0.51 s on that kernel and 0.33 s with a scalar instead
(docs/experiments.md, "Cold compile: where the time goes").
"""

from __future__ import annotations

import dataclasses
import re

from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.visitor import IRMutator, collect, reassigned_vars
from .manager import register

# statements that evaluate expressions and hold no other statement
_STRAIGHT = (ir.BufferStore, ir.LetStmt, ir.Assign, ir.Evaluate)


def _by_buffer(node, buffers: dict) -> dict:
    """The loads and stores under ``node`` of the buffers in ``buffers`` (id -> buffer), by buffer
    id, each in pre-order."""
    out: dict = {}
    for n in collect(node, (ir.BufferLoad, ir.BufferStore)):
        if id(n.buffer) in buffers:
            out.setdefault(id(n.buffer), []).append(n)
    return out


def _candidates(func) -> dict:
    """The thread arrays (id -> buffer) that nothing reads as memory: no address taken
    (``address_of``: a vector copy), not handed on as a buffer, not named in raw C++ text (a
    tensor-core call names the register fragment it reads). One walk over the function."""
    local = {id(a.buffer): a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.scope == "local"}
    if not local:
        return {}
    mentions, accesses, addressed, raw = {}, {}, set(), []
    for n in collect(func.body, (ir.Buffer, ir.BufferLoad, ir.BufferStore, ir.Call, ir.Raw)):
        if isinstance(n, ir.Buffer):
            mentions[id(n)] = mentions.get(id(n), 0) + 1
        elif isinstance(n, (ir.BufferLoad, ir.BufferStore)):
            accesses[id(n.buffer)] = accesses.get(id(n.buffer), 0) + 1
        elif isinstance(n, ir.Raw):
            raw.append(n.text)
        elif n.name == "address_of":
            addressed.update(id(a.buffer) for a in n.args if isinstance(a, ir.BufferLoad))
    text = "\n".join(raw)
    return {key: b for key, b in local.items()
            if key not in addressed
            and mentions.get(key, 0) == accesses.get(key, 0) + 1  # each access's and the declaration's
            and not re.search(rf"\b{re.escape(b.name)}\b", text)}


def _element_key(access) -> tuple:
    """Which element an access names, as text and the identity of its variables."""
    return (tuple(expr_text(i) for i in access.indices),
            frozenset(id(v) for i in access.indices for v in collect(i, ir.Var)))


def _carries_within_iterations(loop, buffer, found: list) -> bool:
    """Whether ``found``, the accesses of ``buffer`` in ``loop``'s straight-line statements (all of
    its accesses in the body), name one element and start with a store that reads none of it."""
    first = found[0]
    if not isinstance(first, ir.BufferStore):
        return False  # the iteration reads before it writes
    if any(n.buffer is buffer for part in (first.value, *first.indices) for n in collect(part, ir.BufferLoad)):
        return False
    if len({_element_key(a) for a in found}) != 1:
        return False
    if any(collect(i, (ir.BufferLoad, ir.Call, ir.Raw)) for i in first.indices):
        return False  # an index read from memory (a kernel variable is a one-element array) may change
    index_vars = {v for i in first.indices for v in collect(i, ir.Var)}
    return not index_vars & reassigned_vars(loop.body)


def _plans(func) -> dict:
    """id(loop) -> [buffer]: the loops in whose bodies each array becomes a scalar; an array is in
    none unless every access of it is in such a loop's straight-line statements."""
    candidates = _candidates(func)
    if not candidates:
        return {}
    total = {key: len(found) for key, found in _by_buffer(func.body, candidates).items()}
    covered: dict = {}
    plans: dict = {}
    rejected: set = set()
    for loop in collect(func.body, ir.For):
        straight: dict = {}
        for stmt in ir.statements(loop.body):
            if isinstance(stmt, _STRAIGHT):
                for key, found in _by_buffer(stmt, candidates).items():
                    straight.setdefault(key, []).extend(found)
        if not straight:
            continue
        everywhere = _by_buffer(loop.body, {key: candidates[key] for key in straight})
        for key, found in straight.items():
            if len(found) != len(everywhere[key]) or not _carries_within_iterations(loop, candidates[key], found):
                rejected.add(key)  # also in a nested loop or branch of this body, or carried across iterations
                continue
            plans.setdefault(id(loop), []).append(candidates[key])
            covered[key] = covered.get(key, 0) + len(found)
    keep = {key for key in total if key not in rejected and covered.get(key) == total[key]}
    return {loop: [b for b in buffers if id(b) in keep] for loop, buffers in plans.items()}


def _rounded(value: ir.Expr, dtype) -> ir.Expr:
    """``value`` as the element of ``dtype`` a store would leave. Arithmetic typed in a 16-bit or FP8
    type runs in float32 in the generated code (``t1 * 2`` of an FP8 ``t1`` is not rounded), and
    only the store to memory rounded it, so such a value gets a cast of its own even where its
    type is already ``dtype``; a load, variable, cast of that type, or a warp shuffle of one (TileLang's
    Hadamard example) is rounded already."""
    if value.dtype != dtype or not dtype.computed_in_float32:
        return ir.cast(value, dtype)
    if _already_rounded(value):
        return value
    return ir.Cast(value, dtype)


def _already_rounded(value: ir.Expr) -> bool:
    if isinstance(value, (ir.BufferLoad, ir.Var, ir.Cast, ir.Const)):
        return True
    return isinstance(value, ir.Call) and value.name in ir.SHUFFLES and _already_rounded(value.args[1])


class _Scalarize(IRMutator):
    """In one loop body: ``buffer``'s stores declare or assign ``var``, its loads read it."""

    def __init__(self, buffer, var):
        self.buffer, self.var, self.declared = buffer, var, False

    def visit_BufferLoad(self, node):
        return self.var if node.buffer is self.buffer else self.generic_visit(node)

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        if node.buffer is not self.buffer:
            return node
        value = _rounded(node.value, self.buffer.dtype)
        if self.declared:
            return ir.Assign(self.var, value, loc=node.loc)
        self.declared = True
        return ir.LetStmt(self.var, value, loc=node.loc)


class _Rewrite(IRMutator):
    def __init__(self, plans: dict):
        self.plans = plans  # id(loop) -> [(buffer, var)]
        self.gone = {id(b) for pairs in plans.values() for b, _ in pairs}

    def visit_For(self, original):
        node = self.generic_visit(original)
        body = node.body
        for buffer, var in self.plans.get(id(original), ()):
            body = _Scalarize(buffer, var).visit(body)
        return dataclasses.replace(node, body=body) if body is not node.body else node

    def visit_Allocate(self, node):
        return None if id(node.buffer) in self.gone else node


@register("scalarize_loop_temporaries", "lower")
def scalarize_loop_temporaries(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    plans, count = {}, {}
    for loop, buffers in _plans(func).items():
        for b in buffers:
            # one scalar per loop, each named apart: vars of one name and type are equal as IR keys
            n = count[id(b)] = count.get(id(b), -1) + 1
            plans.setdefault(loop, []).append((b, ir.Var(b.name if n == 0 else f"{b.name}_{n}", b.dtype)))
    if not plans:
        return func
    return func.with_body(_Rewrite(plans).visit(func.body))
