"""On the H200, ``T.print``'s ``printf`` lines (CPU tests: tests/test_print.py): the same lines the
CPU interpreters print, in any order (blocks and threads print concurrently)."""

import sys

import numpy as np

import tileworkbench as tw
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


def test_the_gpu_prints_what_the_interpreters_print(torch, capfd):
    sys.path.insert(0, __file__.rsplit("/gpu/", 1)[0])
    from test_print import A, expected, printing

    kernel = tw.compile(printing)
    kernel(torch.from_numpy(A).cuda(), torch.zeros(4, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()  # the device's printf buffer is flushed here
    lines = [line for line in capfd.readouterr().out.splitlines() if "(block (" in line]
    assert sorted(lines) == sorted(expected())
    assert np.array_equal(A, np.arange(32, dtype=np.float32).reshape(4, 8))
