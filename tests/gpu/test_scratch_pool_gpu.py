"""Reductions' scratch tiles placed over each other (``plan_shared_memory``) on the GPU: eight row
reductions of one shared tile, against float64 numpy on random inputs."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.examples.edge_cases import many_row_reductions, many_row_reductions_expected
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_eight_reductions_over_one_scratch_place(torch):
    a = torch.randn(64, 128, device="cuda")
    out = torch.zeros(8, 64, device="cuda")
    tw.compile(many_row_reductions())(a, out)
    np.testing.assert_allclose(out.cpu().numpy(), many_row_reductions_expected(a.cpu().numpy()), rtol=1e-5, atol=1e-4)
