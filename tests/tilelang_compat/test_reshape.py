"""``T.reshape`` / ``T.view`` on global tensors: another row-major shape over the same memory (as
TileLang's ``T.Tensor(shape, t.dtype, t.data)``), on both CPU interpreters and in the generated
code; what is refused (shared tiles, another dtype, a different element count). Fragment views:
test_fragment_reshape.py."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from .kernel_files import main_with


@T.prim_func
def row_sums_of_a_flat_tensor(A: T.Tensor((4096,), "float32"), B: T.Tensor((8, 64), "float32"),
                              Out: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128):
        rows = T.reshape(A, (64, 64))  # the flat input as 64 rows
        out = T.view(B, (512,))  # the 8 x 64 output written flat
        tile = T.alloc_fragment((64, 64), "float32")
        sums = T.alloc_fragment((64,), "float32")
        T.copy(rows, tile)
        T.reduce_sum(tile, sums, dim=1)
        T.copy(sums, Out)
        for i in T.Parallel(512):
            out[i] = rows[i // 64, i % 64] * 2


def test_a_reshaped_tensor_reads_and_writes_its_memory_on_both_interpreters():
    a = np.random.default_rng(5).standard_normal(4096).astype(np.float32)
    for run in (lambda *x: tw.compile(row_sums_of_a_flat_tensor, target="cpu")(*x),
                lambda *x: run_at_thread_level(row_sums_of_a_flat_tensor, *x)):
        b, out = np.zeros((8, 64), np.float32), np.zeros(64, np.float32)
        run(a, b, out)
        np.testing.assert_allclose(out, a.reshape(64, 64).astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
        assert np.array_equal(b.ravel(), a[:512] * 2)


def test_the_views_are_pointers_into_their_tensors_and_compile_for_sm_90a():
    source = tw.lower(row_sums_of_a_flat_tensor, target="cuda").kernel_source
    assert "reinterpret_cast<float*>((&A[0]))" in source and "reinterpret_cast<float*>((&B[0]))" in source
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(source, "sm_90a")


@pytest.mark.parametrize("statement, message", [
    ("T.reshape(s, (32, 2))", "T.reshape of the shared buffer s is not supported yet"),
    ("T.reshape(f, (63,))", "f has 64 elements and the shape asked for 63"),  # views: test_fragment_reshape.py
    ("T.reshape(A, (32, 64))", "A has 4096 elements and the shape asked for 2048"),
    ("T.view(A, dtype='int32')", "A as int32 \\(it holds float32\\) is not supported yet"),
    ("T.reshape(3, (2,))", "T.reshape: the int 3 is not a tensor"),
])
def test_what_is_refused(statement, message, tmp_path):
    with pytest.raises(tw.CompileError, match=message):
        main_with(tmp_path, 'A: T.Tensor((64, 64), "float32")',
                  f's = T.alloc_shared((64,), "float32")\n        f = T.alloc_fragment((8, 8), "float32")\n        {statement}')
