"""On the GPU, ``T.gemm`` on int4 tensors stored two values a byte (CPU tests: tests/test_int4.py):
exact against torch's int64 product on random values over the whole range, partial tiles and a K
that is not a multiple of the tile included, and TileLang's example as it calls the kernel (int8
tensors of packed pairs, ``pack_int4``'s order)."""

import pytest

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul_int4
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def _pack(torch, values):
    v = values.to(torch.int16)
    return ((v[..., 0::2] & 0xF) | ((v[..., 1::2] & 0xF) << 4)).to(torch.int8).contiguous()


@pytest.mark.parametrize("M, N, K, block_K, stages", [(1024, 1024, 1024, 128, 3), (200, 136, 320, 128, 2),
                                                      (256, 512, 4096, 64, 4)])
def test_int4_gemm_is_exact(torch, M, N, K, block_K, stages):
    torch.manual_seed(M + K)
    a = torch.randint(-8, 8, (M, K), device="cuda", dtype=torch.int8)
    b = torch.randint(-8, 8, (N, K), device="cuda", dtype=torch.int8)
    a[0, :2] = torch.tensor([-8, 7], device="cuda", dtype=torch.int8)  # both ends of the range
    kernel = tw.compile(matmul_int4(M, N, K, 128, 128, block_K, stages), out_idx=-1)
    c = kernel(_pack(torch, a), _pack(torch, b))
    want = a.cpu().to(torch.int64) @ b.cpu().to(torch.int64).T
    assert torch.equal(c.cpu().to(torch.int64), want)
