"""The pass ``localize_read_fragments``: a fragment read element by element outside ``T.Parallel``
and written only whole (``T.copy``, ``T.fill``) is a per-thread array holding all of it, as
TileLang's block-sparse attention reads its mask (``if block_mask[k] != 0:``); its values are the
same in every thread, so the block barrier its ``if`` needs may stand inside it. Both CPU
interpreters against numpy, NVRTC. What stays refused: such a fragment written element by element,
and an ``if`` on a local array each thread filled from its own row (``rules.uniformity`` follows
copies into local arrays now)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from .kernel_files import import_kernel_file


@T.prim_func
def masked_rows(M: T.Tensor((8,), "int32"), A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    """Rows of A whose mask is set go to B through a shared tile; the others stay as B was."""
    with T.Kernel(1, threads=128):
        mask = T.alloc_fragment((8,), "int32")
        s = T.alloc_shared((64,), "float32")
        T.copy(M, mask)
        for k in T.serial(8):
            if mask[k] != 0:
                T.copy(A[k, :], s)
                for j in T.Parallel(64):
                    B[k, j] = s[63 - j] * 2  # other threads' elements: a barrier between


@pytest.mark.parametrize("run", [lambda f, *a: tw.compile(f, target="cpu")(*a), run_at_thread_level],
                         ids=["tile level", "thread level"])
def test_a_mask_fragment_read_in_an_if(run):
    rng = np.random.default_rng(5)
    m = np.array([1, 0, 0, 1, 1, 0, 1, 0], np.int32)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = np.full((8, 64), -1.0, np.float32)
    run(masked_rows, m, a, b)
    want = np.where(m[:, None] != 0, a[:, ::-1] * 2, -1.0)
    assert np.array_equal(b, want)


def test_the_mask_is_a_per_thread_array_and_the_barrier_is_inside_the_if():
    code = tw.lower(masked_rows, target="sm_90a").kernel_source
    body = code.split('extern "C"')[1]
    assert "int mask[8];" in body and "mask[i0] = M[i0];" in body
    inside = body[body.index("if ((mask[k] != 0))"):]
    assert "__syncthreads();" in inside
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(code, "sm_90a")


@pytest.mark.parametrize("statements, message", [
    # written element by element in T.Parallel: its elements are spread over the threads
    ("mask = T.alloc_fragment((8,), 'int32')\n        for i in T.Parallel(8):\n            mask[i] = M[i]\n"
     "        for k in T.serial(8):\n            if mask[k] != 0:\n                B[k, 0] = 1.0",
     "fragment mask can only be accessed inside a T.Parallel loop"),
    # each thread's own row: the values differ between threads, no barrier may go inside the if
    ("row = T.alloc_local((4,), 'int32')\n        tx = T.get_thread_binding()\n        T.copy(M[tx % 2 * 4:tx % 2 * 4 + 4], row)\n"
     "        s = T.alloc_shared((64,), 'float32')\n        if row[0] != 0:\n            T.copy(A[0, :], s)\n"
     "            for j in T.Parallel(64):\n                B[0, j] = s[63 - j]",
     "may differ between the threads of a block"),
])
def test_what_is_refused(statements, message, tmp_path):
    source = f'''import tileworkbench.language as T


@T.prim_func
def main(M: T.Tensor((8,), "int32"), A: T.Tensor((8, 64), "float32"), B: T.Tensor((8, 64), "float32")):
    with T.Kernel(1, threads=128):
        {statements}
'''
    with pytest.raises(tw.CompileError, match=message):
        tw.lower(import_kernel_file(tmp_path, source).main, target="sm_90a")
