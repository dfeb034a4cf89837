"""Warp votes, the warp barrier and leader election in thread-level code (TileLang's
``T.any_sync``, ``T.all_sync``, ``T.ballot_sync``, ``T.ballot``, ``T.activemask``,
``T.sync_warp``, ``T.shuffle_elect``). Like the shuffles, every lane a ``_sync`` call's mask
names must make the same call (the interpreters check it); outside ``T.Parallel``."""

from __future__ import annotations

from .. import dtypes as _dt
from ..frontend import builder as _b
from ..frontend.builder import error
from ..ir import nodes as ir

FULL_WARP = 0xFFFFFFFF


def _mask(mask, name: str) -> ir.Expr:
    value = _b.integer(mask, f"{name}: mask")
    m = ir.const_int(value)
    if m is not None and not 0 < m <= FULL_WARP:
        raise error(f"{name}: the mask names lanes 0-31 by bit, a non-zero 32-bit value, got {m:#x}")
    return ir.cast(value, _dt.uint32)


def _predicate(predicate, name: str) -> ir.Expr:
    p = _b.number(predicate, f"{name}: the predicate")
    if p.dtype.is_float:
        raise error(f"{name}: the predicate is a condition or an integer, not {p.dtype.name}")
    return p


def any_sync(predicate, mask=FULL_WARP):
    """Non-zero (int32) where the predicate holds in any lane the mask names: ``__any_sync``."""
    return ir.Call(ir.ANY_SYNC, (_mask(mask, "T.any_sync"), _predicate(predicate, "T.any_sync")), _dt.int32)


def all_sync(predicate, mask=FULL_WARP):
    """Non-zero (int32) where the predicate holds in every lane the mask names: ``__all_sync``."""
    return ir.Call(ir.ALL_SYNC, (_mask(mask, "T.all_sync"), _predicate(predicate, "T.all_sync")), _dt.int32)


def ballot_sync(predicate, mask=FULL_WARP):
    """A uint64 whose bit n is set where lane n (named by the mask) has the predicate."""
    return ir.Call(ir.BALLOT_SYNC, (_mask(mask, "T.ballot_sync"), _predicate(predicate, "T.ballot_sync")),
                   _dt.uint64)


def ballot(predicate):
    """``T.ballot_sync`` over the whole warp."""
    return ir.Call(ir.BALLOT_SYNC, (ir.cast(ir.const(FULL_WARP), _dt.uint32), _predicate(predicate, "T.ballot")),
                   _dt.uint64)


def activemask():
    """A uint64 whose bit n is set where lane n runs this call (``__activemask``)."""
    return ir.Call(ir.ACTIVEMASK, (), _dt.uint64)


def sync_warp(mask=None):
    """``__syncwarp(mask)``: the lanes the mask names (all 32 without one) meet here."""
    _b.current().emit(ir.Evaluate(ir.Call(ir.SYNCWARP, (_mask(FULL_WARP if mask is None else mask, "T.sync_warp"),))))


def shuffle_elect(thread_extent):
    """True in one thread of every group of ``thread_extent`` consecutive threads (a multiple of 32;
    0: one thread of the block): lane 0 of the group's first warp, as the compiler's own leaders."""
    launch = _b.launch("T.shuffle_elect()")
    n = _b.constant_int(thread_extent, "T.shuffle_elect: thread_extent", low=0)
    n = n or launch.threads
    if n % 32 or launch.threads % n:
        raise error(f"T.shuffle_elect: thread_extent must be 0 or a multiple of 32 that divides the block's "
                    f"{launch.threads} threads, got {n}")
    return ir.shuffle_elect(n)
