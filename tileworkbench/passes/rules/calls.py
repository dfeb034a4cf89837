"""IR for calls into our CUDA headers that lowering passes emit: a call statement, the address
of an element, a shared tile's base and panel columns, the election of one thread, a barrier's
initialisation, and the 16-byte alignment bulk copies need of a tensor."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.simplify import simplify


def call(name, *args, dtype=None):
    return ir.Evaluate(ir.Call(name, tuple(args), dtype or ir.dtypes.int32))


def address_of(buffer: ir.Buffer, indices) -> ir.Call:
    return ir.Call("address_of", (ir.BufferLoad(buffer, tuple(indices), buffer.dtype),), ir.dtypes.handle)


def tile_base(region: ir.Region) -> ir.Call:
    """Address of the first element of a shared tile (a region must cover whole inner rows)."""
    return address_of(region.buffer, region.starts)


def tile_column(region: ir.Region, col: int) -> ir.Call:
    """Address of the shared tile's element in its first row and column ``col`` (the start of a
    panel, for a copy of one panel)."""
    if not col:
        return tile_base(region)
    return address_of(region.buffer, (*region.starts[:-1], simplify(region.starts[-1] + col)))


def needs_alignment(buffer: ir.Buffer, nbytes: int):
    """The kernel's vector or bulk accesses need ``buffer`` aligned to ``nbytes``: for a tensor
    the launcher checks it (``align_bytes``), for a local array codegen declares it ``alignas``."""
    buffer.attrs["align_bytes"] = max(buffer.attrs.get("align_bytes", 1), nbytes)


def needs_16_byte_alignment(tensor: ir.Buffer):
    """A bulk copy's global address must be a multiple of 16 bytes: the launcher checks the tensor
    (``align_bytes``) instead of letting a misaligned one fault on the GPU."""
    if not tensor.attrs.get("device_bound"):
        needs_alignment(tensor, 16)


def elect(threads: int) -> ir.Call:
    return ir.shuffle_elect(threads)


def barrier_init(buf: ir.Buffer, tid: ir.Var) -> ir.Stmt:
    inits = [call(".init", ir.BarrierRef(buf, ir.const(i)), ir.const(c)) for i, c in enumerate(buf.attrs["counts"])]
    return ir.seq([
        ir.IfThenElse(ir.cmp("==", tid, 0), ir.seq(inits)),
        call("tw::fence_barrier_init"),
        ir.SyncThreads(),
    ])
