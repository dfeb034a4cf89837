"""``T.reshape`` / ``T.view`` of a fragment: another row-major shape over the same elements.

DeepSeek's FP8 indexers compute a ``(block_N, block_Q * heads)`` accumulator with one gemm, read it
as ``(block_N, block_Q, heads)`` and sum each query's heads. A view is the front end's alone: no
pass sees it. An element access ``view[n, q, h]`` is an access of the fragment at the same
row-major position (:meth:`FragmentView.element`, here ``s[n, q * heads + h]``; the pass
``merge_parallel_dims`` makes ``q`` and ``h`` one loop variable again, so that the loop indexes the
fragment by its variables in order); ``T.fill`` and ``T.clear`` of the whole view fill the fragment;
``T.reduce_*`` along a view dimension that is the inner part of a split fragment dimension reduces
runs of the fragment's elements (``ir.Reduce.segment``). Other tile operations on a view are refused
at their line (``regions.as_region``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.simplify import simplify
from . import builder as _builder


@dataclass(frozen=True, eq=False)
class FragmentView:
    """``view`` (a buffer no statement allocates) seen over the elements of the fragment ``base``.
    ``groups``: the shapes' dimensions in runs of equal element count, ``((view dims), (base
    dims))`` each, as small as they can be (a base dimension split in two: ``((1, 2), (1,))``)."""

    view: ir.Buffer
    base: ir.Buffer
    groups: tuple

    @staticmethod
    def of(view: ir.Buffer, base: ir.Buffer) -> "FragmentView":
        return FragmentView(view, base, _groups(view.static_shape(), base.static_shape()))

    def element(self, indices) -> tuple:
        """The base's indices of the view's element at ``indices``."""
        vshape, bshape = self.view.static_shape(), self.base.static_shape()
        out = []
        for vdims, bdims in self.groups:
            flat = indices[vdims[0]]
            for d in vdims[1:]:
                flat = flat * vshape[d] + indices[d]
            parts = []  # the base dimensions of the run, innermost first
            for d in reversed(bdims[1:]):
                parts.append(flat % bshape[d])
                flat = flat // bshape[d]
            out += [flat, *reversed(parts)]
        return tuple(simplify(i) for i in out)

    def reduced_runs(self, dim: int) -> tuple[int, int | None] | None:
        """``(base dimension, run length)`` where reducing the view along ``dim`` reduces runs of
        that many consecutive elements of the base dimension (``dim`` the innermost of the view
        dimensions a base dimension splits into), ``(base dimension, None)`` where ``dim`` is a
        base dimension of its own; None otherwise (a dimension that merges several of the base's,
        or an outer part of a split one)."""
        for vdims, bdims in self.groups:
            if dim not in vdims:
                continue
            if len(bdims) != 1 or dim != vdims[-1]:
                return None
            real = [d for d in vdims if self.view.static_shape()[d] != 1]
            return (bdims[0], None if real in ([], [dim]) else self.view.static_shape()[dim])
        return None


def _groups(vshape: tuple, bshape: tuple) -> tuple:
    groups, v, b = [], 0, 0
    while v < len(vshape) and b < len(bshape):
        vs, bs = [v], [b]
        pv, pb = vshape[v], bshape[b]
        v, b = v + 1, b + 1
        while pv != pb:
            if pv < pb:
                vs.append(v)
                pv *= vshape[v]
                v += 1
            else:
                bs.append(b)
                pb *= bshape[b]
                b += 1
        groups.append((vs, bs))
    # unit dimensions left on one side join the last run
    groups[-1][0].extend(range(v, len(vshape)))
    groups[-1][1].extend(range(b, len(bshape)))
    assert math.prod(vshape) == math.prod(bshape)
    return tuple((tuple(vs), tuple(bs)) for vs, bs in groups)


def fragment_view(buffer) -> FragmentView | None:
    """The view ``buffer`` is in the kernel being built, if it is one."""
    b = getattr(_builder._state, "builder", None)
    return b.fragment_views.get(buffer) if b is not None and isinstance(buffer, ir.Buffer) else None
