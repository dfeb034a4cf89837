"""On the GPU, a gather issued ahead by the software pipeline as cp.async (zero-filled rows out of
range), feeding the gemm of its own iteration and the threads' copy out (CPU tests:
tests/tilelang_compat/test_pipelined_gathers.py)."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_pipelined_gathers import (BI, CHUNKS, COLS, N, SOURCE_ROWS, expected_sum, gathered,
                                                   indices, pipelined_gather_copy, pipelined_gather_gemm)

pytestmark = gpu_marks(9, 0)


def test_pipelined_gathers(torch):
    x = torch.randn(SOURCE_ROWS, COLS, device="cuda", dtype=torch.float16)
    idx = torch.from_numpy(indices(3)).cuda()
    w = torch.randn(N, COLS, device="cuda", dtype=torch.float16)
    out = torch.zeros(BI, N, device="cuda")
    tw.compile(pipelined_gather_gemm)(x, idx, w, out)
    want = expected_sum(x.cpu().numpy(), idx.cpu().numpy(), w.cpu().numpy())
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-3, atol=1e-2)
    y = torch.zeros(CHUNKS, BI, COLS, device="cuda", dtype=torch.float16)
    tw.compile(pipelined_gather_copy)(x, idx, y)
    rows = gathered(x.cpu().numpy(), idx.cpu().numpy()).reshape(CHUNKS, BI, COLS)
    np.testing.assert_array_equal(y.cpu().numpy(), (rows * 2)[:, :, ::-1])
