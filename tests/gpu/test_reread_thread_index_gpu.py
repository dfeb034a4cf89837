"""On the GPU against float64 on random inputs: kernels whose main loop reads the thread index
again (``passes/reread_thread_index.py``; CPU tests: tests/test_reread_thread_index.py), asked for
by the config and chosen by ``jit.lower`` for a kernel that spills."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.examples.mla_pieces import dq_and_dkv_steps
from tileworkbench.testing import gpu_marks

from test_reread_thread_index import REREAD, scaled_rows

pytestmark = gpu_marks(9, 0)


def test_scaled_rows_with_the_index_read_again(torch):
    kernel = tw.compile(scaled_rows, pass_configs=REREAD)
    assert "tw::thread_index()" in kernel.get_kernel_source()
    a = torch.randn(8, 256, device="cuda")
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, a * torch.arange(1, 9, device="cuda", dtype=torch.float32)[:, None])


@pytest.mark.parametrize("reread", [True, False])
def test_a_starved_kernel_in_either_form(torch, reread):
    kernel = tw.compile(dq_and_dkv_steps(steps=2), pass_configs={tw.PassConfigKey.TW_REREAD_THREAD_INDEX: reread})
    assert ("tw::thread_index()" in kernel.get_kernel_source()) == reread
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    p, kv = torch.randn(2, 64, 32, **bf16), torch.randn(2, 32, 512, **bf16)
    q, do = torch.randn(64, 512, **bf16), torch.randn(64, 512, **bf16)
    dq = torch.full((64, 512), float("nan"), device="cuda")
    dkv = torch.full((2, 32, 512), float("nan"), device="cuda")
    kernel(p, kv, q, do, dq, dkv)
    want_dq = sum(p[s].double() @ kv[s].double() for s in range(2))
    want_dkv = torch.stack([p[s].double().T @ (q.double() + do.double()) for s in range(2)])
    torch.testing.assert_close(dq.double(), want_dq, rtol=1e-3, atol=1e-3 * 2 ** 0.5 * 8)
    torch.testing.assert_close(dkv.double(), want_dkv, rtol=1e-3, atol=2e-2)
