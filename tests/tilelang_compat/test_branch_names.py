"""Names an ``if`` on a kernel value binds in its branches (``frontend/branch_names.py``). Both
branches are built while the kernel is built; a Python name a branch re-bound kept, after the
``if``, what the branch built last gave it: ``found = -1; if X[tx] < 0: found = 5; W[tx] = found``
wrote 5 for every thread (on the GPU and both CPU interpreters). Now each branch starts from the
names as they were, and reading after the ``if`` a name a branch bound is refused with what to
write; a kernel variable carries a value out of the branches."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError

from .interpreters import on_both_interpreters


@T.prim_func
def flagged(X: T.Tensor((64,), "float32"), W: T.Tensor((64,), "int32"), V: T.Tensor((64,), "int32")):
    """A kernel variable set in the branches; a Python number each branch reads as it was."""
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        found = T.int32(-1)
        step = 3
        if X[tx] < 0.0:
            found = 5
            step = 4
            V[tx] = step
        else:
            V[tx] = step  # 3: the then branch's step = 4 is not seen here
        W[tx] = found


@on_both_interpreters
def test_a_kernel_variable_carries_the_branch_s_value_out(run):
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    w, v = np.zeros(64, np.int32), np.zeros(64, np.int32)
    run(flagged, x, w, v)
    np.testing.assert_array_equal(w, np.where(x < 0, 5, -1))
    np.testing.assert_array_equal(v, np.where(x < 0, 4, 3))


@pytest.mark.parametrize("before, branches, after", [
    ("found = -1", "if X[tx] < 0.0:\n            found = 5", "W[tx] = found"),
    ("found = -1", "if X[tx] < 0.0:\n            W[tx] = 0\n        else:\n            found = 2", "W[tx] = found"),
    ("", "if X[tx] < 0.0:\n            found = X[tx] * 2.0", "W[tx] = found"),
    ("scale = 2.0", "if X[tx] < 0.0:\n            scale = X[tx]", "W[tx] = X[tx] * scale"),
], ids=["number-in-then", "number-in-else", "first-bound-inside", "number-to-kernel-value"])
def test_a_name_a_branch_bound_is_refused_after_the_if(before, branches, after, tmp_path):
    src = f'''
@T.prim_func
def main(X: T.Tensor((64,), "float32"), W: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        {before}
        {branches}
        {after}
'''
    path = tmp_path / "branch_names.py"
    path.write_text(src)
    with pytest.raises(CompileError, match=r"is bound inside the `if` at line \d+, whose condition is known only when "
                                           "the kernel runs") as info:
        exec(compile(src, str(path), "exec"), {"T": T})
    assert after in info.value.loc.text


def test_binding_the_name_again_after_the_if_is_fine():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), W: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            v = 1.0
            if X[tx] < 0.0:
                v = 2.0
                W[tx] = v
            v = 3.0
            X[tx] = v

    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    w = np.zeros(64, np.float32)
    tw.compile(main, target="cpu")(x.copy(), w)
    np.testing.assert_array_equal(w, np.where(x < 0, 2.0, 0.0).astype(np.float32))
