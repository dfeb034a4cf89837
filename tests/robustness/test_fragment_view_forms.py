"""Property: fragment views compute what numpy does. At random sizes, thread counts, weights (a
fragment, global memory, none), reductions of the view along its split dimension (sum, max, min,
absmax; ``clear`` or not) and ways of storing (the result in order or transposed, the view itself),
both CPU interpreters agree with numpy. A slice of ``scripts/experiments/fragment_view_forms.py``."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("fragment_view_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(8)] + [
    (64, 4, 32, 128, "fragment", "sum", True, "transposed", "rgh"),  # the FP8 indexers' form
    (16, 1, 8, 64, "global", "max", False, "copy", "rgh"),  # a group of one: the whole row is the run
    (8, 3, 5, 32, "none", "absmax", True, "view", "rgh"),  # runs of 5 over one warp; the view stored back
    (64, 4, 16, 128, "fragment", "sum", True, "copy", "hrg"),  # the loop's dimensions in another order
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_fragment_views_compute_what_numpy_does(config):
    assert swept(SWEEP, config, seed=5) == "ok"
