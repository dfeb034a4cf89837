"""On the GPU, a global tensor under ``T.annotate_layout`` (CPU tests:
tests/tilelang_compat/test_global_layouts.py): atomic adds land where the layout puts them and a
copy reads them back, against numpy on random inputs."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_global_layouts import B, D, H, L, expected_memory, gather_to_half, scatter_doubled

pytestmark = gpu_marks(9, 0)


def test_a_laid_out_tensor_on_the_gpu(torch):
    x = torch.randn(B, L, H, D, device="cuda")
    dq = torch.zeros(B, L, H, D, device="cuda")
    tw.compile(scatter_doubled)(x, dq)
    assert np.array_equal(dq.cpu().numpy().ravel(), expected_memory(x.cpu().numpy()))
    out = torch.zeros(B, L, H, D, dtype=torch.float16, device="cuda")
    tw.compile(gather_to_half)(dq, out)
    assert torch.equal(out, (2 * x).half())
