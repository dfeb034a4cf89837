"""Vector moves on the H200: ``T.vectorized`` copies (``passes/vectorize_loops.py``) and element-wise
``T.Parallel`` loops moved in runs (``passes/rules/vector_runs.py``) give the same answer as element
by element, on random inputs (tiles that divide the problem and tiles hanging over its edge), and a
tensor whose address breaks the 16-byte alignment the kernel relies on is refused at the call
(never read misaligned)."""

from __future__ import annotations

import pytest

from tileworkbench.errors import KernelRuntimeError
from tileworkbench.testing import gpu_marks

import tileworkbench.language as T
from tilelang_compat.test_vectorized_and_sub_sweep_rows import (reversed_through_shared, scaled_rows,
                                                               scaled_through_shared)

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


@pytest.mark.parametrize("M, N, dtype", [(256, 512, T.float16), (192, 256, T.float32), (1000, 1000, T.float16)])
def test_element_wise_runs_through_shared_memory_match_torch(torch, M, N, dtype):
    kernel = scaled_through_shared.compile(M=M, N=N, block_M=64, block_N=64, dtype=dtype)
    a = torch.randn(M, N, device="cuda", dtype=torch.float16 if dtype == T.float16 else torch.float32)
    want = (a.double() * 2.0 * 2.0).to(a.dtype)  # exact: scaling by powers of two
    torch.testing.assert_close(kernel(a), want, rtol=0, atol=0)
