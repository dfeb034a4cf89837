"""``on_both_interpreters``: a test run on the tile-level CPU interpreter (``compile(target="cpu")``)
and on the thread-level one (``run_at_thread_level``: the final lowered IR, thread by thread), its
``run`` argument the one or the other, called as ``run(prim_func, *arrays)``."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.interpreter.threads import run_at_thread_level


def _tile_level(func, *arrays):
    return tw.compile(func, target="cpu")(*arrays)


on_both_interpreters = pytest.mark.parametrize("run", [_tile_level, run_at_thread_level],
                                               ids=["tile level", "thread level"])
