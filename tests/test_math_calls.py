"""The math library beyond exp/log/sqrt (``ir.math_calls``: ``T.erf``, ``T.pow``, ``T.fma``,
``T.isnan``, ``T.popcount``, TileLang's fast ``T.__exp`` ...) and the integer helpers
(``T.bitwise_*``, ``T.shift_*``, ``T.truncdiv``/``truncmod``): each on both CPU interpreters against
numpy in float64 on random inputs (ints exactly), what the front end refuses, and NVRTC compiles
of every function in float32, float64 and float16 for sm_90a."""


import math

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.ir.math_calls import CALLS
from tileworkbench.jit.lower import lower

N = 200


def elementwise(fn, arity, dtype="float32", out_dtype=None):
    """``B[i] = fn(A[0, i], ..., A[arity - 1, i])`` over ``N`` elements."""
    out_dtype = out_dtype or dtype

    @T.prim_func
    def kernel(A: T.Tensor((arity, N), dtype), B: T.Tensor((N,), out_dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                if arity == 1:
                    B[i] = fn(A[0, i])
                elif arity == 2:
                    B[i] = fn(A[0, i], A[1, i])
                else:
                    B[i] = fn(A[0, i], A[1, i], A[2, i])

    return kernel


def _erf(x):
    return np.vectorize(math.erf)(x)


def _round(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


# name -> (float64 reference, inputs' range: each argument's (low, high))
FLOAT_CASES = {
    "erf": (_erf, [(-3, 3)]), "log1p": (np.log1p, [(-0.9, 5)]), "log10": (np.log10, [(0.01, 100)]),
    "exp10": (lambda x: 10.0 ** x, [(-3, 3)]), "tan": (np.tan, [(-1.4, 1.4)]), "sinh": (np.sinh, [(-4, 4)]),
    "cosh": (np.cosh, [(-4, 4)]), "asin": (np.arcsin, [(-1, 1)]), "acos": (np.arccos, [(-1, 1)]),
    "atan": (np.arctan, [(-10, 10)]), "asinh": (np.arcsinh, [(-10, 10)]), "acosh": (np.arccosh, [(1, 10)]),
    "atanh": (np.arctanh, [(-0.9, 0.9)]), "round": (_round, [(-10, 10)]), "trunc": (np.trunc, [(-10, 10)]),
    "nearbyint": (np.rint, [(-10, 10)]), "fabs": (np.abs, [(-10, 10)]), "pow": (np.power, [(0.1, 4), (-3, 3)]),
    "fmod": (np.fmod, [(-10, 10), (0.5, 3)]), "atan2": (np.arctan2, [(-5, 5), (-5, 5)]),
    "hypot": (np.hypot, [(-5, 5), (-5, 5)]), "copysign": (np.copysign, [(-5, 5), (-5, 5)]),
    "nextafter": (lambda a, b: np.nextafter(a.astype(np.float32), b.astype(np.float32)), [(-5, 5), (-5, 5)]),
    "fma": (lambda a, b, c: a * b + c, [(-5, 5), (-5, 5), (-5, 5)]),
    "__exp": (np.exp, [(-5, 5)]), "__exp10": (lambda x: 10.0 ** x, [(-2, 2)]), "__log": (np.log, [(0.1, 50)]),
    "__log2": (np.log2, [(0.1, 50)]), "__log10": (np.log10, [(0.1, 50)]), "__sin": (np.sin, [(-3, 3)]),
    "__cos": (np.cos, [(-3, 3)]), "__tan": (np.tan, [(-1.2, 1.2)]),
}


def test_every_library_call_has_a_case():
    assert set(FLOAT_CASES) | {"isnan", "isinf", "isfinite", "popcount", "clz"} == set(CALLS)


@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_float_functions_on_both_interpreters(name):
    reference, ranges = FLOAT_CASES[name]
    rng = np.random.default_rng(len(name))
    a = np.stack([rng.uniform(lo, hi, N) for lo, hi in ranges]).astype(np.float32)
    if name in ("round", "nearbyint"):
        a[0, :20] = np.arange(-10, 10) + 0.5  # the halves, where the two roundings differ
    want = reference(*a.astype(np.float64))
    kernel = elementwise(getattr(T, name), len(ranges))
    for run in (lambda: run_at_thread_level(kernel, a, out), lambda: tw.compile(kernel, target="cpu")(a, out)):
        out = np.zeros(N, np.float32)
        run()
        np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6, err_msg=name)


def test_tests_of_special_values():
    a = np.array([[0.0, 1.5, -np.inf, np.inf, np.nan, -0.0, 3.4e38, -7.0] * 25], np.float32)
    for name, reference in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
        out = np.zeros(N, bool)
        run_at_thread_level(elementwise(getattr(T, name), 1, out_dtype="bool"), a, out)
        assert np.array_equal(out, reference(a[0])), name


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint8"])
def test_bit_counts_are_exact(dtype):
    info = np.iinfo(dtype)
    a = np.random.default_rng(3).integers(info.min, info.max, (1, N), dtype=dtype, endpoint=True)
    a[0, :3] = [0, info.max, info.min]
    bits = np.dtype(dtype).itemsize * 8
    unsigned = a[0].astype(np.int64).view(np.uint64) & np.uint64(2**bits - 1 if bits < 64 else 2**64 - 1)
    out = np.zeros(N, np.int32)
    run_at_thread_level(elementwise(T.popcount, 1, dtype, "int32"), a, out)
    assert np.array_equal(out, np.bitwise_count(unsigned))
    if bits >= 32:
        out = np.zeros(N, np.int32)
        tw.compile(elementwise(T.clz, 1, dtype, "int32"), target="cpu")(a, out)
        assert np.array_equal(out, [bits - int(v).bit_length() for v in unsigned])


@pytest.mark.parametrize("name, reference", [
    ("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor),
    ("shift_left", lambda a, b: np.left_shift(a, b & 15)), ("shift_right", lambda a, b: np.right_shift(a, b & 15)),
    ("truncdiv", lambda a, b: np.trunc(a / b).astype(np.int32)), ("truncmod", np.fmod)])
def test_integer_helpers_are_c_s(name, reference):
    rng = np.random.default_rng(4)
    a = rng.integers(-1000, 1000, (2, N)).astype(np.int32)
    a[1] = np.where(a[1] == 0, 7, a[1])
    fn = getattr(T, name)
    if name.startswith("shift"):  # shift counts within the type: 0 to 15 here
        def fn(x, y, shift=getattr(T, name)):  # noqa: E306
            return shift(x, T.bitwise_and(y, 15))
        a[0] = np.abs(a[0])  # >> of a negative value is implementation-defined in C before C++20
    out = np.zeros(N, np.int32)
    run_at_thread_level(elementwise(fn, 2, "int32"), a, out)
    assert np.array_equal(out, reference(a[0], a[1])), name
    out = np.zeros(N, np.int32)
    run_at_thread_level(elementwise(T.bitwise_not, 1, "int32"), a[:1], out)
    assert np.array_equal(out, ~a[0])


def test_wrong_arguments_are_refused():
    with pytest.raises(CompileError, match="T.pow takes 2 arguments, got 1"):
        elementwise(lambda x: T.pow(x), 1)
    with pytest.raises(CompileError, match="leading zeros of a 32- or 64-bit integer; the argument is int8"):
        elementwise(T.clz, 1, "int8", "int32")
    with pytest.raises(CompileError, match="counts the bits of an integer; the argument is float32"):
        elementwise(T.popcount, 1, "float32", "int32")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_function_compiles_for_sm_90a(dtype):
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    names = sorted(FLOAT_CASES)

    def every_function(*args):  # one expression calling each (the front end runs this helper as Python)
        total = None
        for name in names:
            term = getattr(T, name)(*args[:len(FLOAT_CASES[name][1])])
            total = term if total is None else total + term
        return total

    @T.prim_func
    def kernel(A: T.Tensor((3, N), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((3, N), "bool"),
               I: T.Tensor((2, N), "int64"), J: T.Tensor((2, N), "int32")):  # noqa: E741
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                B[i] = every_function(A[0, i], A[1, i], A[2, i])
                C[0, i] = T.isnan(A[0, i])
                C[1, i] = T.isinf(A[1, i])
                C[2, i] = T.isfinite(A[2, i])
                J[0, i] = T.popcount(I[0, i]) + T.clz(I[1, i])
                J[1, i] = T.popcount(T.Cast("uint8", J[0, i])) + T.clz(J[1, i])

    source = lower(kernel, target="cuda").kernel_source
    assert "erff(" in source if dtype != "float64" else "erf(" in source
    assert "__popcll(" in source and "__clz(" in source
    compile_check(source, "sm_90a")


@pytest.mark.parametrize("source, held", [("float16", "float"), ("float32", "float"), ("float64", "double")])
def test_floats_convert_to_integers_through_a_defined_helper(source, held):
    """C's ``(int)x`` is undefined for NaN and out of range, and the GPU's answers differ by type
    (scripts/experiments/float_to_int.py): every float-to-integer conversion (a cast, a copy into an
    integer tensor) goes through ``tw::to_integer``, from the float's float or double form; the
    source compiles for sm_90a. (Both interpreters and the GPU: tests/interpreter/test_interpreter.py,
    tests/gpu/test_math_calls_gpu.py.)"""
    from tileworkbench.examples import edge_cases

    source_text = lower(edge_cases.float_to_integer_conversions(source), target="cuda").kernel_source
    body = source_text[source_text.index('extern "C"'):]
    for _, dtype in edge_cases.INTEGER_TARGETS:
        from tileworkbench import dtypes

        assert f"tw::to_integer<{getattr(dtypes, dtype).cpp}>(({held})" in body
    assert "(unsigned char)(" not in body and "((int)(" not in body
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(source_text, "sm_90a")
