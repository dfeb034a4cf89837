"""On the GPU, ``if tx < C:`` scopes (CPU tests: tests/tilelang_compat/test_thread_range_scopes.py)
against float64 (or exact integer) references on random inputs: the first warps' own tile work, an
``else`` as the other threads' scope, and a shared-memory scan ordered by the scope's named barrier
(``T.sync_threads(3, 64)``); ``if tx >= C:`` as the last threads' scope."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_thread_range_scopes import (first_warps_sum_rows, last_warps_first, scan_in_the_first_warps,
                                                      split_by_warps)

pytestmark = gpu_marks(9, 0)


def test_the_first_warps_do_their_tile_work(torch):
    x = torch.randn(4, 64, device="cuda")
    out = torch.zeros(64, device="cuda")
    tw.compile(first_warps_sum_rows)(x, out)
    torch.testing.assert_close(out.double(), x.double().sum(0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernel", [split_by_warps, last_warps_first], ids=["tx < 32", "tx >= 96"])
def test_an_else_is_the_other_threads_scope(torch, kernel):
    x = torch.randn(128, device="cuda")
    y, z = torch.zeros(128, device="cuda"), torch.zeros(128, device="cuda")
    tw.compile(kernel)(x, y, z)
    torch.testing.assert_close(y, x * 2, rtol=0, atol=0)
    torch.testing.assert_close(z, torch.full_like(x, x.max().item()), rtol=0, atol=0)


def test_a_named_barrier_of_the_scope_orders_a_shared_scan(torch):
    x = torch.randint(-50, 50, (64,), device="cuda", dtype=torch.int32)
    out = torch.zeros(64, device="cuda", dtype=torch.int32)
    tw.compile(scan_in_the_first_warps)(x, out)
    want = np.cumsum(x.cpu().numpy()[::-1])[::-1]
    np.testing.assert_array_equal(out.cpu().numpy(), want)

