"""``T.atomic_add(s[i], v, return_prev=True)`` (TileLang's top-k selector: ``pos =
T.atomic_add(s_histogram[b], 1, return_prev=True)``): the shared element's value before this
thread's add, as a value of the thread's code. Each thread gets a place of its own; which place is
not fixed (threads add in no set order), so the checks are of the places as a whole: the counts,
and each bucket's places a permutation of 0 .. count - 1. Both CPU interpreters, the barriers around
it, NVRTC, the value counted as different in every thread, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError

from .interpreters import on_both_interpreters


@T.prim_func
def bucket_places(X: T.Tensor((256,), "int32"), Counts: T.Tensor((4,), "int32"), Places: T.Tensor((256,), "int32")):
    """Every thread takes a place in its bucket (``X[tx] % 4``), counting the bucket in shared memory."""
    with T.Kernel(1, threads=256):
        tx = T.get_thread_binding()
        count = T.alloc_shared((4,), "int32")
        if tx < 4:
            count[tx] = 0
        place = T.atomic_add(count[X[tx] % 4], 1, return_prev=True)
        Places[tx] = place
        if tx < 4:
            Counts[tx] = count[tx]


@T.prim_func
def compact_positives(X: T.Tensor((128,), "float32"), Out: T.Tensor((128,), "float32"), N: T.Tensor((1,), "int32")):
    """Stream compaction: the positive values, each written at the place its thread took."""
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        n = T.alloc_shared((1,), "int32")
        if tx == 0:
            n[0] = 0
        if X[tx] > 0:
            at = T.atomic_add(n[0], 1, return_prev=True)
            Out[at] = X[tx]
        if tx == 0:
            N[0] = n[0]


def check_places(x, counts, places):
    buckets = x % 4
    np.testing.assert_array_equal(counts, np.bincount(buckets, minlength=4))
    for b in range(4):
        assert sorted(places[buckets == b].tolist()) == list(range(int(counts[b])))


@on_both_interpreters
def test_each_thread_takes_a_place_of_its_own(run):
    x = np.random.default_rng(0).integers(0, 1000, 256).astype(np.int32)
    counts, places = np.zeros(4, np.int32), np.full(256, -1, np.int32)
    run(bucket_places, x, counts, places)
    check_places(x, counts, places)


@on_both_interpreters
def test_stream_compaction(run):
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    out, n = np.zeros(128, np.float32), np.zeros(1, np.int32)
    run(compact_positives, x, out, n)
    assert n[0] == (x > 0).sum()
    assert sorted(out[:n[0]].tolist()) == sorted(x[x > 0].tolist())


def test_it_is_an_atomic_whose_value_is_kept_between_two_barriers(nvrtc_check):
    source = tw.lower(bucket_places, target="cuda").kernel_source
    kernel = source.split('extern "C"')[1]
    init, first, add, second, read = (kernel.find(s) for s in ("count[tx_1] = 0", "__syncthreads()",
                                                             "= atomicAdd((&count[", "Places[tx_1] =", "Counts[tx_1]"))
    assert -1 not in (init, first, add, second, read) and init < first < add < read
    assert kernel.count("__syncthreads()") == 2 and kernel.rfind("__syncthreads()") < read
    nvrtc_check(source, "sm_90a")


def test_the_value_differs_from_thread_to_thread():
    """A block barrier under a condition on the returned place would hang the threads that skip it."""
    with pytest.raises(CompileError, match="may differ between the threads of a block"):
        @T.prim_func
        def main(X: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((1,), "int32")
                t = T.alloc_shared((128,), "float32")
                place = T.atomic_add(s[0], 1, return_prev=True)
                if place < 64:
                    t[place] = X[place]
                    X[place] = t[127 - place]

        tw.lower(main, target="cuda")


@pytest.mark.parametrize("statement, why", [
    ("p = T.atomic_add(G[0], 1.0, return_prev=True)", "return_prev is supported on one element of shared memory; "
                                                      "G\\[...\\] is global memory"),
    ("p = T.atomic_add(s[0:2], t, return_prev=True)", "return_prev is supported on one element of shared memory; "
                                                      "s\\[...\\] is a region"),
    ("p = T.atomic_max(s[0], 1.0, return_prev=True)", "return_prev is supported for T.atomic_add only"),
    ("for i in T.Parallel(2):\n                p = T.atomic_add(s[i], 1.0, return_prev=True)",
     "inside a T.Parallel loop is not supported"),
], ids=["global", "region", "max", "in-parallel"])
def test_what_is_refused(statement, why, tmp_path):
    src = f'''
@T.prim_func
def main(G: T.Tensor((2,), "float32")):
    with T.Kernel(1, threads=32):
        s = T.alloc_shared((2,), "float32")
        t = T.alloc_shared((2,), "float32")
        {statement}
'''
    path = tmp_path / "atomic_return.py"
    path.write_text(src)
    namespace = {"T": T}
    with pytest.raises(CompileError, match=why):
        exec(compile(src, str(path), "exec"), namespace)
        tw.lower(namespace["main"], target="cuda")
