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
holds what the element held (a 16-bit element's rounding included: the store's value is cast to
the array's type).
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


def _accesses(node, buffer) -> list:
    """The loads and stores of ``buffer`` under ``node``, in pre-order."""
    return [n for n in collect(node, (ir.BufferLoad, ir.BufferStore)) if n.buffer is buffer]


def _used_as_memory(func, buffer) -> bool:
    """Whether anything but element loads and stores reaches the array: its address taken
    (``address_of``: a vector copy), the buffer handed on itself, or its name in raw C++ text (a
    tensor-core call reads a register fragment by name)."""
    if any(c.name == "address_of" and any(isinstance(a, ir.BufferLoad) and a.buffer is buffer for a in c.args)
           for c in collect(func.body, ir.Call)):
        return True
    mentions = sum(b is buffer for b in collect(func.body, ir.Buffer))
    if mentions != len(_accesses(func.body, buffer)) + 1:  # each access's and the declaration's
        return True
    word = re.compile(rf"\b{re.escape(buffer.name)}\b")
    return any(word.search(r.text) for r in collect(func.body, ir.Raw))


def _element_key(access) -> tuple:
    """Which element an access names, as text and the identity of its variables."""
    return (tuple(expr_text(i) for i in access.indices),
            frozenset(id(v) for i in access.indices for v in collect(i, ir.Var)))


def _loop_bodies(func, buffer) -> list | None:
    """The loops whose bodies hold every access of ``buffer`` in their straight-line statements,
    each body carrying its value only within an iteration; None if some access is elsewhere or an
    iteration could read a value it did not write."""
    total = len(_accesses(func.body, buffer))
    loops, covered = [], 0
    for loop in collect(func.body, ir.For):
        body = ir.statements(loop.body)
        per_stmt = [_accesses(s, buffer) if isinstance(s, _STRAIGHT) else [] for s in body]
        found = [a for accesses in per_stmt for a in accesses]
        if not found:
            continue
        if len(found) != len(_accesses(loop.body, buffer)):
            return None  # also accessed inside a nested loop or branch of this body
        first = next(s for s, accesses in zip(body, per_stmt) if accesses)
        if not (isinstance(first, ir.BufferStore) and first.buffer is buffer and
                not _accesses(first.value, buffer) and not any(_accesses(i, buffer) for i in first.indices)):
            return None  # the iteration reads before it writes (or writes another element first)
        if len({_element_key(a) for a in found}) != 1:
            return None
        if any(collect(i, (ir.BufferLoad, ir.Call, ir.Raw)) for i in first.indices):
            return None  # an index read from memory (a kernel variable is a one-element array) may change
        index_vars = {v for i in first.indices for v in collect(i, ir.Var)}
        if index_vars & reassigned_vars(loop.body):
            return None
        loops.append(loop)
        covered += len(found)
    return loops if loops and covered == total else None


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
        value = ir.cast(node.value, self.buffer.dtype)
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
    plans: dict = {}
    for alloc in collect(func.body, ir.Allocate):
        buffer = alloc.buffer
        if buffer.scope != "local" or _used_as_memory(func, buffer):
            continue
        for loop in _loop_bodies(func, buffer) or ():
            plans.setdefault(id(loop), []).append((buffer, ir.Var(buffer.name, buffer.dtype)))
    if not plans:
        return func
    return func.with_body(_Rewrite(plans).visit(func.body))
