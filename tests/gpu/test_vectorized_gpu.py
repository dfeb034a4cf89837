"""``T.vectorized`` copies on the H200 (``passes/vectorize_loops.py``): 16-byte moves between a
thread's array and a tensor or a shared tile give the same answer as element by element, on random
inputs, and a tensor whose address breaks the 16-byte alignment the kernel relies on is refused at
the call (never read misaligned)."""

from __future__ import annotations

import pytest

from tileworkbench.errors import KernelRuntimeError
from tileworkbench.testing import gpu_marks

from tilelang_compat.test_vectorized_and_sub_sweep_rows import reversed_through_shared, scaled_rows

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("per_thread, offset", [(8, 0), (4, 2), (3, 0), (4, 1)])
def test_vectorized_row_scaling_matches_torch(torch, per_thread, offset):
    a = torch.randn(37, 128 * per_thread + offset, device="cuda")
    got = scaled_rows(a, per_thread=per_thread, offset=offset)
    torch.testing.assert_close(got[:, offset:], a[:, offset:] * 2.0, rtol=0, atol=0)


def test_rows_reversed_through_shared_memory_match_torch(torch):
    a = torch.randn(64, 1024, device="cuda")
    want = a.view(64, 128, 8).flip(1).reshape(64, 1024)
    torch.testing.assert_close(reversed_through_shared(a), want, rtol=0, atol=0)


def test_a_tensor_off_the_16_byte_grid_is_refused_at_the_call(torch):
    kernel = scaled_rows.compile(n=16, per_thread=8, offset=0)
    storage = torch.randn(16 * 1024 + 1, device="cuda")
    shifted = storage[1:].view(16, 1024)  # 4 bytes past a 16-byte boundary
    with pytest.raises(KernelRuntimeError, match="16-byte aligned"):
        kernel(shifted)
