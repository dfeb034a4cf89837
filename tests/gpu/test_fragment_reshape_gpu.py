"""Fragment views on the GPU (``frontend.fragment_views``): the heads of a viewed fragment summed in
runs, and DeepSeek's FP8 indexer in both block forms (four warpgroups along M; two side by side
along N on a 64-row tile, FP8 wgmma reading its rows of the K-major B tile), against float64."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.examples.edge_cases import head_sums
from tileworkbench.examples.tilelang_programs import fp8_indexer
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_head_sums(torch):
    a = torch.randn(64, 128, device="cuda")
    w = torch.randn(4, 32, device="cuda")
    out = torch.zeros(4, 64, device="cuda")
    tw.compile(head_sums())(a, w, out)
    want = (a.double().relu().view(64, 4, 32) * w.double()).sum(-1).T
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("heads, block_N, threads", [(32, 256, 512), (64, 64, 256), (16, 128, 256)])
def test_fp8_indexer(torch, heads, block_N, threads):
    s, skv = 300, 1000  # partial blocks of tokens and keys
    q, k, k_scale, weights = fp8_indexer._inputs(torch, s, skv, heads, 64)
    out = fp8_indexer.mqa_logits(q, k, k_scale, weights, heads=heads, index_dim=64, block_N=block_N, threads=threads)
    scores = (q.double() @ k.double().T).relu().view(s, heads, skv)
    want = (scores * weights.double()[:, :, None]).sum(1) * k_scale.double()
    # Hopper's FP8 wgmma adds its products with fewer bits than float32 (about 14): on the H100 3 of
    # 300000 logits were 1.4e-4 of the largest one off (session 27); a wrong head or run is off by whole terms
    np.testing.assert_allclose(out.double().cpu().numpy(), want.cpu().numpy(), rtol=1e-3,
                               atol=1e-3 * float(want.abs().max()))
