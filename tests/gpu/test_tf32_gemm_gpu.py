"""On the H200, ``T.gemm`` on float32 tiles in TF32 (CPU tests: tests/test_tf32_gemm.py): against
float64 products of the inputs converted to TF32 as the interpreter models each path (wgmma
truncates, mma.sync rounds; only float32 summation left between them) and of the raw inputs
(TF32's own error), every operand order, partial tiles and ``T.tfloat32`` included; and gemms
whose B is a fragment (staged through shared memory), on wgmma, register-A wgmma and TF32 mma.sync."""

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


@pytest.mark.parametrize("index", range(8))
def test_tf32_gemm_matches_float64_of_the_converted_inputs(torch, index):
    cpu = _cpu_tests()
    case = cpu.CASES[index]
    a, b = cpu.inputs(case, case["K"] + 1)
    c = torch.zeros(case["M"], case["N"], device="cuda", dtype=torch.float32)
    tw.compile(cpu.tf32_gemm(**case))(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    got = c.cpu().numpy()
    np.testing.assert_allclose(got, cpu.reference(case, a, b), rtol=1e-5, atol=1e-4)
    assert np.abs(got - cpu.reference(case, a, b, converted=False)).max() > 1e-4  # TF32, not float32


@pytest.mark.parametrize("dtype, a_in_fragment", [("float16", False), ("float16", True), ("float32", False)],
                         ids=["wgmma", "register-a-wgmma", "tf32-mma-sync"])
def test_a_gemm_whose_b_is_a_fragment(torch, dtype, a_in_fragment):
    """B computed in a fragment goes through a shared tile (tests/test_stage_fragment_operands.py)."""
    sys.path.insert(0, __file__.rsplit("/gpu/", 1)[0])
    from test_stage_fragment_operands import fragment_b

    gen = torch.Generator().manual_seed(10)
    a = torch.randn(128, 64, generator=gen).to(getattr(torch, dtype))
    v = torch.randn(64, 64, generator=gen).to(getattr(torch, dtype))
    o = torch.zeros(128, 64, device="cuda", dtype=torch.float32)
    tw.compile(fragment_b(dtype=dtype, a_in_fragment=a_in_fragment))(a.cuda(), v.cuda(), o)
    want = a.double() @ (0.5 * v.double())
    tolerance = 2e-3 if dtype == "float16" else 2e-2
    torch.testing.assert_close(o.cpu().double(), want, rtol=tolerance, atol=tolerance)


def test_a_tf32_and_a_half_accumulator_added_in_one_loop(torch):
    cpu = _cpu_tests()
    inputs, want = cpu.mixed_inputs(4)
    out = torch.zeros(64, 64, device="cuda", dtype=torch.float32)
    tw.compile(cpu.tf32_and_half_accumulators_added)(*(torch.from_numpy(x).cuda() for x in inputs), out)
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-5, atol=1e-4)
