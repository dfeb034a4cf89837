"""``T.sync_grid`` on the GPU against float64 numpy on random inputs: every block reads what all blocks
wrote before the barrier, launch after launch (the barrier's word is zeroed for each), and a grid
that cannot be resident at once is refused by the cooperative launch, not left to hang."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.testing import gpu_marks
from tests.test_grid_sync import partial_sums_combined

pytestmark = gpu_marks(9, 0)


def test_all_blocks_meet_at_the_grid_barrier_launch_after_launch(torch):
    blocks = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = tw.compile(partial_sums_combined(blocks=blocks))
    for seed in range(3):
        torch.manual_seed(seed)
        a = torch.randn(blocks, 128, device="cuda")
        partial = torch.full((blocks,), float("nan"), device="cuda")
        out = torch.full((blocks,), float("nan"), device="cuda")
        kernel(a, partial, out)
        a64 = a.double().cpu().numpy()
        np.testing.assert_allclose(out.cpu().numpy(), a64.sum() - a64.sum(1), rtol=1e-4, atol=1e-3)


def test_a_grid_too_large_to_be_resident_is_refused(torch):
    kernel = tw.compile(partial_sums_combined(blocks=200000))
    a = torch.randn(200000, 128, device="cuda")
    with pytest.raises(KernelRuntimeError, match="COOPERATIVE_LAUNCH_TOO_LARGE.*all its blocks must be resident"):
        kernel(a, torch.empty(200000, device="cuda"), torch.empty(200000, device="cuda"))
        torch.cuda.synchronize()
