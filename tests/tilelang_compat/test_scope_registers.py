"""Two forms from TileLang's sparse MLA "seesaw" example: a ``T.ws`` scope keeping a fragment as
registers of each of its threads (``prefetch_indices[stage, r] = Indices[..., (tx - 256) // 8]``,
touched by no ``T.Parallel`` loop or tile operation: ``localize_read_fragments``' ``_thread_own``),
and Python's ``max``/``min`` over a size known only when the kernel runs (its grid,
``max(0, seq_len - kv_stride + 1)``: ``T.max``/``T.min`` of them)."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError


def _scope_registers():
    @T.prim_func
    def main(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            with T.ws(1):
                own = T.alloc_fragment((4,), "float32")
                for r in T.serial(4):
                    own[r] = A[r * 128 + tx - 128]
                for r in T.serial(4):
                    B[r * 128 + tx - 128] = own[3 - r] * 2.0

    return main


def test_a_scopes_fragment_of_its_threads_own_values_is_a_per_thread_array(nvrtc_check):
    art = tw.lower(_scope_registers(), target="sm_90a")
    assert "float own[4];" in art.device_source
    nvrtc_check(art.device_source, "sm_90a")
    a = np.random.default_rng(1).standard_normal(512).astype(np.float32)
    b = np.zeros(512, np.float32)
    tw.compile(_scope_registers(), target="cpu")(a, b)
    np.testing.assert_allclose(b, 2 * a.reshape(4, 128)[::-1].reshape(512))


def test_a_fragment_a_tile_operation_also_uses_stays_refused():
    @T.prim_func
    def main(A: T.Tensor((512,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            with T.ws(1):
                own = T.alloc_fragment((128,), "float32")
                own[0] = A[tx - 128]
                T.copy(own, B)

    with pytest.raises(CompileError, match="fragment own can only be accessed inside a T.Parallel loop"):
        tw.lower(main, target="sm_90a")


def _shifted():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n, 64), "float32"), B: T.Tensor((n, 64), "float32")):
        with T.Kernel(max(0, T.ceildiv(n - 64, 64)), threads=128) as bx:  # blocks past the first 64 rows
            for i, j in T.Parallel(64, 64):
                B[64 + bx * 64 + i, j] = A[64 + bx * 64 + i, j] + min(n, 7)

    return main


def test_python_max_and_min_of_a_run_time_size_are_kernel_max_and_min():
    kernel = tw.compile(_shifted(), target="cpu")
    a = np.random.default_rng(2).standard_normal((192, 64)).astype(np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_allclose(b[64:], a[64:] + 7)
    assert not b[:64].any()
    src = tw.lower(_shifted(), target="sm_90a").host_source + tw.lower(_shifted(), target="sm_90a").device_source
    assert "max" in src and "min" in src


def test_python_max_of_numbers_is_pythons():
    from tileworkbench.frontend.expressions import Expressions

    assert Expressions.kernel_extremum("max", [3, 5]) is None and Expressions.kernel_extremum("min", [(4, 2)]) is None
