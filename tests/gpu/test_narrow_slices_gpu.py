"""On the GPU, slices of a fragment whose rows are narrower than the block's threads (padded to
whole sweeps, no runs; CPU tests: tests/tilelang_compat/test_fragment_views.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_fragment_views import narrow_slices

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("M", [32, 64, 96])
def test_slices_of_rows_narrower_than_the_threads(torch, M):
    g = torch.randn(4, M, device="cuda", dtype=torch.float16)
    out = torch.zeros(M, device="cuda")
    tw.compile(narrow_slices(M))(g, out)
    g32 = g.float().cpu().numpy()
    np.testing.assert_allclose(out.cpu().numpy(), np.exp2(g32 - g32.max(0)).sum(0), rtol=1e-5)
