"""The tile-level interpreter reports a read of shared memory another side's threads wrote with
nothing ordering the write first (``interpreter.races``, the ``writers`` records): TileLang's hand-written MLA
kernels (``example_mla_decode_ws.py``, ``sparse_mla_fwd_pipelined.py``) have their first consumer
warpgroup write ``sum_exp_shared`` after its loop and the second read it after its own, with no
barrier between; on the H100 their output came out with infinities once the first warpgroup ran
slower (debug mode). Sides are the ``T.ws`` scopes of an ``if tx < 128: ... else: ...`` chain."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T

ROWS, COLS = 64, 32
F32 = "float32"


def row_scales(order: str):
    """Warpgroup 0 writes one scale per row into shared memory; warpgroup 1 waits on ``passed`` (or
    ``ready``) and divides X's rows by them. ``order``: ``"direct"``: warpgroup 0 arrives on
    ``ready`` after writing, warpgroup 1 waits on it; ``"third"``: warpgroup 2 waits on ``ready``
    before it arrives on ``passed``, warpgroup 1's wait (ordered through a third side);
    ``"unordered"``: warpgroup 2 arrives on ``passed`` without waiting and warpgroup 0 never
    arrives. (Warpgroup 1 waits in every case, so insert_thread_syncs trusts the mbarriers and
    puts no block barrier between the scopes.)"""

    @T.prim_func
    def main(X: T.Tensor((ROWS, COLS), F32), Out: T.Tensor((ROWS, COLS), F32)):
        with T.Kernel(1, threads=384):
            scales = T.alloc_shared((ROWS,), F32)
            ready = T.alloc_barrier(arrive_count=128)
            passed = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx < 128:
                for i in T.Parallel(ROWS):
                    scales[i] = X[i, 0] * X[i, 0] + 1.0
                if order != "unordered":
                    T.barrier_arrive(ready)
            elif tx < 256:
                if order == "direct":
                    T.barrier_wait(ready, 0)
                else:
                    T.barrier_wait(passed, 0)
                for i, j in T.Parallel(ROWS, COLS):
                    Out[i, j] = X[i, j] / scales[i]
            else:
                if order == "third":
                    T.barrier_wait(ready, 0)
                T.barrier_arrive(passed)

    return main


def _run(kernel, pass_configs=None):
    x = np.random.default_rng(3).standard_normal((ROWS, COLS)).astype(np.float32)
    out = np.zeros_like(x)
    tw.compile(kernel, target="cpu", pass_configs=pass_configs)(x, out)
    return x, out


@pytest.mark.parametrize("order", ["direct", "third"])
def test_a_read_ordered_after_the_write_by_barriers_runs(order):
    x, out = _run(row_scales(order))
    np.testing.assert_allclose(out, x / (x[:, :1] ** 2 + 1.0), rtol=1e-6)


def test_a_read_of_what_another_scope_wrote_unordered_is_a_race_naming_both_lines():
    """(The compiler refuses this kernel before it runs, verify_scope_races: let through with a
    warning, the interpreter meets the race too.)"""
    with pytest.raises(tw.CompileError, match="race: scales is read here"):
        _run(row_scales("unordered"))
    with pytest.warns(tw.TileworkbenchWarning, match="race: scales is read here"), \
            pytest.raises(tw.KernelRuntimeError) as err:
        _run(row_scales("unordered"), {"tw.barrier_check": "warn"})
    message = str(err.value)
    assert message.startswith("race: the read of scales at line ")
    assert "by threads 128-255 (a T.ws scope) may come before the write of it at line " in message
    assert "by threads 0-127 (a T.ws scope)" in message
    read_line, write_line = (int(part.split()[0]) for part in message.split(" at line ")[1:3])
    assert read_line > write_line  # the division's line, then the store's
