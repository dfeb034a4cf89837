"""On the GPU against float64 on random inputs: warp-specialised loops whose work reads a tile the
loop loads (one, two and three stages), and a split whose tiles fit only placed by lifetime (CPU
tests: tests/test_ws_reads_loaded_tiles.py)."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_ws_reads_loaded_tiles import BIG, SCALE, scored_sum

pytestmark = gpu_marks(9, 0)


def _want(torch, k, q, lse, epilogue_tiles=0):
    p = torch.exp2(k.double() @ q.double().T * SCALE - lse.double()[None, :]).half().double()
    return p @ q.double() + epilogue_tiles


@pytest.mark.parametrize("params", [dict(stages=1), dict(stages=2), dict(stages=3), BIG],
                         ids=["1 stage", "2 stages", "3 stages", "tiles by lifetime"])
def test_the_split_matches_float64(torch, params):
    n, d = params.get("n", 256), params.get("d", 64)
    assert tw.lower(scored_sum(**params), target="sm_90a").func.attrs["warp_specialized"]["applied"]
    kernel = tw.compile(scored_sum(**params))
    k = (torch.randn(n, d, device="cuda") * 0.5).half()
    q = (torch.randn(n, d, device="cuda") * 0.5).half()
    lse = torch.randn(n, device="cuda") + 4
    o = torch.full((n, d), float("nan"), device="cuda")
    kernel(k, q, lse, o)
    torch.testing.assert_close(o.double(), _want(torch, k, q, lse, params.get("epilogue_tiles", 0)),
                               rtol=2e-3, atol=2e-3)
