"""Warp votes, the warp barrier and leader election (``T.any_sync``, ``T.all_sync``,
``T.ballot_sync``, ``T.ballot``, ``T.activemask``, ``T.sync_warp``; ``T.shuffle_elect`` and the
compiler's own leaders, ``tw::shuffle_elect<N>()``): each a ``Call`` of CUDA's intrinsic or of the
header's 64-bit wrapper (``tw/common.h``: a ballot is ``uint64`` in TileLang, CUDA's 32 bits
zero-extended), taken as it is by every pass and the code generator. The interpreters evaluate
them over the lanes of each warp (``interpreter/warp_votes.py``): every lane a ``_sync`` call's mask
names must run it, as on the GPU."""

from __future__ import annotations

import re

from .. import dtypes
from .expr import Call

ANY_SYNC = "__any_sync"  # (mask, predicate) -> int32: non-zero if any lane of the mask's predicate is
ALL_SYNC = "__all_sync"  # (mask, predicate) -> int32: non-zero if every lane of the mask's predicate is
BALLOT_SYNC = "tw::ballot_sync"  # (mask, predicate) -> uint64: bit n set where lane n's predicate is
ACTIVEMASK = "tw::activemask"  # () -> uint64: bit n set where lane n runs the call
SYNCWARP = "__syncwarp"  # (mask,): the lanes of the mask meet (a statement)

VOTES = (ANY_SYNC, ALL_SYNC, BALLOT_SYNC, ACTIVEMASK)

# ``tw::shuffle_elect<N>()`` (tw/common.h): true in lane 0 of the first warp of each group of N
# consecutive threads; built by :func:`shuffle_elect`, N read back by :func:`elected_group`.
SHUFFLE_ELECT = re.compile(r"^tw::shuffle_elect<(\d+)>$")


def shuffle_elect(threads: int) -> Call:
    return Call(f"tw::shuffle_elect<{threads}>", (), dtypes.boolean)


def elected_group(name: str) -> int | None:
    """N of a ``tw::shuffle_elect<N>`` call's name, None for any other name."""
    m = SHUFFLE_ELECT.match(name)
    return int(m.group(1)) if m else None
