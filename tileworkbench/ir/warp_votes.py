"""Warp votes and the warp barrier (``T.any_sync``, ``T.all_sync``, ``T.ballot_sync``,
``T.ballot``, ``T.activemask``, ``T.sync_warp``): each a ``Call`` of CUDA's intrinsic or of the
header's 64-bit wrapper (``tw/common.h``: a ballot is ``uint64`` in TileLang, CUDA's 32 bits
zero-extended), taken as it is by every pass and the code generator. The interpreters evaluate
them over the lanes of each warp (``interpreter/warp_votes.py``): every lane a ``_sync`` call's mask
names must run it, as on the GPU."""

from __future__ import annotations

ANY_SYNC = "__any_sync"  # (mask, predicate) -> int32: non-zero if any lane of the mask's predicate is
ALL_SYNC = "__all_sync"  # (mask, predicate) -> int32: non-zero if every lane of the mask's predicate is
BALLOT_SYNC = "tw::ballot_sync"  # (mask, predicate) -> uint64: bit n set where lane n's predicate is
ACTIVEMASK = "tw::activemask"  # () -> uint64: bit n set where lane n runs the call
SYNCWARP = "__syncwarp"  # (mask,): the lanes of the mask meet (a statement)

VOTES = (ANY_SYNC, ALL_SYNC, BALLOT_SYNC, ACTIVEMASK)
# the calls every lane their mask names must run (the first argument)
MASKED = (ANY_SYNC, ALL_SYNC, BALLOT_SYNC, SYNCWARP)
