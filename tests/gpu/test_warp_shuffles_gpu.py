"""On the H200, TileLang's warp shuffles and warp reductions (CPU tests: tests/test_warp_shuffles.py)
against numpy over the lanes of each warp."""

import sys

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_shuffles_and_warp_reductions(torch):
    sys.path.insert(0, __file__.rsplit("/gpu/", 1)[0])
    from test_warp_shuffles import expected, shuffles

    a = np.random.default_rng(2).integers(-1000, 1000, 64).astype(np.int32)
    out = torch.zeros(9, 64, dtype=torch.int32, device="cuda")
    tw.compile(shuffles)(torch.from_numpy(a).cuda(), out)
    assert np.array_equal(out.cpu().numpy(), expected(a))
