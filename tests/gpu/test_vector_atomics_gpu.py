"""Float4 atomics (``tw::atomic_add_x4``) on the GPU against float64 numpy on random inputs: rows of
a shared tile added into the rows an index table picks, several rows onto one and some outside
the tensor, by ``T.atomic_addx4`` and by ``T.atomic_add`` in a ``T.Parallel`` loop."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.examples.atomic_scatters import scatter_rows
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("by_fours", [True, False], ids=["atomic_addx4", "atomic_add in T.Parallel"])
@pytest.mark.parametrize("start", [0, 2], ids=["float4", "element atomics"])
def test_rows_added_into_the_rows_a_table_picks(torch, by_fours, start):
    cols = 64 + start
    gen = torch.Generator(device="cuda").manual_seed(3)
    src = torch.randn(16, cols, device="cuda", generator=gen)
    idx = torch.randint(-3, 43, (16,), device="cuda", dtype=torch.int32, generator=gen)
    idx[:4] = 7
    out = torch.randn(40, cols, device="cuda", generator=gen)
    want = out.double().cpu().numpy().copy()
    tw.compile(scatter_rows(by_fours=by_fours, start=start, cols=cols))(src, idx, out)
    s, i = src.double().cpu().numpy(), idx.cpu().numpy()
    keep = (i >= 0) & (i < 40)
    add = np.zeros_like(want)
    np.add.at(add, i[keep], 2.0 * s[keep])
    add[:, :start] = 0
    np.testing.assert_allclose(out.double().cpu().numpy(), want + add, rtol=1e-5, atol=1e-5)
