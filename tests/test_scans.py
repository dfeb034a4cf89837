"""``T.cumsum`` / ``T.cummax`` (``ir.Scan``, lowered by ``passes.rules.scans``): what the front end
refuses, how a line is cut into runs, and the lowered code run thread by thread (the thread-level
interpreter) and tile by tile against float64 numpy on random tiles of many shapes, thread counts,
directions and types; the ported program family (``tilelang_programs.cumsum``) on both interpreters;
NVRTC compiles for sm_90a."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.interpreter.values import storage_dtype
from tileworkbench.jit.lower import lower
from tileworkbench.passes.rules.scans import chunking


def scan_kernel(shape, dim, threads, kind="sum", reverse=False, dtype="float32", scope="shared", in_place=True):
    """Copy ``A`` into a tile, scan it along ``dim``, copy the result to ``B``."""
    op = T.cumsum if kind == "sum" else T.cummax
    alloc = T.alloc_shared if scope == "shared" else T.alloc_fragment

    @T.prim_func
    def kernel(A: T.Tensor(shape, dtype), B: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=threads):
            s = alloc(shape, dtype)
            T.copy(A, s)
            if in_place:
                op(s, dim=dim, reverse=reverse)
                T.copy(s, B)
            else:
                d = alloc(shape, dtype)
                op(s, d, dim=dim, reverse=reverse)
                T.copy(d, B)

    return kernel


def reference(a, dim, kind, reverse):
    x = np.flip(a, dim) if reverse else a
    out = np.cumsum(x, axis=dim) if kind == "sum" else np.maximum.accumulate(x, axis=dim)
    return np.flip(out, dim) if reverse else out


def random_tile(rng, shape, dtype):
    if dtype.startswith("int"):
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(storage_dtype(getattr(T, dtype)))


def check(out, a, dim, kind, reverse, dtype):
    want = reference(a.astype(np.float64), dim, kind, reverse)
    if kind == "max" or dtype.startswith("int"):
        assert np.array_equal(out.astype(np.float64), want)  # exact: maxima, and integer sums
        return
    # float32 sums of standard normals; float16 rounds the result once (the sum is kept in float32)
    scale = np.sqrt(a.shape[dim]) if dtype == "float32" else np.abs(want).max()
    tol = {"float32": 2e-6, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    assert np.abs(out.astype(np.float64) - want).max() <= tol * max(scale, 1.0) * 4


# ---- the front end ---------------------------------------------------------------------------------

def _refused(body, match):
    with pytest.raises(CompileError, match=match) as info:
        body()
    assert info.value.loc is not None and "T.cum" in info.value.loc.text  # the kernel line, with a caret


def test_a_global_operand_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                T.cumsum(A)
        return k
    _refused(build, "shared or fragment tile")


def test_shapes_must_match_and_dim_must_exist():
    def mismatch():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((64,), "float32")
                d = T.alloc_shared((32,), "float32")
                T.cumsum(s, d)
        return k

    def bad_dim():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((8, 8), "float32")
                T.cummax(s, dim=2)
        return k
    _refused(mismatch, "differ from the source")
    _refused(bad_dim, "dim 2 out of range")


def test_part_of_a_fragment_and_booleans_are_refused():
    def part():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                f = T.alloc_fragment((8, 8), "float32")
                T.cumsum(f[0:4, :], dim=1)
        return k

    def flags():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((64,), "bool")
                T.cumsum(s)
        return k
    _refused(part, "scanned whole")
    _refused(flags, "needs numbers")


def test_a_slice_that_leaves_its_tile_is_refused():
    def build():
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((64,), "float32")
                for i in T.serial(4):
                    T.cumsum(s[i * 32:i * 32 + 32])
        return k
    with pytest.raises(CompileError, match="past its 64") as info:
        lower(build(), target="cuda")
    assert "T.cumsum" in info.value.loc.text


# ---- how a line is cut -------------------------------------------------------------------------------

@pytest.mark.parametrize("length, lines, threads", [(1024, 1, 128), (1000, 1, 128), (97, 1, 64), (64, 64, 128),
                                                    (64, 300, 128), (7, 1, 128), (4096, 2, 256)])
def test_runs_cover_each_line_once_and_fit_the_threads(length, lines, threads):
    chunks, run = chunking(length, lines, threads)
    assert chunks * run >= length > (chunks - 1) * run  # every element in exactly one run, none empty
    assert lines * chunks <= max(threads, lines)  # one (line, run) per thread when lines allow
    if length % chunks:  # a guard only where no divisor is near as good (a prime length)
        assert all(length % c for c in range(2, chunks))


def test_a_long_line_is_split_between_threads():
    chunks, run = chunking(1024, 1, 128)
    assert chunks > 8 and chunks * run == 1024  # not one thread walking 1024 elements


# ---- lowered code, thread by thread, against numpy -------------------------------------------------

CASES = [((1000,), 0, 128, "sum", False, "float32", "shared", True),
         ((1024,), 0, 128, "sum", True, "float32", "shared", False),
         ((97,), 0, 64, "max", False, "int32", "shared", True),
         ((64, 64), 1, 128, "sum", False, "float16", "shared", False),
         ((64, 64), 0, 128, "max", True, "float32", "shared", True),
         ((16, 100), 1, 256, "sum", False, "float32", "fragment", False),
         ((128, 8), 0, 128, "sum", True, "int32", "fragment", True),
         ((4, 3, 40), 2, 96, "sum", True, "bfloat16", "shared", True)]


@pytest.mark.parametrize("shape, dim, threads, kind, reverse, dtype, scope, in_place", CASES)
def test_both_interpreters_match_numpy(shape, dim, threads, kind, reverse, dtype, scope, in_place):
    rng = np.random.default_rng(sum(shape) + threads)
    kernel = scan_kernel(shape, dim, threads, kind, reverse, dtype, scope, in_place)
    a = random_tile(rng, shape, dtype)
    by_threads = np.zeros_like(a)
    run_at_thread_level(kernel, a, by_threads)
    check(by_threads, a, dim, kind, reverse, dtype)
    by_tiles = np.zeros_like(a)
    tw.compile(kernel, target="cpu")(a, by_tiles)
    check(by_tiles, a, dim, kind, reverse, dtype)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.integers(1, 40), cols=st.integers(1, 130), dim=st.integers(0, 1), threads=st.sampled_from([32, 64, 128, 256]),
       kind=st.sampled_from(["sum", "max"]), reverse=st.booleans(), scope=st.sampled_from(["shared", "fragment"]))
def test_random_tiles_at_the_thread_level(rows, cols, dim, threads, kind, reverse, scope):
    """Shapes the threads do and do not divide, lines longer and shorter than the block."""
    rng = np.random.default_rng(rows * 1000 + cols)
    kernel = scan_kernel((rows, cols), dim, threads, kind, reverse, "float32", scope, in_place=False)
    a = random_tile(rng, (rows, cols), "float32")
    out = np.zeros_like(a)
    run_at_thread_level(kernel, a, out)
    check(out, a, dim, kind, reverse, "float32")


def test_a_scan_of_one_slice_into_another_of_the_same_tile():
    """The source row is read whole before any element of the destination row is written."""

    @T.prim_func
    def kernel(A: T.Tensor((2, 64), "float32"), B: T.Tensor((2, 64), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((2, 64), "float32")
            T.copy(A, s)
            T.cumsum(s[0, :], s[1, :], dim=-1, reverse=True)  # the region is 1 x 64
            T.copy(s, B)

    a = random_tile(np.random.default_rng(3), (2, 64), "float32")
    out = np.zeros_like(a)
    run_at_thread_level(kernel, a, out)
    assert np.array_equal(out[0], a[0])
    check(out[1:], a[:1], 1, "sum", True, "float32")


@pytest.mark.parametrize("source", ["fragment", "shared"])
def test_a_shared_result_is_read_by_other_threads_only_after_a_barrier(source):
    """The scan's last step copies the result into the shared destination by its own mapping of
    threads; other threads read it reversed right after. A fragment source leaves nothing
    ``insert_thread_syncs`` has seen written to the destination, so only the scan's own closing
    barrier orders the two (it was missing: the thread-level interpreter reported the race, a GPU
    could read stale elements)."""

    @T.prim_func
    def kernel(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=128):
            d = T.alloc_shared((512,), "float32")
            if source == "fragment":
                f = T.alloc_fragment((512,), "float32")
                T.copy(A, f)
                T.cumsum(f, d, dim=0)
            else:
                s = T.alloc_shared((512,), "float32")
                T.copy(A, s)
                T.cumsum(s, d, dim=0)
            for i in T.Parallel(512):
                B[i] = d[511 - i]

    a = random_tile(np.random.default_rng(4), (512,), "float32")
    out = np.zeros_like(a)
    run_at_thread_level(kernel, a, out)  # raises KernelRuntimeError on a race
    check(out[::-1].copy(), a, 0, "sum", False, "float32")


def test_the_program_family_on_both_interpreters(monkeypatch):
    from tileworkbench.examples.tilelang_programs import cumsum

    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    rng = np.random.default_rng(5)
    g = rng.standard_normal((2, 128, 40)).astype(np.float32)  # 40 heads: a partial block of 32
    for reverse in (False, True):
        want = cumsum.chunk_local_reference(g.astype(np.float64), reverse=reverse)
        kernel = cumsum.chunk_local_cumsum.compile(B=2, S=128, H=40, reverse=reverse)
        assert np.abs(kernel(g) - want).max() < 1e-5
        assert np.abs(run_at_thread_level(kernel, g) - want).max() < 1e-5
    x = random_tile(rng, (6, 200), "float16")
    kernel = cumsum.row_cummax.compile(M=6, N=200)
    assert np.array_equal(run_at_thread_level(kernel, x), np.maximum.accumulate(x, axis=1))


# ---- NVRTC ------------------------------------------------------------------------------------------

def test_the_lowered_scans_compile_for_sm_90a():
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    for case in (CASES[0], CASES[2], CASES[5], CASES[7]):
        result = compile_check(lower(scan_kernel(*case), target="cuda").kernel_source, "sm_90a")
        assert result.spills_bytes == 0


def test_two_scans_of_one_tile_keep_their_scratch_apart():
    """Each scan declares its totals tile under the source's name; the thread level knows shared
    memory by name, and before ``name_buffers_uniquely`` the second scan's tile was taken for the
    first's (a race the GPU code, whose tiles have bytes of their own, does not have)."""

    @T.prim_func
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((2, 64), "float32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((64,), "float32")
            t = T.alloc_shared((64,), "float32")
            T.copy(A, s)
            T.cumsum(s, t, dim=0)
            T.cummax(s, dim=0, reverse=True)
            T.copy(t, B[0, :])
            T.copy(s, B[1, :])

    a = random_tile(np.random.default_rng(8), (64,), "float32")
    out = np.zeros((2, 64), np.float32)
    run_at_thread_level(kernel, a, out)
    check(out[0], a, 0, "sum", False, "float32")
    check(out[1], a, 0, "max", True, "float32")
    names = [line.split("=")[0].strip() for line in lower(kernel, target="cuda").trace.passes[-1].ir_after.splitlines()
             if "_scan_totals" in line and "alloc_shared" in line]
    assert names == ["s_scan_totals", "s_scan_totals_1"]
