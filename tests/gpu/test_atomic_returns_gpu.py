"""On the GPU, ``T.atomic_add(..., return_prev=True)`` (CPU tests:
tests/tilelang_compat/test_atomic_returns.py): the places threads take in shared counters, checked
as a whole (counts, each bucket's places a permutation), and stream compaction, on random inputs."""

from __future__ import annotations

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_atomic_returns import bucket_places, check_places, compact_positives

pytestmark = gpu_marks(9, 0)


def test_each_thread_takes_a_place_of_its_own(torch):
    x = torch.randint(0, 1000, (256,), device="cuda", dtype=torch.int32)
    counts = torch.zeros(4, device="cuda", dtype=torch.int32)
    places = torch.full((256,), -1, device="cuda", dtype=torch.int32)
    tw.compile(bucket_places)(x, counts, places)
    check_places(x.cpu().numpy(), counts.cpu().numpy(), places.cpu().numpy())


def test_stream_compaction(torch):
    x = torch.randn(128, device="cuda")
    out, n = torch.zeros(128, device="cuda"), torch.zeros(1, device="cuda", dtype=torch.int32)
    tw.compile(compact_positives)(x, out, n)
    xs = x.cpu().numpy()
    assert int(n.item()) == int((xs > 0).sum())
    assert sorted(out.cpu().numpy()[:int(n.item())].tolist()) == sorted(xs[xs > 0].tolist())
