"""linearize_accesses: every buffer access one element offset, and store loops indexed from a base.

Phase: codegen (the code generator prints its output; the analyses read the IR before it).
Expects: lowered IR after ``carry_stage_counters``: no tile operations and no fragments (each
thread's part of one is a ``local`` array), accesses by logical indices.
Guarantees:
  * every scalar's value (``LetStmt``) simplified over the ranges known where it is declared;
  * every ``BufferLoad`` and ``BufferStore`` of a global, shared or local buffer is ``flat``
    (those in the pointer of a tensor made in the kernel too): its
    one index is the element offset in storage order (strides, pipeline versions and 128-byte
    panels resolved: ``ir.layout.shared_element_offset``), simplified over the ranges known where
    it is (``rules.codegen_ranges``); inside the offset of a tensor with 2^31 elements or more,
    arithmetic of unknown range is ``int64`` (``rules.int_width``); barrier slots are simplified
    likewise;
  * a loop of result stores (``tw::store_pair``, ``tw::store_matrix_x4`` or ``tw::atomic_add_pair``, annotated
    ``pairs`` / ``matrices`` by ``partition_parallel_loops``) indexes from a ``BaseOffset``
    declared before it: the part of the offset that does not depend on the loop variable, as a
    pointer into a global tensor or an element offset into a shared tile (whose swizzle applies
    to the sum), and each store adds only the loop's part. The same machine code, far less for
    NVVM to simplify: for the global stores NVRTC took ~15 ms less on the spec GEMM, and the
    shared ones (with stmatrix) took its NVRTC time from 0.21 to 0.16 s on the CPU machine.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.layout import shared_element_offset
from ..ir.simplify import Affine, simplify
from ..ir.visitor import uses_var
from .manager import register
from .rules.codegen_ranges import CodegenWalk
from .rules.int_width import wide_tensor, widened

_FLAT_SCOPES = ("global", "shared", "local")
_RESULT_STORES = ("tw::store_pair", "tw::store_matrix_x4", "tw::atomic_add_pair")


class _Linearize(CodegenWalk):
    def __init__(self, func: ir.PrimFunc):
        super().__init__(func)
        self.hoisted: dict = {}  # id(BufferLoad of a store address) -> its access from the base
        self.made: dict = {}  # a tensor made in the kernel (T.make_tensor) -> it with its pointer flat

    def visit_Buffer(self, node: ir.Buffer):
        return self.made.get(node, node)

    def visit_Allocate(self, node: ir.Allocate):
        buf = node.buffer
        if buf.data is None:
            return node
        data = self.visit(buf.data)  # the pointer's expression may load one (from a table of pointers)
        if data is buf.data:
            return node
        self.made[buf] = dataclasses.replace(buf, data=data)
        return dataclasses.replace(node, buffer=self.made[buf])

    def offset(self, buf: ir.Buffer, indices) -> ir.Expr:
        linear = simplify(shared_element_offset(buf, indices), self.ranges)
        return widened(linear, self.ranges, True) if buf.scope == "global" and wide_tensor(buf) else linear

    def visit_BufferLoad(self, node: ir.BufferLoad):
        if id(node) in self.hoisted:
            return self.hoisted.pop(id(node))
        node = self.generic_visit(node)
        if node.flat or node.buffer.scope not in _FLAT_SCOPES:
            return node
        return ir.BufferLoad(node.buffer, (self.offset(node.buffer, node.indices),), node.dtype, flat=True)

    def visit_BufferStore(self, node: ir.BufferStore):
        node = self.generic_visit(node)
        if node.flat or node.buffer.scope not in _FLAT_SCOPES:
            return node
        return dataclasses.replace(node, indices=(self.offset(node.buffer, node.indices),), flat=True)

    def visit_LetStmt(self, node: ir.LetStmt):
        return super().visit_LetStmt(dataclasses.replace(node, value=simplify(node.value, self.ranges)))

    def visit_BarrierRef(self, node: ir.BarrierRef):
        return ir.BarrierRef(node.buffer, simplify(self.visit(node.index), self.ranges))

    def visit_For(self, node: ir.For):
        self.track_loop(node)
        base = self.store_base(node) if node.annotations.get("pairs") or node.annotations.get("matrices") else None
        loop = dataclasses.replace(node, start=self.visit(node.start), extent=self.visit(node.extent),
                                   body=self.visit(node.body))
        return loop if base is None else ir.seq([base, loop])

    def store_base(self, loop: ir.For) -> ir.BaseOffset | None:
        """The ``BaseOffset`` of a loop of result stores (module doc), its store's address
        rewritten from it in ``self.hoisted``; None where the offset has no part to hoist."""
        store = loop.body
        if isinstance(store, ir.IfThenElse) and store.else_body is None:
            store = store.then_body  # the rows a pair store keeps to (``ResultStores.row_conditions``)
        call = store.call if isinstance(store, ir.Evaluate) else None
        if not (isinstance(call, ir.Call) and call.name in _RESULT_STORES):
            return None
        load = call.args[0].args[0]  # address_of(out[...])
        buf = load.buffer
        if buf.scope not in ("global", "shared") or buf.dtype.packed or load.flat:
            return None
        linear = simplify(shared_element_offset(buf, load.indices), self.ranges)
        aff = Affine.of(linear)
        fixed = Affine({k: t for k, t in aff.terms.items() if not uses_var(t[0], loop.var)})
        if not fixed.terms or len(fixed.terms) == len(aff.terms):
            return None
        moving = Affine({k: t for k, t in aff.terms.items() if k not in fixed.terms}, aff.const).to_expr(linear.dtype)
        wide = buf.scope == "global" and wide_tensor(buf)
        fixed_expr = fixed.to_expr(linear.dtype)
        if wide:
            fixed_expr, moving = widened(fixed_expr, self.ranges, True), widened(moving, self.ranges, True)
        if buf.scope == "global":  # a pointer into the tensor; the stores index it by their part
            base = ir.Buffer(f"{buf.name}_pairs", (ir.const(1),), buf.dtype, "global", loc=buf.loc)
            self.hoisted[id(load)] = ir.BufferLoad(base, (moving,), buf.dtype, flat=True)
        else:  # the per-thread offset into the shared tile; its swizzle applies to the sum
            base = ir.Var(f"{buf.name}_thread")
            self.hoisted[id(load)] = ir.BufferLoad(buf, (ir.BinOp("+", base, moving, ir.dtypes.int32),), buf.dtype,
                                                   flat=True)
        # a tensor made in the kernel is the one its Allocate now declares (its pointer made flat)
        return ir.BaseOffset(base, self.made.get(buf, buf), fixed_expr, loc=loop.loc)


@register("linearize_accesses", "codegen")
def linearize_accesses(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    return func.with_body(_Linearize(func).visit(func.body))
