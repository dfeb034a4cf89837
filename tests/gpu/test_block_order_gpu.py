"""The reordered grid on the H200 (``rasterize_blocks``' heaviest-first order): every block still
runs once, with its own indices, so each row holds what its own loop summed and attention's heads
each get their own output, whether the order reverses x alone, runs across the whole grid or takes
the heads a panel at a time."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

import tileworkbench.language as T
from test_block_order import triangle

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("rows, order", [(1, "7 - blockIdx.x"), (3, "7 - tw_block / 3")])
def test_each_block_of_a_reordered_grid_sums_its_own_row(torch, rows, order):
    kernel = tw.compile(triangle(lambda bx, by: T.min(bx + 1, 6), rows=rows))
    assert order in kernel.get_kernel_source()
    out = torch.full((8, 32), float("nan"), device="cuda")
    kernel(out)
    want = torch.minimum(torch.arange(1, 9, device="cuda"), torch.tensor(6, device="cuda")).float()
    torch.testing.assert_close(out, want[:, None].expand(8, 32), rtol=0, atol=0)


def test_causal_attention_taking_its_heads_a_panel_at_a_time_matches_float32(torch, monkeypatch):
    import tileworkbench.passes.rasterize_blocks as rb
    from tileworkbench.bench.attention import check, reference
    from tileworkbench.jit import cache
    from tileworkbench.examples.attention import PASS_CONFIGS, mha_fwd

    # 2 batches x 6 heads of 1024 x 128 (512 KB of keys and values a head): panels of 5 pairs,
    # the last of 2, under a 2.5 MB budget
    monkeypatch.setattr(rb, "L2_PANEL_BYTES", 5 * 2 * 1024 * 128 * 2)
    monkeypatch.setattr(cache, "_enabled", False)  # the caches' keys do not know the budget
    kernel = tw.compile(mha_fwd(2, 6, 1024, 128, True), out_idx=[3], pass_configs=PASS_CONFIGS)
    assert "5 (y, z) pairs a panel" in kernel.get_kernel_source() and "tw_panel_pairs" in kernel.get_kernel_source()
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 6, 1024, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    result = check(torch, kernel(q, k, v), reference(torch, q, k, v, True))
    assert result["correct"], result
