"""The reordered grid on the H200 (``rasterize_blocks``' heaviest-first order): every block still
runs once, with its own bx, so each row holds what its own loop summed."""

from __future__ import annotations

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

import tileworkbench.language as T
from test_block_order import triangle

pytestmark = gpu_marks(9, 0)


def test_each_block_of_a_reordered_grid_sums_its_own_row(torch):
    kernel = tw.compile(triangle(lambda bx, by: T.min(bx + 1, 6)))
    assert "7 - blockIdx.x" in kernel.get_kernel_source()
    out = torch.full((8, 32), float("nan"), device="cuda")
    kernel(out)
    want = torch.minimum(torch.arange(1, 9, device="cuda"), torch.tensor(6, device="cuda")).float()
    torch.testing.assert_close(out, want[:, None].expand(8, 32), rtol=0, atol=0)
