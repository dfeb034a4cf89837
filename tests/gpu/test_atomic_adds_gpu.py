"""On the H200, atomic adds to 16-bit floats and ``T.atomic_addx2/x4`` (CPU tests:
tests/test_atomic_adds.py): column sums of random rows from four blocks against float64."""

import sys

import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("dtype, width", [("float16", 1), ("bfloat16", 1), ("float16", 2), ("float32", 2), ("float32", 4),
                                          ("bfloat16", 4)])
def test_column_sums_match_float64(torch, dtype, width):
    sys.path.insert(0, __file__.rsplit("/gpu/", 1)[0])
    from test_atomic_adds import column_sums

    a = torch.randn(64, 128, device="cuda").to(getattr(torch, dtype))
    out = torch.zeros(128, device="cuda", dtype=getattr(torch, dtype))
    tw.compile(column_sums(dtype, width))(a, out)
    tol = {"float16": 0.05, "bfloat16": 0.4, "float32": 1e-4}[dtype]
    assert (out.double() - a.double().sum(0)).abs().max().item() < tol
