"""A select decided per tile (``split_uniform_selects``) on the H200: every element of the masked
tile matrix is what the comparison gives it, for each comparison and for masks whose boundary
falls inside tiles and between them."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.examples.edge_cases import masked_scores
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("op", [">=", ">", "<=", "<"])
@pytest.mark.parametrize("shift", [0, 3, -64, 70])
def test_masked_tiles_match_the_comparison_everywhere(torch, op, shift):
    kernel = tw.compile(masked_scores(op=op, shift=shift))
    out = torch.full((256, 256), float("nan"), device="cuda")
    kernel(out)
    r = torch.arange(256, device="cuda")[:, None]
    c = torch.arange(256, device="cuda")[None, :] + shift
    want = {">=": r >= c, ">": r > c, "<=": r <= c, "<": r < c}[op].float()
    torch.testing.assert_close(out, want, rtol=0, atol=0)
