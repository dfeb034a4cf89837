"""On the GPU against float64 numpy on random inputs: a ``T.view`` of a shared tile in another dtype
(a tile of its own, ``verify_shared_views``) and a ``T.Parallel`` nest reading an accumulator at a
shifted row (``rebase_shifted_nests``), as DeepSeek's sparse MLA backward does with its ``acc_dkv``;
the accumulator here is a wgmma's (64 rows), the layout the CPU tests' interpreter does not run at
thread level."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.examples.mla_pieces import halves_staged
from tileworkbench.testing import gpu_marks
from tests.tilelang_compat.test_shared_views import _expected, _staged_in_the_key_tile

pytestmark = gpu_marks(9, 0)


@pytest.mark.parametrize("split", [2, 4])
def test_an_accumulator_staged_a_part_at_a_time_through_a_view(torch, split):
    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    out = torch.full((64, 64), float("nan"), device="cuda")
    tw.compile(halves_staged(split=split))(a, b, out)
    want = 2.0 * (a.double().T @ b.double())
    np.testing.assert_allclose(out.cpu().numpy(), want.cpu().numpy(), rtol=1e-3, atol=1e-2)


def test_a_bf16_tile_and_its_float32_view_each_read_what_they_wrote(torch):
    import ml_dtypes

    rng = np.random.default_rng(7)
    a = rng.standard_normal((3 * 64, 64)).astype(ml_dtypes.bfloat16)
    out = torch.full((96, 64), float("nan"), device="cuda")
    total = torch.full((64, 64), float("nan"), device="cuda")
    tw.compile(_staged_in_the_key_tile())(torch.from_numpy(a.astype(np.float32)).to("cuda", torch.bfloat16),
                                          out, total)
    want_out, want_total = _expected(a)
    np.testing.assert_allclose(out.cpu().numpy(), want_out, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(total.cpu().numpy(), want_total, rtol=1e-5, atol=1e-4)
