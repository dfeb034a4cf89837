"""vectorize_loops: a ``T.vectorized`` copy between a thread's own array and a global tensor or an
unswizzled shared tile moves 16 bytes (or 8, or 4) per access instead of one element.

Expects: lowered IR after ``partition_parallel_loops`` (fragments are per-thread ``local`` arrays);
``T.vectorized`` loops are unrolled loops carrying the ``vectorized`` annotation (``VECTORIZED``).
Guarantees: such a loop whose body is one element copy, ``dst[...v...] = src[...v...]`` of one
dtype between a ``local`` array and a global tensor (a kernel parameter or a view of one) or a
shared tile that is neither swizzled nor in panels, where both element offsets step by one with
the loop variable and are otherwise a multiple of a chunk (so every chunk starts aligned: the
launcher checks the tensor's ``align_bytes``, shared tiles start 128-byte aligned, the array is
declared ``alignas``), becomes an
unrolled loop of ``tw::copy_vec<bytes>`` over the chunks: the widest of 16, 8 and 4 bytes that
divides the loop's bytes and keeps both sides aligned. NVCC cannot merge the element accesses
itself: it does not know the tensor's alignment. Any other ``T.vectorized`` loop stays an unrolled
loop of element accesses (correct, only slower); the annotation is dropped either way.
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.visitor import IRMutator, substitute
from ..ir.simplify import simplify
from .manager import register
from .rules.calls import address_of, call, needs_alignment
from .rules.fragment_runs import steps_by_one, unwrap_cast
from .rules.vector_runs import alignment_checked, launcher_checked

# The For annotation T.vectorized sets (language.loops.vectorized).
VECTORIZED = "vectorized"
CHUNKS = (16, 8, 4)  # bytes per access, widest first


def _chunk_bytes(loop: ir.For, store: ir.BufferStore, load: ir.BufferLoad) -> int | None:
    extent = ir.const_int(loop.extent)
    elem = store.buffer.dtype.storage_bits // 8
    if extent is None or not elem or store.buffer.dtype.packed:
        return None
    for chunk in CHUNKS:
        per_chunk = chunk // elem
        if per_chunk < 2 or (extent * elem) % chunk:
            continue
        if all(steps_by_one(buf, idx, loop.var, per_chunk)
               for buf, idx in ((store.buffer, store.indices), (load.buffer, load.indices))):
            return chunk
    return None


def vector_copy(loop: ir.For, checked: set) -> ir.For | None:
    """The loop as chunked copies (module doc), or None where it is not such a copy. ``checked``:
    the kernel's tensors whose alignment the launcher checks (``rules.vector_runs.launcher_checked``)."""
    store = loop.body
    if ir.const_int(loop.start) != 0 or not isinstance(store, ir.BufferStore):
        return None
    load = unwrap_cast(store.value, store.buffer.dtype)
    if not isinstance(load, ir.BufferLoad) or load.dtype != store.buffer.dtype:
        return None
    other = {store.buffer.scope: store.buffer, load.buffer.scope: load.buffer}
    if set(other) == {"local", "global"}:
        if not alignment_checked(other["global"], checked):
            return None
    elif set(other) == {"local", "shared"}:
        tile = other["shared"]
        if tile.attrs.get("swizzle", 0) or tile.attrs.get("panel", 0):
            return None  # a swizzled tile's neighbours are not always neighbours in memory
    else:
        return None
    chunk = _chunk_bytes(loop, store, load)
    if chunk is None:
        return None
    per_chunk = chunk // (store.buffer.dtype.storage_bits // 8)
    jv = ir.Var(f"{loop.var.name}_v")
    at = {loop.var: jv * per_chunk}

    def chunk_address(buf, indices):
        return address_of(buf, tuple(simplify(substitute(i, at)) for i in indices))

    for buf in (store.buffer, load.buffer):  # shared tiles start 128-byte aligned (plan_shared_memory)
        if buf.scope != "shared":
            needs_alignment(buf, chunk)
    move = call(f"tw::copy_vec<{chunk}>", chunk_address(store.buffer, store.indices),
                chunk_address(load.buffer, load.indices))
    return ir.For(jv, ir.const(ir.const_int(loop.extent) // per_chunk), move, "unrolled",
                  annotations={"vector": per_chunk}, loc=loop.loc)


class _Vectorize(IRMutator):
    def __init__(self, checked: set):
        self.checked = checked

    def visit_For(self, node: ir.For):
        node = self.generic_visit(node)
        if not node.annotations.get(VECTORIZED):
            return node
        vectorized = vector_copy(node, self.checked)
        if vectorized is not None:
            return vectorized
        annotations = {k: v for k, v in node.annotations.items() if k != VECTORIZED}
        return dataclasses.replace(node, annotations=annotations)


@register("vectorize_loops", "lower")
def vectorize_loops(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    return func.with_body(_Vectorize(launcher_checked(func)).visit(func.body))
