"""Property: a ``T.view`` over its tile's bytes at random (writes and reads through the tile and
through the view at shifted columns, some under a thread-variant ``if``, some user barriers)
compiles to kernels whose thread-level run on the compiler's shared-memory plan has no race and
matches numpy, or is refused with a CompileError (a read through one name of what the other wrote
last). A slice of ``scripts/experiments/shared_view_forms.py``, which also showed that it finds
a sync pass not told of the sharing (25 races in 60 draws)."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("shared_view_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(10)] + [
    (("write_s", 3, 128), ("read_s", 5, 128), ("write_v", 7, 128), ("read_v", 9, 40)),  # staged as the MLA does
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_shared_views_race_free_and_right_or_refused(config):
    outcome = swept(SWEEP, config, seed=7)
    assert outcome == "ok" or outcome.startswith("refused: ")
    if config is DRAWS[-1]:
        assert outcome == "ok"
