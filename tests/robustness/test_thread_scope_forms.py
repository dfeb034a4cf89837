"""Property: ``if tx < C:`` thread scopes (fills and copies, ``T.Parallel`` loops, reductions, a scan
ordered by the scope's named barrier, an ``if``/``else``, ``if tx >= C``, an ``if``/``elif``/``else``
chain) at random block and scope sizes match numpy
on both CPU interpreters, and tile work under a condition of part of a warp is refused; never a
wrong number or an internal error. A slice of ``scripts/experiments/thread_scope_forms.py``."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("thread_scope_forms")
# twelve draws, and forms they may leave out (a T.Parallel loop in the scope; an if/else; tx >= C)
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(12)] + [("parallel", 160, 96, 256), ("if_else", 96, 32, 64),
                                                                   ("at_least", 256, 128, 128),
                                                                   ("chain", 384, 128, 256), ("chain", 96, 64, 64)]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: "-".join(map(str, c)))
def test_thread_scope_forms_match_numpy_or_are_refused(config):
    outcome = swept(SWEEP, config, seed=sum(config[1:]))
    if config[0] == "part_of_warp":
        assert outcome.startswith("refused: ") and "may differ between the block's threads" in outcome
    else:
        assert outcome == "ok"
