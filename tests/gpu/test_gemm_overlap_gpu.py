"""The overlapped two-gemm schedule on the H200 (``warp_specialize``'s ``rules.OverlapPlan``): the
attention forward kernel, causal and not, with a ragged last key tile, and flash decoding, against
float32 torch on random inputs, with the overlap and without it."""

from __future__ import annotations

import pytest

import tileworkbench as tw
from tileworkbench.bench.attention import check, compile_decode, reference
from tileworkbench.examples.attention import PASS_CONFIGS, mha_fwd
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "plain"])
@pytest.mark.parametrize("seq, causal", [(1024, False), (1024, True), (1000, False), (2048, True)])
def test_attention_matches_torch(torch, overlap, seq, causal):
    configs = {**PASS_CONFIGS, tw.PassConfigKey.TW_GEMM_OVERLAP: overlap}
    func = mha_fwd(2, 4, seq, 128, causal)
    kernel = tw.compile(func, out_idx=[3], pass_configs=configs)
    assert tw.lower(func, pass_configs=configs).func.attrs["warp_specialized"]["gemm_overlap"] is overlap
    torch.manual_seed(seq + causal)
    q, k, v = (torch.randn(2, 4, seq, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    result = check(torch, kernel(q, k, v), reference(torch, q, k, v, causal))
    assert result["correct"], result


def test_flash_decoding_matches_torch(torch):
    kernel = compile_decode(4, 8, 1, 4096, 128)
    torch.manual_seed(5)
    q = torch.randn(4, 8, 1, 128, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(4, 8, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    result = check(torch, kernel(q, k, v), reference(torch, q, k, v, False))
    assert result["correct"], result
