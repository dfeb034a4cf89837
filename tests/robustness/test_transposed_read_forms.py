"""Property: ``T.Parallel`` nests that read fragments transposed compute what numpy does. At random
sizes, thread counts and output types, with the fragment loaded or updated first, its row maxima
read beside it or not, a second fragment read in the loop's own order or not (which keeps the
shared copy) and the result stored to global memory or through a shared tile, both CPU interpreters
agree with numpy. A slice of ``scripts/experiments/transposed_read_forms.py``."""

import random

import pytest

from .harness import experiment, swept

SWEEP = experiment("transposed_read_forms")
DRAWS = [SWEEP.draw(random.Random(seed)) for seed in range(8)] + [
    (256, 4, 512, "load", "global", False, False, "float32"),  # the FP8 indexer's logits: (block_N, block_Q) read as [n, q]
    (32, 64, 128, "scaled", "shared", True, False, "float16"),  # through a shared tile, with the rows' maxima
    (16, 32, 64, "load", "global", True, True, "float32"),  # a second fragment in the loop's order: a shared copy
]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: str(abs(hash(c)) % 10**8))
def test_transposed_reads_compute_what_numpy_does(config):
    assert swept(SWEEP, config, seed=7) == "ok"
