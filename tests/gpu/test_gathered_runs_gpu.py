"""On the GPU, rows gathered by an index in 16-byte runs under their bounds check, into a plain
tile and into a gemm's tile in panels (CPU tests: tests/tilelang_compat/test_gathered_runs.py)."""

from __future__ import annotations

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_gathered_runs import COLS, N, ROWS, SOURCE_ROWS, gather, gather_gemm, gathered, indices

pytestmark = gpu_marks(9, 0)


def test_gather_and_gather_gemm(torch):
    x = torch.randn(SOURCE_ROWS, COLS, device="cuda", dtype=torch.float16)
    idx = torch.from_numpy(indices()).cuda()
    y = torch.zeros(ROWS, COLS, device="cuda", dtype=torch.float16)
    tw.compile(gather)(x, idx, y)
    want = gathered(x.cpu().numpy(), idx.cpu().numpy())
    np.testing.assert_array_equal(y.cpu().numpy(), want)
    w = torch.randn(N, COLS, device="cuda", dtype=torch.float16)
    out = torch.zeros(ROWS, N, device="cuda")
    tw.compile(gather_gemm)(x, idx, w, out)
    ref = torch.from_numpy(want).double().cuda() @ w.double().T
    torch.testing.assert_close(out.double(), ref, rtol=1e-3, atol=1e-2)
