"""On the GPU, the control flow the front end learned on 2026-12-05 (CPU tests:
tests/tilelang_compat/test_breaks.py, test_branch_names.py): ``break`` in a ``T.serial`` loop on a
condition every thread shares and on one of a thread's own, and a kernel variable assigned in the
branches of an ``if`` on a thread's own data, against numpy on random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_branch_names import flagged
from tilelang_compat.test_breaks import _halve_reference, first_negative, halve_until_small

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("first", [37.0, 0.5, 1000.0], ids=["six-rounds", "none", "all-eight"])
def test_a_break_on_a_condition_every_thread_shares(torch, first):
    x = (torch.rand(128, device="cuda") * 10 + 0.5)
    x[0] = x[127] = first
    want, want_rounds = _halve_reference(x.cpu().numpy())
    rounds = torch.zeros(1, device="cuda", dtype=torch.int32)
    tw.compile(halve_until_small)(x, rounds)
    assert int(rounds.item()) == want_rounds
    np.testing.assert_allclose(x.cpu().numpy(), want, rtol=1e-6)


def test_a_break_each_thread_takes_on_its_own(torch):
    x = torch.randn(64, device="cuda")
    where = torch.zeros(64, device="cuda", dtype=torch.int32)
    tw.compile(first_negative)(x, where)
    xs = x.cpu().numpy()
    want = [next((j for j in range(64) if xs[(t + j) % 64] < 0), -1) for t in range(64)]
    np.testing.assert_array_equal(where.cpu().numpy(), want)


def test_a_kernel_variable_carries_the_branch_s_value_out(torch):
    x = torch.randn(64, device="cuda")
    w, v = torch.zeros(64, device="cuda", dtype=torch.int32), torch.zeros(64, device="cuda", dtype=torch.int32)
    tw.compile(flagged)(x, w, v)
    xs = x.cpu().numpy()
    np.testing.assert_array_equal(w.cpu().numpy(), np.where(xs < 0, 5, -1))
    np.testing.assert_array_equal(v.cpu().numpy(), np.where(xs < 0, 4, 3))
