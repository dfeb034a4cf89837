"""On the GPU, ``T.reshape`` / ``T.view`` of global tensors (CPU tests:
tests/tilelang_compat/test_reshape.py) against torch in float64 on random inputs."""

from __future__ import annotations

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_reshape import row_sums_of_a_flat_tensor

pytestmark = gpu_marks(9, 0)


def test_a_reshaped_tensor_reads_and_writes_its_memory(torch):
    a = torch.randn(4096, device="cuda")
    b, out = torch.zeros(8, 64, device="cuda"), torch.zeros(64, device="cuda")
    tw.compile(row_sums_of_a_flat_tensor)(a, b, out)
    torch.testing.assert_close(out.double(), a.double().view(64, 64).sum(1), rtol=1e-5, atol=1e-4)
    assert torch.equal(b.view(-1), a[:512] * 2)
