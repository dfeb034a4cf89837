"""Property: fragments read as slices ``F[k, ...]`` compute what numpy does. At random split counts,
rows, widths, thread counts, slice types, and with the slices read by copies or loops and their
maximum taken by a reduction or a loop (MHA inference's combine, in its forms), both CPU
interpreters agree with numpy. A slice of ``scripts/experiments/slice_layout_forms.py``."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("slice_layout_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(8)] + [
    (4, 128, 128, 128, "copy", "reduce", "float16"),  # MHA inference's combine: slices stacked on the rows
    (2, 128, 64, 128, "copy", "loop", "float16"),  # small enough for every thread: a per-thread array copied in
    (3, 16, 32, 64, "loop", "loop", "float32"),  # rows narrower than the threads
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_slices_compute_what_numpy_does(config):
    assert swept(SWEEP, config, seed=5) == "ok"
