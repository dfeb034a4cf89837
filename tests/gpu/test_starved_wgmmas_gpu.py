"""On the GPU against float64 on random inputs: a kernel short of registers
(``examples.mla_pieces.dq_and_dkv_steps``, the sparse MLA backward's step in miniature), whose
wgmma gemm has two m64n256 instructions side by side (each chunk's run back to back,
``tw/wgmma.h``) and a scheduling fence after it (``isolate_starved_wgmmas``)."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.examples.mla_pieces import dq_and_dkv_steps
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("steps", [1, 4])
def test_dq_accumulates_over_steps_and_each_dkv_is_its_own(torch, steps):
    kernel = tw.compile(dq_and_dkv_steps(steps=steps))
    assert "tw::schedule_fence();" in kernel.get_kernel_source()
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    p = torch.randn(steps, 64, 32, **bf16)
    kv = torch.randn(steps, 32, 512, **bf16)
    q = torch.randn(64, 512, **bf16)
    do = torch.randn(64, 512, **bf16)
    dq = torch.full((64, 512), float("nan"), device="cuda")
    dkv = torch.full((steps, 32, 512), float("nan"), device="cuda")
    kernel(p, kv, q, do, dq, dkv)
    want_dq = sum(p[s].double() @ kv[s].double() for s in range(steps))
    want_dkv = torch.stack([p[s].double().T @ (q.double() + do.double()) for s in range(steps)])
    torch.testing.assert_close(dq.double(), want_dq, rtol=1e-3, atol=1e-3 * steps ** 0.5 * 8)
    torch.testing.assert_close(dkv.double(), want_dkv, rtol=1e-3, atol=2e-2)
