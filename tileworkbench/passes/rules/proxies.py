"""The two proxies of shared memory, as the lowered IR shows them: the async-proxy fence, the calls
whose shared-memory accesses are the async proxy's (TMA, wgmma), and the shared tiles a statement
writes through the generic proxy or hands to such a call. ``elide_proxy_fences`` drops fences nothing needs; ``fence_before_arrivals`` adds the ones a
hand-over between warpgroups needs."""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.visitor import collect

FENCE = "tw::fence_proxy_async"
ASYNC_PROXY_CALLS = ("tw::tma_", "tw::wgmma_")  # the calls whose shared-memory accesses are the async proxy's
ARRIVALS = (".arrive", ".arrive_and_expect_tx")  # a thread's own mbarrier arrivals (cp.async's land later)


def is_fence(stmt) -> bool:
    return isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call) and stmt.call.name == FENCE


def fence() -> ir.Evaluate:
    return ir.Evaluate(ir.Call(FENCE, ()))


def is_async_call(call) -> bool:
    return isinstance(call, ir.Call) and call.name.startswith(ASYNC_PROXY_CALLS)


def shared_tiles(node) -> list:
    """The shared tiles whose addresses ``node`` takes (``address_of(tile[...])``), in order."""
    return [c.args[0].buffer for c in collect(node, ir.Call) if c.name == "address_of" and c.args
            and isinstance(c.args[0], ir.BufferLoad) and c.args[0].buffer.scope == "shared"]


def async_access_tiles(node) -> list:
    """The shared tiles the wgmma and TMA calls under ``node`` are given the addresses of."""
    return [buf for call in collect(node, ir.Call) if is_async_call(call) for buf in shared_tiles(call)]


def generic_write_tiles(stmt) -> list:
    """The shared tiles ``stmt`` (a statement holding no other) writes through the generic proxy:
    a store's, or those addressed in the first argument of a call of neither async-proxy kind (a
    vector copy's, stmatrix's, a pair store's or a ``cp.async``'s destination)."""
    if isinstance(stmt, ir.BufferStore):
        return [stmt.buffer] if stmt.buffer.scope == "shared" else []
    if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call) and stmt.call.args \
            and not is_async_call(stmt.call):
        return shared_tiles(stmt.call.args[0])
    return []


def is_arrival(stmt) -> bool:
    """Whether ``stmt`` is one of the thread's own mbarrier arrivals (``ARRIVALS``)."""
    return isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call) and stmt.call.name in ARRIVALS


def is_cp_async_copy(call) -> bool:
    """Whether ``call`` issues a ``cp.async`` copy (not its commit or wait)."""
    return isinstance(call, ir.Call) and call.name.startswith("tw::cp_async<")


def landed_write_tiles(stmt) -> list:
    """``generic_write_tiles`` less ``cp.async``'s: its copies land after the statement, and the
    waits for them fence them (``lower_tma``)."""
    if isinstance(stmt, ir.Evaluate) and is_cp_async_copy(stmt.call):
        return []
    return generic_write_tiles(stmt)
