"""Shared tiles placed over each other by lifetime (``plan_shared_memory``) on the GPU: a kernel of
four 64 KB tiles in two phases, 128 KB planned, against numpy on random inputs."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.examples.edge_cases import two_phase_shared_tiles
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_two_phases_over_the_same_bytes(torch):
    a, b = torch.randn(128, 128, device="cuda"), torch.randn(128, 128, device="cuda")
    total, diff = torch.full_like(a, float("nan")), torch.full_like(a, float("nan"))
    kernel = tw.compile(two_phase_shared_tiles())
    kernel(a, b, total, diff)
    a64, b64 = a.double().cpu().numpy(), b.double().cpu().numpy()
    np.testing.assert_allclose(total.cpu().numpy(), a64 + b64.T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(diff.cpu().numpy(), a64 - b64.T, rtol=1e-6, atol=1e-6)
