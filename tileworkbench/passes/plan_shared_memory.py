"""plan_shared_memory: place every shared buffer and barrier in the block's dynamic shared memory.

Expects: lowered IR whose shared buffers (with their pipeline versions) and barrier arrays are
declared by ``Allocate`` statements.
Guarantees: ``buffer.attrs["offset"]`` (bytes from the start of dynamic shared memory) and
``attrs["align"]`` on each of them; swizzled tiles aligned to 1024 bytes (the TMA swizzle pattern
is defined on address bits), other tiles to 128 (TMA destinations), barriers to 8;
``func.attrs["smem_bytes"]`` is the total and ``func.attrs["smem_plan"]`` the list of entries.
A plan over the device limit (227 KB on sm_90) is a ``CompileError`` listing the buffers.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register

SMEM_LIMIT = {"sm_90a": 232448, "sm_100a": 232448, "sm_80": 166912, "sm_89": 101376}


def _align_of(buf: ir.Buffer) -> int:
    if buf.scope == "barrier":
        return 8
    return 1024 if buf.attrs.get("swizzle", 0) else 128


def _size_of(buf: ir.Buffer) -> int:
    return buf.dtype.bytes_for(buf.numel)


@register("plan_shared_memory", "memory")
def plan_shared_memory(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    buffers = []
    for alloc in collect(func.body, ir.Allocate):
        if alloc.buffer.scope in ("shared", "barrier") and all(alloc.buffer is not b for b in buffers):
            buffers.append(alloc.buffer)
    order = sorted(buffers, key=lambda b: -_align_of(b))  # stable: big alignments first, less padding
    offset, plan = 0, []
    for buf in order:
        align = _align_of(buf)
        offset = -(-offset // align) * align
        size = _size_of(buf)
        buf.attrs["offset"], buf.attrs["align"] = offset, align
        plan.append({"name": buf.name, "kind": "barrier" if buf.scope == "barrier" else "buffer",
                     "dtype": buf.dtype.name, "shape": list(buf.static_shape()),
                     "versions": buf.attrs.get("versions", 1), "offset": offset, "size_bytes": size,
                     "align": align, "swizzle": buf.attrs.get("swizzle", 0)})
        offset += size
    limit = SMEM_LIMIT.get(ctx.target.arch, 232448)
    if offset > limit:
        listing = ", ".join(f"{p['name']} {p['size_bytes']} B" for p in plan)
        raise CompileError(f"the kernel needs {offset} bytes of shared memory, more than the {limit} "
                           f"bytes of {ctx.target.arch} ({listing}); use smaller tiles or fewer stages",
                           ir.SourceLocation(func.source_file, func.source_line) if func.source_line else None)
    out = func.with_body(func.body)
    out.attrs["smem_bytes"] = offset
    out.attrs["smem_plan"] = plan
    out.attrs["smem_limit"] = limit
    return out
