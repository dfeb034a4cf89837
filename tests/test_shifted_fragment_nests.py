"""A ``T.Parallel`` nest reading a fragment at its variables plus a shift set outside the nest
(DeepSeek's sparse MLA backward stores half of its ``acc_dkv`` at a time: ``if bi_i < BS // 2:
staged[bi_i, d_i] = acc_dkv[bi_i + s * (BS // 2), d_i]``) runs over the fragment's own indices
(``rebase_shifted_nests``); before, no thread held what such a nest read and it was refused. The
program, ``examples.mla_pieces.halves_staged``, stages through a ``T.view`` as that kernel does."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.examples.mla_pieces import halves_staged
from tileworkbench.interpreter.threads import run_at_thread_level


def _inputs(rows=64, cols=64):
    rng = np.random.default_rng(3)
    return (rng.standard_normal((64, rows)).astype(np.float16), rng.standard_normal((64, cols)).astype(np.float16))


@pytest.mark.parametrize("run, gemm", [(lambda f, *a: tw.compile(f, target="cpu")(*a), True),
                                       (run_at_thread_level, False)], ids=["tile level", "thread level"])
def test_halves_of_an_accumulator_staged_in_turn_compute_what_numpy_does(run, gemm):
    a, b = _inputs()
    out = np.zeros((64, 64), np.float32)
    run(halves_staged(by_gemm=gemm), a, b, out)
    want = 2.0 * (a.astype(np.float64).T @ b.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)


def test_the_nest_runs_over_the_fragments_indices(nvrtc_check):
    art = tw.lower(halves_staged(), target="sm_90a")
    rebased = art.trace.ir_after("rebase_shifted_nests")
    assert "stage[i - s * 32, j] = acc[i, j] * 2.0" in rebased
    assert "i - s * 32 >= 0" in rebased  # the iterations the nest had: 0 <= i - s * 32 < 64
    nvrtc_check(art.device_source, "sm_90a")


def test_a_shift_that_may_leave_the_fragment_is_still_refused():
    with pytest.raises(CompileError, match="fragment acc must be indexed by the T.Parallel loop variables"):
        tw.lower(halves_staged(guarded=False), target="sm_90a")


def test_a_nest_narrower_than_the_fragment_keeps_to_its_own_iterations():
    """Rows 32..63, columns 0..31 of a 64 x 64 accumulator: the rebased nest runs over the
    fragment's 64 columns, only the nest's 32 doing anything."""

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), Out: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((64, 64), "float32")
            stage = T.alloc_shared((32, 32), "float32")
            T.copy(A, acc)
            for i, j in T.Parallel(32, 32):
                stage[i, j] = acc[i + 32, j] + 1.0
            T.copy(stage, Out)

    art = tw.lower(main, target="sm_90a")
    assert "j < 32" in art.trace.ir_after("rebase_shifted_nests")
    a = np.random.default_rng(9).standard_normal((64, 64)).astype(np.float32)
    for run in (lambda f, *x: tw.compile(f, target="cpu")(*x), run_at_thread_level):
        out = np.full((32, 32), np.nan, np.float32)
        run(main, a, out)
        np.testing.assert_allclose(out, a[32:, :32] + 1.0, rtol=1e-6)
