"""The two proxies of shared memory, as the lowered IR shows them: the async-proxy fence, the calls
whose shared-memory accesses are the async proxy's (TMA, wgmma), and the shared address a call is
given. ``elide_proxy_fences`` drops fences nothing needs; ``fence_before_arrivals`` adds the ones a
hand-over between warpgroups needs."""

from __future__ import annotations

from ...ir import nodes as ir

FENCE = "tw::fence_proxy_async"
ASYNC_PROXY_CALLS = ("tw::tma_", "tw::wgmma_")  # the calls whose shared-memory accesses are the async proxy's


def is_fence(stmt) -> bool:
    return isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call) and stmt.call.name == FENCE


def fence() -> ir.Evaluate:
    return ir.Evaluate(ir.Call(FENCE, ()))


def shared_address(arg) -> ir.Buffer | None:
    """The shared buffer ``arg`` is the address of (``address_of(tile[...])``), else None."""
    if isinstance(arg, ir.Call) and arg.name == "address_of" and arg.args and isinstance(arg.args[0], ir.BufferLoad):
        buf = arg.args[0].buffer
        return buf if buf.scope == "shared" else None
    return None
