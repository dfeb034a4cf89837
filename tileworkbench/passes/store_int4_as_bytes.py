"""store_int4_as_bytes: int4 tensors and tiles become the bytes they are stored in.

Expects: the IR straight from the front end (the first pass: ``verify_tile_ops`` and every pass
after it see bytes).
Guarantees: no buffer is ``int4``. Each one (a kernel parameter, a shared tile) is ``int4x2`` with
its last dimension halved: two values a byte, the even one in the low nibble, which is what
TileLang's int4 tensors are (int8 arrays of packed pairs, its ``pack_int4``). The copies and gemms
that use one address it in bytes (the start and extent along the last dimension halved), so what
comes after moves ``int4x2`` as it moves int8 (TMA as UINT8, threads, swizzles), and a gemm of
``int4x2`` tiles multiplies their values: mma.sync m16n8k64 s4 (``tw::gemm_ss`` with
``tw::int4x4``; Hopper's wgmma has no 4-bit form).

Anything else that touches int4 data is a ``CompileError`` at its line, never a reinterpretation:
reading or writing an element, a fill, a reduction, a fragment or local array of int4, a copy
between int4 and another type, a last dimension (or a region's start or extent along it) not known
to be even, and a gemm whose A is not stored M x K, whose B is not stored N x K (``transpose_B``) or
whose operands are not both int4.
"""

from __future__ import annotations

import dataclasses

from .. import dtypes
from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.simplify import is_multiple_of, simplify
from ..ir.visitor import IRMutator, collect
from .manager import register

ONLY_MOVED = ("int4 values are only moved (T.copy, T.tma_copy) and multiplied (T.gemm, into an int32 "
              "fragment)")


def _even(e) -> bool:
    return is_multiple_of(simplify(ir.as_expr(e)), 2)


def _bytes_of(buf: ir.Buffer) -> ir.Buffer:
    """``buf``'s storage: an ``int4x2`` buffer with the last dimension halved."""
    if buf.scope not in ("global", "shared"):
        raise CompileError(f"{buf.name} is an int4 {buf.scope} buffer; int4 tiles live in tensors and shared "
                           f"memory: {ONLY_MOVED}", buf.loc)
    if buf.data is not None:
        raise CompileError(f"{buf.name}: an int4 tensor made inside the kernel (T.make_tensor) is not supported; "
                           "pass it as a kernel parameter", buf.loc)
    last = ir.const_int(buf.shape[-1])
    if last is None or last % 2:
        raise CompileError(f"{buf.name}'s last dimension must be a known even number of int4 values (two a "
                           f"byte); it is {expr_text(buf.shape[-1]) if last is None else last}", buf.loc)
    strides = None
    if buf.strides is not None:
        outer = [ir.const_int(s) for s in buf.strides[:-1]]
        if ir.const_int(buf.strides[-1]) != 1 or any(s is None or s % 2 for s in outer):
            raise CompileError(f"{buf.name}: an int4 tensor's strides must be known even numbers with the last "
                               "dimension contiguous (two values a byte)", buf.loc)
        strides = tuple(ir.const(s // 2) for s in outer) + (ir.const(1),)
    return ir.Buffer(buf.name, tuple(buf.shape[:-1]) + (ir.const(last // 2),), dtypes.int4x2, buf.scope,
                     strides=strides, attrs=dict(buf.attrs), loc=buf.loc)


class _ToBytes(IRMutator):
    def __init__(self, storage: dict):
        self.storage = storage  # int4 buffer -> its int4x2 bytes
        self.loc = None  # the statement being rewritten, for errors

    def visit(self, node):
        outer = self.loc
        if isinstance(node, ir.Stmt) and getattr(node, "loc", None) is not None:
            self.loc = node.loc
        try:
            return super().visit(node)
        finally:
            self.loc = outer

    def visit_Buffer(self, node):
        if node in self.storage:
            raise CompileError(f"{node.name} holds int4 values: {ONLY_MOVED}", self.loc)
        return node

    def region(self, r: ir.Region, loc) -> ir.Region:
        """``r`` over the bytes: its last start and extent halved (both provably even)."""
        starts = tuple(self.visit(s) for s in r.starts)
        extents = tuple(self.visit(e) for e in r.extents)
        if r.buffer not in self.storage:
            return dataclasses.replace(r, starts=starts, extents=extents)
        for what, value in (("starts at", starts[-1]), ("spans", extents[-1])):
            if not _even(value):
                raise CompileError(f"the region of {r.buffer.name} here {what} {expr_text(value)} along its last "
                                   "dimension, not known to be even: int4 data is moved in whole bytes (two "
                                   "values a byte)", loc)
        half = tuple(simplify(ir.as_expr(v) // 2) for v in (starts[-1], extents[-1]))
        return ir.Region(self.storage[r.buffer], starts[:-1] + half[:1], extents[:-1] + half[1:])

    def visit_Allocate(self, node):
        return dataclasses.replace(node, buffer=self.storage[node.buffer]) if node.buffer in self.storage else node

    def _moved(self, node):
        sides = [r.buffer in self.storage for r in (node.src, node.dst)]
        if any(sides) and not all(sides):
            int4, other = (node.src, node.dst) if sides[0] else (node.dst, node.src)
            raise CompileError(f"a copy between int4 {int4.buffer.name} and {other.buffer.dtype.name} "
                               f"{other.buffer.name}: int4 data is copied only to and from int4 buffers", node.loc)
        return dataclasses.replace(node, src=self.region(node.src, node.loc), dst=self.region(node.dst, node.loc),
                                   **({"barrier": self.visit(node.barrier)} if isinstance(node, ir.TmaCopy) else {}))

    visit_Copy = _moved
    visit_TmaCopy = _moved

    def visit_Gemm(self, node):
        int4 = [r.buffer in self.storage for r in (node.a, node.b)]
        if not any(int4):
            return self.generic_visit(node)
        if not all(int4):
            raise CompileError("T.gemm of int4 tiles needs both A and B int4", node.loc)
        if node.trans_a or not node.trans_b:
            raise CompileError("T.gemm of int4 tiles reads them K-major: A stored M x K and B stored N x K "
                               "(transpose_B=True, transpose_A=False); 4-bit values cannot be transposed on "
                               "the way to the tensor cores", node.loc)
        clear = node.clear_accum if isinstance(node.clear_accum, bool) else self.visit(node.clear_accum)
        return dataclasses.replace(node, a=self.region(node.a, node.loc), b=self.region(node.b, node.loc),
                                   c=self.region(node.c, node.loc), clear_accum=clear)


@register("store_int4_as_bytes", "tile")
def store_int4_as_bytes(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    buffers = [p for p in func.params if isinstance(p, ir.Buffer)] + [a.buffer for a in collect(func.body, ir.Allocate)]
    storage = {b: _bytes_of(b) for b in buffers if b.dtype.name == "int4"}
    if not storage:
        return func
    body = _ToBytes(storage).visit(func.body)
    return dataclasses.replace(func, params=[storage.get(p, p) for p in func.params], body=body,
                               attrs=dict(func.attrs))
