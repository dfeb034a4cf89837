"""On the GPU, gemms on column blocks of one shared tile (CPU tests:
tests/tilelang_compat/test_column_blocks.py) against float64 of the same inputs."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_column_blocks import D, M, N, TAIL, scores

pytestmark = gpu_marks(9, 0)


def test_gemms_on_column_blocks_of_one_tile(torch):
    q = torch.randn(M, D + TAIL, device="cuda", dtype=torch.float16)
    k = torch.randn(N, D, device="cuda", dtype=torch.float16)
    kt = torch.randn(N, TAIL, device="cuda", dtype=torch.float16)
    s = torch.zeros(M, N, device="cuda")
    tw.compile(scores())(q, k, kt, s)
    q64 = q.double()
    want = q64[:, :D] @ k.double().T + q64[:, D:] @ kt.double().T
    torch.testing.assert_close(s.double(), want, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("form", [dict(whole_copy=True), dict(inside=True)], ids=["whole-copy", "inside"])
def test_a_tile_read_in_place_in_column_blocks(torch, form):
    """The tile stays whole and wgmma reads each block of whole panels where it stands."""
    q = torch.randn(M, D + TAIL, device="cuda", dtype=torch.float16)
    k = torch.randn(N, D, device="cuda", dtype=torch.float16)
    kt = torch.randn(N, TAIL, device="cuda", dtype=torch.float16)
    s = torch.zeros(M, N, device="cuda")
    tw.compile(scores(**form))(q, k, kt, s)
    q64 = q.double()
    tail = slice(D - 64, D + TAIL - 64) if form.get("inside") else slice(D, None)
    want = q64[:, :D] @ k.double().T + q64[:, tail] @ kt.double().T
    torch.testing.assert_close(s.double(), want, rtol=1e-3, atol=1e-2)
