"""On the GPU, a mask held as the columns of a wgmma accumulator (one and two warpgroups along N)
against float64 (CPU tests: tests/tilelang_compat/test_fragment_columns.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_fragment_columns import CHUNKS, expected, inputs, masked_scores

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("threads", [128, 256])
def test_masked_scores(torch, threads):
    q, k, idx = inputs(threads)
    s = torch.zeros(64, CHUNKS * 64, device="cuda")
    tw.compile(masked_scores(threads))(*(torch.from_numpy(a).cuda() for a in (q, k, idx)), s)
    np.testing.assert_allclose(s.cpu().numpy(), expected(q, k, idx), rtol=1e-3, atol=1e-2)
