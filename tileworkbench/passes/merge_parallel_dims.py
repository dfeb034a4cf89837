"""merge_parallel_dims: two ``T.Parallel`` dimensions that index a fragment together, as one.

Expects: tile-level IR (a ``T.Parallel`` nest is ``For`` loops of kind ``"parallel"``, one per
dimension, each the only statement of the one around it).
Guarantees: where two of a nest's dimensions, ``q`` (extent ``Q``) and ``h`` (extent ``H``), in
either order and not necessarily neighbours, both start at 0 and the nest indexes a fragment with
``k * (q * H + h) + c`` in one dimension (``k``, ``c`` anything without ``q`` and ``h``), the two
are one dimension ``q_h`` of extent ``Q * H`` in ``q``'s place: that index is ``k * q_h + c``
wherever it appears, and every other use of ``q`` and ``h`` is ``q_h // H`` and ``q_h % H``.
Repeated while it applies (three dimensions can become one).

Why: a fragment view (``T.reshape(s, (N, Q, H))`` of an ``(N, Q * H)`` fragment,
``frontend.fragment_views``) indexed in a loop over its three dimensions reads and writes
``s[n, q * H + h]``; the passes after this one place a loop's iterations on the threads by the
layout of a fragment it indexes by its variables in order, which ``s[n, q_h]`` is. A ``T.Parallel``
nest's iterations are unordered, so the merged loop runs the same iterations.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import Affine
from ..ir.visitor import IRMutator, collect, substitute
from .manager import register
from .rules.fragments import parallel_nest


def _merged(index: ir.Expr, q: ir.Var, h: ir.Var, inner: int, qh: ir.Var) -> ir.Expr | None:
    """``index`` with its ``k * (q * inner + h)`` as ``k * qh``, or None if it holds no such term."""
    form = Affine.of(index)
    coef = {key: c for key, (atom, c) in form.terms.items() if atom is q or atom is h}
    kq = next((c for key, (atom, c) in form.terms.items() if atom is q), None)
    kh = next((c for key, (atom, c) in form.terms.items() if atom is h), None)
    if len(coef) != 2 or kq is None or kh is None or kq != kh * inner:
        return None
    rest = Affine({key: v for key, v in form.terms.items() if key not in coef}, form.const)
    return rest.plus(Affine.of(qh).scaled(kh)).to_expr(index.dtype)


class _PutTogether(IRMutator):
    """Indices holding ``k * (q * inner + h)`` rewritten with the merged variable."""

    def __init__(self, q, h, inner, qh):
        self.args = (q, h, inner, qh)

    def _indices(self, indices):
        merged = [_merged(i, *self.args) for i in indices]
        return tuple(i if m is None else m for i, m in zip(indices, merged))

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        return ir.BufferLoad(node.buffer, self._indices(node.indices), node.dtype)

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        return ir.BufferStore(node.buffer, self._indices(node.indices), node.value)


def _merge_pair(chain: list) -> list | None:
    """``chain`` with its first mergeable pair of dimensions merged (the module doc), or None."""
    body = chain[-1].body
    fragment_indices = [i for a in collect(body, (ir.BufferLoad, ir.BufferStore)) if a.buffer.scope == "fragment"
                        for i in a.indices]
    # any two of the nest's dimensions (its iterations are unordered): the merged one takes q's place
    for outer, inner in ((a, b) for a in chain for b in chain if a is not b):
        q_n, h_n = ir.const_int(outer.extent), ir.const_int(inner.extent)
        if q_n is None or h_n is None or ir.const_int(outer.start) != 0 or ir.const_int(inner.start) != 0:
            continue
        if outer.annotations or inner.annotations:
            continue  # a loop the program or a pass marked keeps its shape
        q, h = outer.var, inner.var
        qh = ir.Var(f"{q.name}_{h.name}", q.dtype)
        if not any(_merged(i, q, h, h_n, qh) is not None for i in fragment_indices):
            continue
        new_body = _PutTogether(q, h, h_n, qh).visit(body)
        new_body = substitute(new_body, {q: qh // h_n, h: qh % h_n})
        for loop in reversed([f for f in chain if f is not inner]):  # the others keep their own fields
            merged = loop is outer
            new_body = dataclasses.replace(loop, var=qh if merged else loop.var, body=new_body,
                                           extent=ir.const(q_n * h_n) if merged else loop.extent)
        return parallel_nest(new_body)[0]
    return None


class _MergeDims(IRMutator):
    def visit_For(self, node: ir.For):
        if node.kind != "parallel":
            return self.generic_visit(node)
        chain = parallel_nest(node)[0]
        merged = _merge_pair(chain)
        while merged is not None:
            chain = merged
            merged = _merge_pair(chain)
        return chain[0]


@register("merge_parallel_dims", "tile")
def merge_parallel_dims(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    return func.with_body(_MergeDims().visit(func.body))
