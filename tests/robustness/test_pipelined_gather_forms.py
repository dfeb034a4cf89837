"""Property: gathers in ``T.Pipelined`` loops at random (element types, tile sizes, 1-3 stages, a
row shift bound before the loop or computed in it, a reader of the tile before the gather, a writer
after its reader) compute what numpy computes iteration by iteration on both CPU interpreters (the
thread level with its race records and its model of ``cp.async``), whether the pipeline issued the
gather ahead or left it in place. A slice of ``scripts/experiments/pipelined_gather_forms.py``
(200 draws: 80 issued ahead, 120 in place, no bug; it finds a rule that trusts too much: with the
reader before the gather not counted, 5 of 60 draws went wrong; with an index read from the
loop's own values trusted, 3 of 60)."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("pipelined_gather_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(8)] + [
    ("float16", 64, 16, 4, 2, "let", False, False),  # issued ahead, a name bound before the loop in its rows
    ("float32", 12, 8, 3, 3, "none", False, True),  # three stages; a writer after the reader: in place
    ("float16", 32, 8, 4, 2, "none", True, False),  # a reader before the gather: in place
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_pipelined_gathers_compute_what_numpy_does(config):
    result = swept(SWEEP, config, seed=3)
    assert result.startswith("ok"), result
    if config == DRAWS[-3]:
        assert result == "ok, ahead"
    if config in DRAWS[-2:]:
        assert result == "ok, in place"
