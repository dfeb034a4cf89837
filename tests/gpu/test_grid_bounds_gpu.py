"""On the GPU, rows the grid keeps inside a tensor of a size known at launch (no check) and a grid
that overhangs it (checked), at a size that leaves a partial block, against numpy (CPU tests:
tests/tilelang_compat/test_grid_bounds.py)."""

from __future__ import annotations

import numpy as np

from tileworkbench.testing import gpu_marks

from tilelang_compat.test_grid_bounds import halves, quads

pytestmark = gpu_marks(9, 0)


def test_grid_bounds(torch):
    for rows in (10, 4096):
        x = torch.randn(rows, 64, device="cuda")
        for make in (halves, quads):
            np.testing.assert_array_equal(make()(x).cpu().numpy(), x.cpu().numpy() * 2)


def test_a_serial_loops_stores_past_the_rows_stay_inside(torch):
    """TileLang's clean_and_maintain_logits in small: chunks of 1024 columns over rows of 200 (CPU
    tests: tests/tilelang_compat/test_serial_store_bounds.py). The next tensor in memory is left alone."""
    from tilelang_compat.test_serial_store_bounds import _inputs, masked, masked_rows

    logits, starts, ends = _inputs(np.random.default_rng(5), rows=64)
    want = masked(logits, starts, ends)
    block = torch.empty(2 * logits.size, device="cuda")  # Logits, then a neighbour it must not touch
    block[logits.size:] = 7.0
    got = block[:logits.size].view(logits.shape)
    got.copy_(torch.from_numpy(logits))
    masked_rows()(got, torch.from_numpy(starts).cuda(), torch.from_numpy(ends).cuda())
    np.testing.assert_array_equal(got.cpu().numpy(), want)
    assert bool((block[logits.size:] == 7.0).all())
