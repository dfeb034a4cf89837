"""Reductions' scratch tiles over each other (``plan_shared_memory``, ``ir.SCRATCH``): where a kernel
would not fit in shared memory with each tile's bytes its own, the tiles a reduction allocates for
itself (each allocated right before a block barrier, used only after it) share one place. Both CPU
interpreters against numpy (the thread level keeps shared memory as the plan's bytes and reports a
race on them), NVRTC, and what stays as it was."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.examples.edge_cases import many_row_reductions, many_row_reductions_expected
from tileworkbench.interpreter.threads import run_at_thread_level


def test_eight_scratch_tiles_share_one_place():
    art = tw.lower(many_row_reductions(), target="sm_90a")
    plan = {e["name"]: e for e in art.func.attrs["smem_plan"]}
    scratch = [e for name, e in plan.items() if "reduce_scratch" in name]
    assert len(scratch) == 8 and len({e["offset"] for e in scratch}) == 1
    assert all(len(e["shares_with"]) == 7 for e in scratch)
    assert art.func.attrs["smem_bytes"] == 2 * 32768  # the tile and one scratch place, not 9 x 32 KB


@pytest.mark.parametrize("run", [lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level],
                         ids=["tile level", "thread level"])
def test_the_reductions_over_shared_scratch_compute_what_numpy_does(run):
    a = np.random.default_rng(7).standard_normal((64, 128)).astype(np.float32)
    out = np.zeros((8, 64), np.float32)
    run(many_row_reductions(), a, out)
    np.testing.assert_allclose(out, many_row_reductions_expected(a), rtol=1e-5, atol=1e-4)


def test_a_kernel_that_fits_keeps_its_scratch_tiles_apart():
    art = tw.lower(many_row_reductions(rows=32), target="sm_90a")  # 9 x 16 KB: fits
    scratch = [e for e in art.func.attrs["smem_plan"] if "reduce_scratch" in e["name"]]
    assert len({e["offset"] for e in scratch}) == 8 and not any("shares_with" in e for e in scratch)


def test_the_pooled_kernel_compiles(nvrtc_check):
    nvrtc_check(tw.lower(many_row_reductions(), target="sm_90a").device_source, "sm_90a")
