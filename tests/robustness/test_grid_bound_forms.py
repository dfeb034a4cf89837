"""Property: accesses a grid of a size known only at launch proves inside the tensor (``bx // c``
on ``rows * c`` blocks) lose their checks, and no other: at random grids (``rows * c + e``,
``T.ceildiv(rows, c)``), row indices and row counts leaving partial blocks, both CPU interpreters
(the thread level checks every access against the tensor's bounds) compute what numpy does. A
slice of ``scripts/experiments/grid_bound_forms.py`` (200 draws, none wrong; it catches an
off-by-one in the proof: 26 of 100 draws read out of bounds with it)."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("grid_bound_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(8)] + [
    (2, "times", 0, "div", True, 5),  # bx // 2 on 2 * rows blocks: proven
    (2, "times", 1, "div", False, 5),  # one block more: (2 * rows) // 2 = rows, checked
    (3, "ceildiv", 0, "block_rows", False, 7),  # blocks of 3 rows over 7: checked
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_grid_bounds_compute_what_numpy_does(config):
    result = swept(SWEEP, config, seed=3)
    assert result.startswith("ok"), result
    if config == DRAWS[-3]:
        assert result == "ok, proven"
    if config in DRAWS[-2:]:
        assert result == "ok, checked"
