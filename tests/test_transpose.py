"""``T.transpose(src, dst)``: a shared tile (or slice) into a shared tile or fragment with its last
two dimensions swapped, run at the thread level against numpy; what it refuses."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level


def transposing(M, N, scope, threads=128, dtype="float16"):
    @T.prim_func
    def kernel(A: T.Tensor((2, M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(1, threads=threads):
            a = T.alloc_shared((2, M, N), dtype)
            b = T.alloc_shared((N, M), dtype) if scope == "shared" else T.alloc_fragment((N, M), dtype)
            T.copy(A, a)
            T.transpose(a[1, :, :], b)
            T.copy(b, B)

    return kernel


@pytest.mark.parametrize("M, N, scope", [(64, 32, "shared"), (48, 80, "fragment"), (7, 130, "shared")])
def test_the_last_two_dimensions_swap(M, N, scope):
    a = np.random.default_rng(M * N).standard_normal((2, M, N)).astype(np.float16)
    kernel = transposing(M, N, scope)
    for run in (run_at_thread_level, lambda k, *x: tw.compile(k, target="cpu")(*x)):
        out = np.zeros((N, M), np.float16)
        run(kernel, a, out)
        assert np.array_equal(out, a[1].T)


def test_shapes_that_do_not_transpose_are_refused():
    with pytest.raises(CompileError, match=r"transposes to \(16, 8\), not the destination's \(8, 16\)"):
        @T.prim_func
        def kernel(A: T.Tensor((8, 16), "float32")):
            with T.Kernel(1, threads=32):
                a = T.alloc_shared((8, 16), "float32")
                b = T.alloc_shared((8, 16), "float32")
                T.transpose(a, b)
