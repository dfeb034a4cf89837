"""``T.atomic_add(region, tile)`` (TileLang's tile form, linear attention's output, split-K's parts):
each element of the tile added atomically into its element of the region, as a ``T.Parallel``
loop of element atomics, or with ``use_tma=True`` from a whole float32 shared tile as one TMA
reduction (``cp.reduce.async.bulk``); elements outside a global tensor are skipped; a region of a
tensor with a layout adds at each element's place. Both CPU interpreters against numpy; NVRTC;
refusals."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.interpreter.threads import run_at_thread_level

from .kernel_files import main_with

RUNS = {"tile level": lambda f, *a: tw.compile(f, target="cpu")(*a), "thread level": run_at_thread_level}


@T.prim_func
def blocks_add_their_tiles(A: T.Tensor((4, 64, 32), "float32"), C: T.Tensor((60, 32), "float32")):
    """Each of 4 blocks adds 2 x its slice of A into C from a fragment and 1 x from a shared tile,
    twice: into a region, and at an origin (``C[0, 0]``, split-K's vectorised form), the last with
    ``use_tma=True`` (a TMA reduction); C has 60 rows, the tiles 64: their last 4 rows fall outside
    and are skipped (by the threads' guards, and by the tensor map's box)."""
    with T.Kernel(4, threads=128) as b:
        s = T.alloc_shared((64, 32), "float32")
        f = T.alloc_fragment((64, 32), "float32")
        T.copy(A[b, :, :], s)
        T.copy(s, f)
        for i, j in T.Parallel(64, 32):
            f[i, j] = f[i, j] * 2
        T.atomic_add(C[0:64, 0:32], f)
        T.atomic_add(C[0:64, :], s)
        T.atomic_add(C[0, 0], s, use_tma=True)


@pytest.mark.parametrize("level", RUNS)
def test_tiles_add_into_their_region_atomically(level):
    a = np.random.default_rng(4).standard_normal((4, 64, 32)).astype(np.float32)
    c = np.ones((60, 32), np.float32)
    RUNS[level](blocks_add_their_tiles, a, c)
    np.testing.assert_allclose(c, 1 + 4 * a.astype(np.float64).sum(0)[:60], rtol=1e-5, atol=1e-5)


def test_they_are_element_atomics_and_a_tma_reduction_that_compile_for_sm_90a():
    source = tw.lower(blocks_add_their_tiles, target="cuda").kernel_source
    body = source.split('extern "C"')[1]
    assert body.count("atomicAdd(") == 2 and "< 60" in body  # rows past C's 60 skipped
    # C is also updated by the threads' atomics: the reduction's issuer waits for its writes
    assert body.count("tw::tma_store_add(C_desc") == 1 and "tw::tma_store_wait<false>()" in body
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(source, "sm_90a")


def swap(i, j):
    return [j, i]


@T.prim_func
def add_into_a_transposed_layout(A: T.Tensor((8, 16), "float32"), C: T.Tensor((8, 16), "float32")):
    with T.Kernel(2, threads=32):
        T.annotate_layout({C: T.Layout(C.shape, swap)})
        s = T.alloc_shared((8, 16), "float32")
        T.copy(A, s)
        T.atomic_add(C[0:8, 0:16], s)


@pytest.mark.parametrize("level", RUNS)
def test_a_region_of_a_tensor_with_a_layout_adds_at_each_place(level):
    a = np.arange(128, dtype=np.float32).reshape(8, 16)
    c = np.zeros((8, 16), np.float32)
    RUNS[level](add_into_a_transposed_layout, a, c)
    assert np.array_equal(c.ravel(), (2 * a).T.ravel())  # element (i, j) at (j, i) of a 16 x 8 array


@pytest.mark.parametrize("statement, message", [
    ("T.atomic_add(C[0:8, 0:8], A[0, 0])", "the value for a region must be a tile"),
    ("T.atomic_add(C[0:8, 0:8], s[0:4, 0:8])", "T.atomic_add: shape mismatch, s region is 4x8 but C region is 8x8"),
    ("T.atomic_add(f[0:8, 0:8], s)", "is a fragment buffer, which only one thread holds"),
])
def test_what_is_refused(statement, message, tmp_path):
    with pytest.raises(tw.CompileError, match=message):
        main_with(tmp_path, 'A: T.Tensor((8, 8), "float32"), C: T.Tensor((8, 8), "float32")',
                  's = T.alloc_shared((8, 8), "float32")\n        f = T.alloc_fragment((8, 8), "float32")\n'
                  f'        T.fill(s, 1)\n        {statement}', threads=32)
