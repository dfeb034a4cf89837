"""Property: fragment reads through a shared copy (transposed reads and stores, column vectors,
computed indices) at random shapes match numpy on both CPU interpreters, or are refused with a
CompileError; never a wrong number or an internal error. A slice of
``scripts/experiments/shared_copy_forms.py`` (its forms, draws and references)."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("shared_copy_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(12)]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: "-".join(map(str, c)))
def test_shared_copy_forms_match_numpy_or_are_refused(config):
    outcome = swept(SWEEP, config, seed=sum(config[1:5]))
    assert outcome == "ok" or outcome.startswith("refused: ")
