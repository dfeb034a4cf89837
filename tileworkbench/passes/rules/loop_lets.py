"""What a loop's loads read besides the loop variable, for the passes that issue those loads ahead
of the statements around them (``inject_software_pipeline``: an iteration in flight;
``warp_specialize``: a producer warpgroup): the buffers the kernel writes, and the names the loop
body binds that the loads' addresses read, which such a pass computes again where it issues."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import addressed_buffers, buffers_written, collect, reassigned_vars


def written_buffer_ids(node) -> set:
    """Ids of the buffers written anywhere under ``node``: those ``ir.visitor.buffers_written``
    names (stores, copy, TMA, fill, gemm, reduction and scan destinations) and atomic targets."""
    out = {id(b) for b in buffers_written(node)}
    for call in collect(node, ir.Call):
        if call.name in ir.ATOMIC_UPDATES and call.args and isinstance(call.args[0], ir.Call):
            out |= {id(b) for b in addressed_buffers(call.args[0])}  # the target, not its index tables
    return out


def lets_read_by(producers: list, body: list, loop: ir.For, written: set) -> list | None:
    """The ``LetStmt``s of the loop ``body`` (in order) whose names the ``producers`` read,
    directly or through one another (TileLang's paged MLA decode: ``kv_start = block_table[...]``
    read by its copies' addresses), for a pass to compute again for the iteration it issues;
    None where one of them reads what another iteration cannot read ahead: a fragment or shared
    tile, a tensor the kernel writes (``written``: buffer ids), a call, or a name the loop assigns."""
    lets = {x.var: x for x in body if isinstance(x, ir.LetStmt)}
    needed, frontier = set(), [v for p in producers for v in collect(p, ir.Var) if v in lets]
    while frontier:
        v = frontier.pop()
        if v not in needed:
            needed.add(v)
            frontier += [u for u in collect(lets[v].value, ir.Var) if u in lets]
    chosen = [x for x in body if isinstance(x, ir.LetStmt) and x.var in needed]
    reassigned = reassigned_vars(loop.body)
    # what differs between iterations beyond the loop variable: names the loop re-assigns or binds
    assigned = reassigned | ({x.var for x in collect(loop.body, ir.LetStmt)} - needed)
    for let in chosen:
        if let.var in reassigned or collect(let.value, (ir.Raw, ir.Call)):
            return None
        if any(load.buffer.scope != "global" or id(load.buffer) in written for load in collect(let.value, ir.BufferLoad)):
            return None
        if any(v in assigned for v in collect(let.value, ir.Var)):
            return None
    return chosen
