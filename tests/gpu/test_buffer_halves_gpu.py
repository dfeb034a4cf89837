"""On the GPU, the halves of a shared double buffer with no barrier between them (CPU tests:
tests/test_buffer_halves.py): the top-k selector's rounds of filtering from one half into the
other under a thread-variant ``if``, and halves swapped every round, on random inputs."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from test_buffer_halves import N, ROUNDS, filter_rounds, swap_halves

pytestmark = gpu_marks(9, 0)


def test_filter_rounds(torch):
    for seed in range(4):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(N, generator=gen).cuda()
        thresholds = torch.sort(torch.rand(ROUNDS, generator=gen) * 2 - 1.5).values.cuda()
        out = torch.full((N,), -1, device="cuda", dtype=torch.int32)
        count = torch.zeros(1, device="cuda", dtype=torch.int32)
        tw.compile(filter_rounds())(x, thresholds, out, count)
        want = np.flatnonzero(x.cpu().numpy() > thresholds.max().item())
        assert int(count.item()) == len(want)
        assert sorted(out.cpu().numpy()[:len(want)].tolist()) == want.tolist()


def test_swap_halves(torch):
    x = torch.randn(N, device="cuda")
    y = torch.zeros(N, device="cuda")
    tw.compile(swap_halves())(x, y)
    torch.testing.assert_close(y, torch.roll(x, -4) + 4.0)
