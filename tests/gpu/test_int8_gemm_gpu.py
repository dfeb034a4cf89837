"""On the H200, ``T.gemm`` on int8 / uint8 tiles into int32 (CPU tests: tests/test_int8_gemm.py):
exact against torch's int64 product on random full-range inputs, partial tiles and two consumer
warpgroups included."""

import sys

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def _cases():
    sys.path.insert(0, __file__.rsplit("/gpu/", 1)[0])
    from test_int8_gemm import CASES, int8_gemm

    return CASES, int8_gemm


@pytest.mark.parametrize("index", range(3))
def test_int8_gemm_is_exact(torch, index):
    cases, int8_gemm = _cases()
    case = cases[index]
    dtype = getattr(torch, case.get("dtype", "int8"))
    low, high = (-128, 128) if dtype == torch.int8 else (0, 256)
    a = torch.randint(low, high, (case["M"], case["K"]), device="cuda", dtype=dtype)
    b = torch.randint(low, high, (case["N"], case["K"]), device="cuda", dtype=dtype)
    c = torch.zeros(case["M"], case["N"], device="cuda", dtype=torch.int32)
    tw.compile(int8_gemm(**case))(a, b, c)
    assert torch.equal(c.cpu().long(), a.cpu().long() @ b.cpu().long().T)  # integer matmul on the CPU
