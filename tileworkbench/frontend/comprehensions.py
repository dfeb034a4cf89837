"""Comprehensions in kernels: list, set and dict comprehensions and generator expressions run
while the kernel is built, over Python values (sizes, a list of batch sizes: ``sum((n + b - 1) //
b for n in sizes)``); over a kernel value, or with a kernel-value condition, a ``CompileError``."""

from __future__ import annotations

import ast

from ..ir import nodes as ir
from .expressions import _is_ir


class Comprehensions:
    """Needs the parser's ``eval``, ``scope`` and ``error``."""

    # A list stands in for a generator.
    def visit_ListComp(self, node):
        return self._comprehension(node, lambda: [], lambda out, n: out.append(self.eval(n.elt)))

    visit_GeneratorExp = visit_ListComp

    def visit_SetComp(self, node):
        return self._comprehension(node, set, lambda out, n: out.add(self.eval(n.elt)))

    def visit_DictComp(self, node):
        return self._comprehension(node, dict, lambda out, n: out.__setitem__(self.eval(n.key), self.eval(n.value)))

    def _comprehension(self, node, make, add):
        out, outer = make(), self.scope
        self.scope = type(outer)({}, outer)  # the comprehension's names stay inside it, as in Python
        try:
            self._generate(node, node.generators, out, add)
        finally:
            self.scope = outer
        return out

    def _generate(self, node, generators, out, add):
        if not generators:
            add(out, node)
            return
        first = generators[0]
        if first.is_async:
            raise self.error(first, "`async for` is not supported in kernels")
        iterable = self.eval(first.iter)
        if _is_ir(iterable) or isinstance(iterable, (ir.Buffer, ir.Region)):
            raise self.error(first.iter, f"a comprehension runs while the kernel is built, over Python values; "
                                         f"{ir.describe(iterable)} is a kernel value (loop over it with T.serial)")
        for item in iterable:
            self._bind_target(first.target, item)
            keep = True
            for cond in first.ifs:
                value = self.eval(cond)
                if _is_ir(value):
                    raise self.error(cond, "a comprehension's condition must be a Python value while the kernel "
                                           "is built, not a kernel value")
                keep = keep and bool(value)
            if keep:
                self._generate(node, generators[1:], out, add)

    def _bind_target(self, target, value):
        if isinstance(target, ast.Name):
            self.scope.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = list(value)
            if len(items) != len(target.elts):
                raise self.error(target, f"cannot unpack {len(items)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, items):
                self._bind_target(t, v)
        else:
            raise self.error(target, "a comprehension's target must be names")

