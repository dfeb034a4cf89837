"""Property: rows gathered and scattered through an index table whose own index is known only at run
time (a start read from a tensor: ``Idx[k + i]`` may fall outside the table, and the row it gives
outside the data) compute what numpy computes on both CPU interpreters, the thread level checking
that no access, the checks' own included, leaves its tensor. A slice of
``scripts/experiments/gather_scatter_forms.py`` (200 draws: all ok; with session 35's guard fix
taken out, 6 of 40 read the table out of bounds in a store's check; with its copy fix taken out, 4
of 60 tile copies read rows before the data)."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("gather_scatter_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(10)] + [
    ("scatter_add", "float32", 64, 32, 64, 45),  # past the table's end: runs of four skipped there
    ("scatter", "float16", 16, 16, 256, -6),  # before its start
    ("gather", "float16", 64, 32, 128, 28),  # 16-byte runs, rows from past the table's end
    ("copy_rows", "float16", 64, 16, 64, 28),  # tile copies of negative rows: zeros
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: "-".join(map(str, c)))
def test_gathers_and_scatters_through_an_unchecked_start_match_numpy(config):
    assert swept(SWEEP, config, seed=7) == "ok"
