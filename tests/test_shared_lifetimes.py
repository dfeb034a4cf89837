"""Shared tiles placed by lifetime (``plan_shared_memory``'s last resort): where a kernel would not
fit in shared memory with each tile's bytes its own, tiles whose top-level statements do not overlap
share bytes, with a block barrier between the last use of one and the first of the next. Both CPU
interpreters against numpy (the thread level keeps shared memory as the plan's bytes and reports a
race on them), NVRTC, and what stays as it was."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.examples.edge_cases import two_phase_shared_tiles
from tileworkbench.interpreter.threads import run_at_thread_level


def _plan(func):
    art = tw.lower(func, target="sm_90a")
    return art, {e["name"]: e for e in art.func.attrs["smem_plan"]}


def test_the_second_phase_takes_the_first_phases_bytes():
    art, plan = _plan(two_phase_shared_tiles())
    assert plan["s_s"]["offset"] == plan["a_s"]["offset"] and plan["s_s"]["shares_with"] == ["a_s"]
    assert plan["d_s"]["offset"] == plan["b_s"]["offset"] and plan["d_s"]["shares_with"] == ["b_s"]
    assert art.func.attrs["smem_bytes"] == 2 * 65536  # not 4 x 64 KB
    src = art.device_source
    last_read_of_a, first_write_of_s = src.rindex("a_s[(("), src.index("s_s[((")
    between = src[last_read_of_a:first_write_of_s]
    assert "tw::fence_proxy_async();" in between and "__syncthreads();" in between


def test_a_kernel_that_fits_keeps_each_tile_its_own_bytes():
    _, plan = _plan(two_phase_shared_tiles(rows=64, cols=128))  # 4 x 32 KB: fits
    assert len({e["offset"] for e in plan.values()}) == 4 and not any("shares_with" in e for e in plan.values())


@pytest.mark.parametrize("run", [lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level],
                         ids=["tile level", "thread level"])
def test_the_tiles_over_each_other_compute_what_numpy_does(run):
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    total, diff = np.zeros_like(a), np.zeros_like(a)
    run(two_phase_shared_tiles(), a, b, total, diff)
    np.testing.assert_allclose(total, a + b.T, rtol=1e-6)
    np.testing.assert_allclose(diff, a - b.T, rtol=1e-6)


def test_tiles_alive_together_never_share_and_the_error_lists_them():
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float32"), Out: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=256):
            t0 = T.alloc_shared((128, 128), "float32")
            t1 = T.alloc_shared((128, 128), "float32")
            t2 = T.alloc_shared((128, 128), "float32")
            t3 = T.alloc_shared((128, 128), "float32")
            acc = T.alloc_fragment((128, 128), "float32")
            T.copy(A, t0)
            T.copy(A, t1)
            T.copy(A, t2)
            T.copy(A, t3)
            for i, j in T.Parallel(128, 128):
                acc[i, j] = t0[i, j] + t1[j, i] + t2[i, j] * t3[j, i]
            T.copy(acc, Out)

    with pytest.raises(CompileError, match="needs 262144 bytes of shared memory"):
        tw.lower(main, target="sm_90a")


def test_the_kernel_over_shared_bytes_compiles(nvrtc_check):
    nvrtc_check(tw.lower(two_phase_shared_tiles(), target="sm_90a").device_source, "sm_90a")
