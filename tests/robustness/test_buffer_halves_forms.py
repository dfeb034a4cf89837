"""Property: the halves of a shared double buffer at random (reads and writes of ``r % 2``,
``(r % 2) ^ 1``, ``(r + 1) % 2``, ``0``, ``1``, some under a thread-variant ``if``, some user
barriers) compile to kernels whose thread-level run has no shared-memory race and matches numpy,
or are refused with a CompileError; never a race, a wrong number or an internal error. A slice of
``scripts/experiments/buffer_halves_forms.py``, which also showed that it finds a rule that
trusts too much (every first index counted apart: 48 races in 60 draws; halves kept apart across
a loop's back edge: 1 in 100)."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("buffer_halves_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(10)] + [
    (3, (("move_if", "r % 2", "(r % 2) ^ 1", 5, 1.0, 100),)),  # the top-k selector's form: no barrier needed
    (4, (("move", "(r + 1) % 2", "r % 2", 7, 2.0, 40),)),
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_buffer_halves_race_free_and_right_or_refused(config):
    outcome = swept(SWEEP, config, seed=7)
    assert outcome == "ok" or outcome.startswith("refused: ")
    if config in DRAWS[-2:]:
        assert outcome == "ok"
