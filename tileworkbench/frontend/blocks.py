"""The front end's ``with`` blocks: ``with T.Kernel(...) as (bx, by):`` opens a kernel's body and
``with T.ws(g):`` a part of it only warpgroup ``g`` runs (``ir.ThreadScope``).

:class:`Blocks` is the part of the parser (``parser.Parser``) that visits them.
"""

from __future__ import annotations

import ast

from ..ir import nodes as ir
from .statements import Scope

_WITH_FORMS = "only `with T.Kernel(...) as ...:` and `with T.ws(...):` are supported"


class Blocks:
    """Needs the parser's ``builder``, ``kernel_seen``, ``kernels``, ``kernel_names``, ``eval``,
    ``visit_body``, ``error``, ``bind`` and ``_target_names``."""

    def visit_With(self, node):
        if len(node.items) != 1:
            raise self.error(node, _WITH_FORMS)
        item = node.items[0]
        # Look at what is called before calling it: `with open(...)` must not run.
        called = self.eval(item.context_expr.func) if isinstance(item.context_expr, ast.Call) else None
        if getattr(called, "opens_thread_scope", False):
            return self._thread_scope(node, item)
        if not getattr(called, "opens_kernel_scope", False):
            raise self.error(node, _WITH_FORMS)
        spec = self.eval(item.context_expr)
        if self.builder.in_kernel:
            raise self.error(node, "`with T.Kernel(...)` inside a kernel: kernels run one after another, each at "
                                   "the top level of the function")
        self.kernel_seen = True
        names = self._target_names(item.optional_vars) if item.optional_vars is not None else []
        if len(names) > len(spec.grid):
            raise self.error(node, f"T.Kernel has {len(spec.grid)} grid dimension(s) but "
                                   f"{len(names)} names are bound")
        block_vars = tuple(ir.Var(names[i] if i < len(names) else f"b{'xyz'[i]}") for i in range(len(spec.grid)))
        # The kernel's names live in a scope of its own: a kernel after it (fused MoE's two) that
        # assigns the same name (`m_start = bx * 128`) makes a variable of its own, not an
        # assignment to one the first kernel declared (undefined in the second's code).
        outer, self.scope = self.scope, Scope({}, self.scope)
        for v in block_vars:
            self.bind(v.name, v)
        self.builder.launch = ir.Launch(spec.grid, spec.threads, block_vars, ir.Var("tx"),
                                         thread_dims=spec.thread_dims)
        self.builder.in_kernel = True
        self.builder.kernel_depth = len(self.builder.frames)
        start = len(self.builder.frames[-1])
        try:
            self.visit_body(node.body)
        finally:
            self.builder.in_kernel = False
            self.kernel_names.update(self.scope.names)
            self.scope = outer
        # where this kernel's statements lie in the function's frame (several kernels: a sequence)
        self.kernels.append((self.builder.launch, start, len(self.builder.frames[-1]), node,
                             len(self.builder.frames)))

    def _thread_scope(self, node, item):
        """``with T.ws(groups):`` -> ``ir.ThreadScope`` over those warpgroups' threads."""
        if not self.builder.in_kernel:
            raise self.error(node, "`with T.ws(...)` must be inside `with T.Kernel(...)`")
        if item.optional_vars is not None:
            raise self.error(node, "`with T.ws(...)` binds no name (drop the `as ...`)")
        if self.builder.thread_scope is not None:
            raise self.error(node, "`with T.ws(...)` inside another one: the inner groups would have to be "
                                   "among the outer ones; write one scope per group of warpgroups")
        spec = self.eval(item.context_expr)
        try:
            first, count = spec.thread_range(self.builder.launch.threads)
        except ValueError as why:
            raise self.error(item.context_expr, f"T.ws({', '.join(map(str, spec.groups))}): {why}") from None
        var, loc = ir.Var(f"tx_ws{first // 128}"), self.builder.loc
        self.builder.thread_scope = (first, count)
        self.builder.push()
        try:
            self.visit_body(node.body)
        finally:
            self.builder.thread_scope = None
            body = self.builder.pop()
        self.builder.emit(ir.ThreadScope(first, count, body, var, loc=loc))
