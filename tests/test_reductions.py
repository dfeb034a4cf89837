"""Reductions of integers (``T.reduce_bitand/bitor/bitxor``, and max / sum of types int32 cannot
hold: uint32 and int64 partials were once combined in int32, a wrong answer) on both interpreters
against numpy, in registers (a fragment's rows, shuffles and shared memory) and through shared
memory, with and without ``clear``; TileLang's ``batch`` and ``annotations`` arguments; NVRTC."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.jit.lower import lower

NUMPY = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "max": np.maximum,
         "min": np.minimum, "sum": np.add}


def row_reduction(kind, dtype, M, N, threads, scope, clear, **options):
    """``B = reduce(A, dim=1)`` combined with ``B``'s old values unless ``clear``."""
    op = getattr(T, f"reduce_{kind}")
    alloc = T.alloc_fragment if scope == "fragment" else T.alloc_shared

    @T.prim_func
    def kernel(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=threads):
            tile = alloc((M, N), dtype)
            rows = alloc((M,), dtype)
            T.copy(A, tile)
            T.copy(B, rows)
            op(tile, rows, dim=1, clear=clear, **options)
            T.copy(rows, B)

    return kernel


def expected(kind, a, before, clear):
    out = a.sum(1, dtype=a.dtype) if kind == "sum" else NUMPY[kind].reduce(a, axis=1)
    return out if clear else NUMPY[kind](before, out)


def random_ints(rng, dtype, shape, kind):
    top = 100 if kind == "sum" else np.iinfo(dtype).max  # sums stay clear of wrapping
    return rng.integers(np.iinfo(dtype).min if kind != "sum" else 0, top, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("kind", ["bitand", "bitor", "bitxor", "max", "min", "sum"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("scope, M, N, threads", [("fragment", 64, 64, 128), ("shared", 16, 100, 128),
                                                  ("fragment", 8, 1000, 128)])
def test_integer_reductions_on_both_interpreters(kind, dtype, scope, M, N, threads):
    rng = np.random.default_rng([M, N, len(kind), np.dtype(dtype).itemsize])
    for clear in (True, False):
        a, before = random_ints(rng, dtype, (M, N), kind), random_ints(rng, dtype, M, kind)
        kernel = row_reduction(kind, dtype, M, N, threads, scope, clear)
        by_threads = before.copy()
        run_at_thread_level(kernel, a, by_threads)
        by_tiles = before.copy()
        tw.compile(kernel, target="cpu")(a, by_tiles)
        want = expected(kind, a, before, clear)
        assert np.array_equal(by_threads, want), (clear, by_threads[:4], want[:4])
        assert np.array_equal(by_tiles, want)


def test_booleans_reduce_bitwise():
    rng = np.random.default_rng(1)
    a = rng.random((32, 40)) < 0.9
    for kind in ("bitand", "bitor", "bitxor"):
        out = np.zeros(32, bool)
        run_at_thread_level(row_reduction(kind, "bool", 32, 40, 64, "fragment", True), a, out)
        assert np.array_equal(out, NUMPY[kind].reduce(a, axis=1))


def test_bitwise_reductions_of_floats_are_refused():
    with pytest.raises(CompileError, match="combines integers") as info:
        row_reduction("bitor", "float32", 8, 8, 32, "fragment", True)
    assert "op(tile, rows" in info.value.loc.text  # the kernel line


def test_tilelang_s_batch_and_annotations():
    kernel = row_reduction("max", "float32", 64, 64, 128, "fragment", True, batch=2, annotations={"enable_fadd2": False})
    a = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    out = np.zeros(64, np.float32)
    run_at_thread_level(kernel, a, out)
    assert np.array_equal(out, a.max(1))
    with pytest.raises(CompileError, match="nan_propagate.*not supported"):
        row_reduction("max", "float32", 8, 8, 32, "fragment", True, annotations={"nan_propagate": True})
    with pytest.raises(CompileError, match="unknown annotation 'fast'"):
        row_reduction("sum", "float32", 8, 8, 32, "fragment", True, annotations={"fast": True})
    with pytest.raises(CompileError, match="batch must be at least 1"):
        row_reduction("sum", "float32", 8, 8, 32, "fragment", True, batch=0)


def test_integer_reductions_compile_for_sm_90a():
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    for kind, dtype in (("bitxor", "uint64"), ("max", "uint32"), ("bitand", "int32")):
        source = lower(row_reduction(kind, dtype, 8, 1000, 128, "fragment", False), target="cuda").kernel_source
        assert "__shfl_xor_sync" in source
        assert compile_check(source, "sm_90a").spills_bytes == 0
