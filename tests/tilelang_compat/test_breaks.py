"""``break`` in a ``T.serial`` loop (TileLang's top-k selector: ``if l_new_topk <= 0: break``): a
flag set where the ``break`` stands, what could run after it guarded by the flag, on both CPU
interpreters; barriers stay inside the guards when the condition is the same for every thread, and
a condition that differs between threads is refused where the work after it needs a barrier; the
loops that take no ``break``."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError

from .interpreters import on_both_interpreters


@T.prim_func
def halve_until_small(X: T.Tensor((128,), "float32"), Rounds: T.Tensor((1,), "int32")):
    """Reverse and halve a shared tile round by round until its first element is below 1 (8 rounds
    at most), counting the rounds."""
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        s = T.alloc_shared((128,), "float32")
        n = T.alloc_var(T.int32)
        n = 0
        T.copy(X, s)
        for r in T.serial(8):
            if s[0] < 1.0:
                break
            v = s[127 - tx]
            T.sync_threads()
            s[tx] = v * 0.5
            n = n + 1
        T.copy(s, X)
        if tx == 0:
            Rounds[0] = n


@T.prim_func
def first_negative(X: T.Tensor((64,), "float32"), Where: T.Tensor((64,), "int32")):
    """Each thread scans its own row for the first negative value: a `break` under a condition of
    the thread's own, with nothing shared after it (so no barrier is needed)."""
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        found = T.alloc_var(T.int32)
        found = -1
        for j in T.serial(64):
            if X[(tx + j) % 64] < 0.0:
                found = j
                break
        Where[tx] = found


def _halve_reference(x):
    x, rounds = x.astype(np.float64), 0
    for _ in range(8):
        if x[0] < 1.0:
            break
        x, rounds = x[::-1] * 0.5, rounds + 1
    return x, rounds


@pytest.mark.parametrize("first", [37.0, 0.5, 1000.0], ids=["six-rounds", "none", "all-eight"])
@on_both_interpreters
def test_a_break_on_a_condition_every_thread_shares(run, first):
    x = (np.random.default_rng(0).random(128) * 10 + 0.5).astype(np.float32)
    x[0] = x[127] = first
    rounds = np.zeros(1, np.int32)
    want, want_rounds = _halve_reference(x)
    run(halve_until_small, x, rounds)
    assert rounds[0] == want_rounds
    np.testing.assert_allclose(x, want, rtol=1e-6)


@on_both_interpreters
def test_a_break_each_thread_takes_on_its_own(run):
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    where = np.zeros(64, np.int32)
    run(first_negative, x, where)
    want = [next((j for j in range(64) if x[(t + j) % 64] < 0), -1) for t in range(64)]
    np.testing.assert_array_equal(where, want)


def test_the_rest_of_the_body_and_later_iterations_are_guarded(nvrtc_check):
    source = tw.lower(halve_until_small, target="cuda").kernel_source
    kernel = source.split('extern "C"')[1]
    flag, loop, guard, sets, rest = (kernel.find(s) for s in ("int broke = 0;", "for (int r = 0;", "if ((broke == 0))",
                                                              "broke = 1;", "float v = "))
    assert -1 not in (flag, loop, guard, sets, rest) and flag < loop < guard < sets < rest
    assert kernel.count("if ((broke == 0))") == 2  # the whole body, and what follows the break
    nvrtc_check(source, "sm_90a")


def test_a_break_on_a_thread_s_own_condition_before_shared_work_is_refused():
    with pytest.raises(CompileError, match="may differ between the threads of a block"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                tx = T.get_thread_binding()
                s = T.alloc_shared((128,), "float32")
                T.copy(X, s)
                for r in T.serial(4):
                    if s[tx] < 0.0:
                        break
                    v = s[127 - tx]
                    T.sync_threads()
                    s[tx] = v
                T.copy(s, X)

        tw.lower(main, target="cuda")


@pytest.mark.parametrize("loop, why", [
    ("for i in T.Parallel(4):", "`break` in a T.Parallel loop"),
    ("for i in T.Pipelined(4, num_stages=2):", "`break` in a T.Pipelined loop"),
    ("for i in T.unroll(4):", "`break` in an unrolled loop"),
    ("while A[0] < 4.0:\n            A[0] += 1.0", "`break` in a `while` loop"),
], ids=["parallel", "pipelined", "unrolled", "while"])
def test_loops_that_take_no_break(loop, why, tmp_path):
    src = f'''
@T.prim_func
def main(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32):
        {loop}
            break
'''
    path = tmp_path / "loop_break.py"
    path.write_text(src)
    with pytest.raises(CompileError, match=why):
        exec(compile(src, str(path), "exec"), {"T": T})
