"""A kernel's own CUDA on the GPU (CPU tests: tests/test_call_extern.py): the imported function's
result against numpy."""

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

from tests.extern_programs import twice_plus

pytestmark = gpu_marks(9, 0)


def test_the_imported_function_computes(torch):
    x = np.random.default_rng(46).standard_normal(256).astype(np.float32)
    y = torch.zeros(256, device="cuda")
    tw.compile(twice_plus)(torch.tensor(x, device="cuda"), y)
    want = 2 * x + np.repeat(np.arange(1, 3), 128).astype(np.float32)
    np.testing.assert_array_equal(y.cpu().numpy(), want)
