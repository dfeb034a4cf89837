"""On the H200, reductions along rows whose length neither divides nor is divided by the block's
threads (rows padded in the fragment layout, ``ir.layout.BlockedLayout.row``; CPU tests:
tests/test_padded_rows.py): RMSNorm at N = 1000 and 129, LayerNorm at D = 1000, top-k over rows of
100, each against a float64 reference on random inputs."""

from __future__ import annotations

import pytest

from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("m,n,blk_m", [(256, 1000, 1), (256, 1000, 2), (100, 129, 1), (100, 24, 8)])
def test_rms_norm_over_rows_the_threads_do_not_divide(torch, m, n, blk_m):
    from tileworkbench.examples.tilelang_programs import norms

    x = torch.randn(m, n, device="cuda", dtype=torch.float32)
    got = norms.rms_norm.compile(M=m, N=n, blk_m=blk_m)(x)
    want = x.double() * (x.double().pow(2).mean(-1, keepdim=True) + 1e-12).rsqrt()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_layernorm_over_rows_the_threads_do_not_divide(torch):
    from tileworkbench.examples.tilelang_programs import norms

    rows, d = 300, 1000
    x, gamma, beta = (torch.randn(*s, device="cuda", dtype=torch.float32) for s in ((rows, d), (d,), (d,)))
    y = torch.empty(rows, d, device="cuda", dtype=torch.float32)
    mean, rstd = (torch.empty(rows, device="cuda", dtype=torch.float32) for _ in range(2))
    kernel = norms.layernorm_fwd(rows, d, in_dtype="float32", out_dtype="float32")
    kernel(x, gamma, beta, y, mean, rstd)
    x64 = x.double()
    want_mean = x64.mean(-1)
    want_rstd = ((x64 - want_mean[:, None]).pow(2).mean(-1) + 1e-5).rsqrt()
    torch.testing.assert_close(mean.double(), want_mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd.double(), want_rstd, rtol=1e-4, atol=1e-5)
    want = (x64 - want_mean[:, None]) * want_rstd[:, None] * gamma.double() + beta.double()
    torch.testing.assert_close(y.double(), want, rtol=1e-4, atol=1e-4)


def test_top_k_over_rows_of_100(torch):
    from tileworkbench.examples.tilelang_programs import topk

    logits = topk._distinct_logits(torch, 512, 100)
    values, indices = topk.top_k_rows.compile(M=512, N=100, topk=4, blk_m=64)(logits)
    want_values, want_indices = logits.topk(4, dim=1)
    torch.testing.assert_close(values, want_values, rtol=0, atol=0)
    assert torch.equal(indices.long(), want_indices)
