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
