"""On the H200, ``T.gemm`` on float32 tiles in TF32 (CPU tests: tests/test_tf32_gemm.py): against
float64 products of the TF32-rounded inputs (the rounding the interpreter models; only float32
summation left between them) and of the raw inputs (TF32's own error), every operand order,
partial tiles and ``T.tfloat32`` included."""

import sys

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def _cpu_tests():
    sys.path.insert(0, __file__.rsplit("/gpu/", 1)[0])
    import test_tf32_gemm

    return test_tf32_gemm


@pytest.mark.parametrize("index", range(5))
def test_tf32_gemm_matches_float64_of_the_rounded_inputs(torch, index):
    cpu = _cpu_tests()
    case = cpu.CASES[index]
    a, b = cpu.inputs(case, case["K"] + 1)
    c = torch.zeros(case["M"], case["N"], device="cuda", dtype=torch.float32)
    tw.compile(cpu.tf32_gemm(**case))(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    got = c.cpu().numpy()
    np.testing.assert_allclose(got, cpu.reference(case, a, b), rtol=1e-5, atol=1e-4)
    assert np.abs(got - cpu.reference(case, a, b, rounded=False)).max() > 1e-4  # TF32, not float32
