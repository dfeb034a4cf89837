"""Fragments in ``partition_parallel_loops``: an access ``F[i, j]`` inside a ``T.Parallel`` loop
over the fragment becomes the thread's own element ``F_local[j]`` (:class:`FragmentAccess`), and
every fragment becomes a per-thread ``local`` array, an access left outside such a loop an error
(:class:`FragmentsToLocal`)."""

from __future__ import annotations

from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.visitor import IRMutator


class FragmentAccess(IRMutator):
    """Rewrites ``F[v0, v1]`` (identity indices) to ``F_local[j]``."""

    def __init__(self, loop_vars, j, layout, loc, to_local):
        self.loop_vars, self.j, self.layout, self.loc, self.to_local = loop_vars, j, layout, loc, to_local

    def check(self, buf, indices):
        identity = len(indices) == len(self.loop_vars) and all(i is v for i, v in zip(indices, self.loop_vars))
        if not identity:
            raise CompileError(f"fragment {buf.name} must be indexed by the T.Parallel loop variables "
                               f"in order, like {buf.name}[{', '.join(v.name for v in self.loop_vars)}]",
                               self.loc)
        if buf.attrs["layout"] != self.layout:
            raise CompileError(f"fragment {buf.name} has a different thread layout "
                               f"({buf.attrs['layout'].describe()}) from the loop's "
                               f"({self.layout.describe()}); copy through shared memory", self.loc)

    def visit_BufferLoad(self, node):
        node = self.generic_visit(node)
        if node.buffer.scope != "fragment":
            return node
        self.check(node.buffer, node.indices)
        return ir.BufferLoad(self.to_local(node.buffer), (self.j,), node.dtype)

    def visit_BufferStore(self, node):
        node = self.generic_visit(node)
        if node.buffer.scope != "fragment":
            return node
        self.check(node.buffer, node.indices)
        return ir.BufferStore(self.to_local(node.buffer), (self.j,), node.value, loc=node.loc)


class FragmentsToLocal(IRMutator):
    """Fragments become per-thread arrays; any access left outside a T.Parallel loop is an error."""

    def __init__(self):
        self.map: dict = {}
        self.loc = None

    def local(self, buf):
        if buf.scope != "fragment":
            return buf
        if buf not in self.map:
            layout = buf.attrs["layout"]
            self.map[buf] = ir.Buffer(buf.name, (ir.const(layout.local_size),), buf.dtype, "local",
                                      attrs={"layout": layout, "fragment_shape": buf.static_shape()}, loc=buf.loc)
        return self.map[buf]

    def visit_Allocate(self, node):
        return ir.Allocate(self.local(node.buffer), loc=node.loc)

    def _outside(self, buf, loc):
        return CompileError(f"fragment {buf.name} can only be accessed inside a T.Parallel loop over it "
                            "or by tile operations (each thread holds only part of it)", loc)

    def visit_BufferLoad(self, node):
        if node.buffer.scope == "fragment":
            raise self._outside(node.buffer, self.loc)
        return self.generic_visit(node)

    def visit_BufferStore(self, node):
        if node.buffer.scope == "fragment":
            raise self._outside(node.buffer, node.loc)
        self.loc = node.loc
        return self.generic_visit(node)

    def generic_visit(self, node):
        if getattr(node, "loc", None) is not None and isinstance(node, ir.Stmt):
            self.loc = node.loc
        return super().generic_visit(node)
