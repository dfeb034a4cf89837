"""On the GPU, an accumulator stored to shared memory with stmatrix through a masked expression
(linear attention's ``T.if_then_else(row >= col, s[row, col], 0)`` and three other masks; CPU test:
tests/test_matrix_stores.py), against float64 on random inputs."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_matrix_stores import MASKS, masked_scores

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_masked_scores_match_float64(torch, mask):
    kernel = tw.compile(masked_scores(mask))
    assert "tw::store_matrix_x4(" in kernel.get_kernel_source()
    q = torch.randn(64, 64, device="cuda").half()
    k = torch.randn(64, 64, device="cuda").half()
    s = torch.full((64, 64), float("nan"), device="cuda", dtype=torch.float16)
    kernel(q, k, s)
    rows, cols = torch.meshgrid(torch.arange(64), torch.arange(64), indexing="ij")
    keep = MASKS[mask](rows, cols).to("cuda")
    want = torch.where(keep, q.double() @ k.double().T, torch.zeros((), dtype=torch.float64, device="cuda"))
    torch.testing.assert_close(s.double(), want, rtol=2e-2, atol=2e-2)
