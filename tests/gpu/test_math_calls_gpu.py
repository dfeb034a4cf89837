"""On the H200, the math library (``ir.math_calls``; CPU tests: tests/test_math_calls.py) against
numpy in float64 on random inputs: CUDA's float32 functions within their documented error (a few
units in the last place; the fast ``T.__exp`` ... within theirs), the float64 ones, the tests of
special values and the bit counts exactly."""

import math

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)

N = 4096
# name -> (float64 reference, each argument's range)
CASES = {
    "erf": (np.vectorize(math.erf), [(-3, 3)]), "log1p": (np.log1p, [(-0.9, 5)]), "log10": (np.log10, [(0.01, 100)]),
    "exp10": (lambda x: 10.0 ** x, [(-3, 3)]), "tan": (np.tan, [(-1.4, 1.4)]), "sinh": (np.sinh, [(-4, 4)]),
    "cosh": (np.cosh, [(-4, 4)]), "asin": (np.arcsin, [(-1, 1)]), "acos": (np.arccos, [(-1, 1)]),
    "atan": (np.arctan, [(-10, 10)]), "asinh": (np.arcsinh, [(-10, 10)]), "acosh": (np.arccosh, [(1, 10)]),
    "atanh": (np.arctanh, [(-0.9, 0.9)]), "round": (lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x), [(-10, 10)]),
    "trunc": (np.trunc, [(-10, 10)]), "nearbyint": (np.rint, [(-10, 10)]), "fabs": (np.abs, [(-10, 10)]),
    "pow": (np.power, [(0.1, 4), (-3, 3)]), "fmod": (np.fmod, [(-10, 10), (0.5, 3)]),
    "atan2": (np.arctan2, [(-5, 5), (-5, 5)]), "hypot": (np.hypot, [(-5, 5), (-5, 5)]),
    "copysign": (np.copysign, [(-5, 5), (-5, 5)]), "fma": (lambda a, b, c: a * b + c, [(-5, 5)] * 3),
    "__exp": (np.exp, [(-5, 5)]), "__log": (np.log, [(0.1, 50)]), "__log2": (np.log2, [(0.1, 50)]),
    "__sin": (np.sin, [(-3, 3)]), "__cos": (np.cos, [(-3, 3)]),
}


def elementwise(fn, arity, dtype):
    @T.prim_func
    def kernel(A: T.Tensor((3, N), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = fn(A[0, bx * 256 + i]) if arity == 1 else \
                    fn(A[0, bx * 256 + i], A[1, bx * 256 + i]) if arity == 2 else \
                    fn(A[0, bx * 256 + i], A[1, bx * 256 + i], A[2, bx * 256 + i])

    return tw.compile(kernel)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_functions_match_float64(torch, name, dtype):
    reference, ranges = CASES[name]
    rng = np.random.default_rng(len(name))
    a = np.zeros((3, N))
    for j, (lo, hi) in enumerate(ranges):
        a[j] = rng.uniform(lo, hi, N)
    if name in ("round", "nearbyint"):
        a[0, :20] = np.arange(-10, 10) + 0.5
    a = a.astype(dtype)
    want = reference(*a[:len(ranges)].astype(np.float64))
    out = torch.zeros(N, device="cuda", dtype=getattr(torch, dtype))
    elementwise(getattr(T, name), len(ranges), dtype)(torch.from_numpy(a).cuda(), out)
    fast = name.startswith("__")
    rtol = {"float32": 4e-5 if fast else 1e-6, "float64": 1e-13}[dtype] if not (fast and dtype == "float64") else 1e-13
    atol = 2e-6 if fast and dtype == "float32" else rtol
    np.testing.assert_allclose(out.cpu().numpy().astype(np.float64), want, rtol=rtol, atol=atol, err_msg=name)


def test_tests_and_bit_counts(torch):
    @T.prim_func
    def kernel(A: T.Tensor((N,), "float32"), B: T.Tensor((3, N), "bool"), I: T.Tensor((N,), "int64"),  # noqa: E741
               J: T.Tensor((2, N), "int32")):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                B[0, bx * 256 + i] = T.isnan(A[bx * 256 + i])
                B[1, bx * 256 + i] = T.isinf(A[bx * 256 + i])
                B[2, bx * 256 + i] = T.isfinite(A[bx * 256 + i])
                J[0, bx * 256 + i] = T.popcount(I[bx * 256 + i])
                J[1, bx * 256 + i] = T.clz(I[bx * 256 + i])

    rng = np.random.default_rng(9)
    a = rng.choice(np.array([0.0, 1.5, -np.inf, np.inf, np.nan, -0.0, 3.4e38], np.float32), N)
    ints = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, N, dtype=np.int64)
    flags = torch.zeros(3, N, device="cuda", dtype=torch.bool)
    counts = torch.zeros(2, N, device="cuda", dtype=torch.int32)
    tw.compile(kernel)(torch.from_numpy(a).cuda(), flags, torch.from_numpy(ints).cuda(), counts)
    assert np.array_equal(flags.cpu().numpy(), np.stack([np.isnan(a), np.isinf(a), np.isfinite(a)]))
    unsigned = ints.view(np.uint64)
    assert np.array_equal(counts[0].cpu().numpy(), np.bitwise_count(unsigned))
    assert np.array_equal(counts[1].cpu().numpy(), [64 - int(v).bit_length() for v in unsigned])


def test_floats_become_int32_as_the_interpreters_say(torch):
    """NaN to 0, infinities and values past int32 saturated, towards zero otherwise (the CPU
    interpreters follow this: tests/interpreter/test_interpreter.py)."""
    @T.prim_func
    def convert(A: T.Tensor((6,), "float32"), B: T.Tensor((6,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(6):
                B[i] = T.Cast("int32", A[i])

    a = torch.tensor([float("nan"), float("inf"), float("-inf"), 3e9, -2.7, 300.5], device="cuda")
    b = torch.zeros(6, dtype=torch.int32, device="cuda")
    tw.compile(convert)(a, b)
    assert b.tolist() == [0, 2**31 - 1, -(2**31), 2**31 - 1, -2, 300]


@pytest.mark.parametrize("source", ["float16", "float32", "float64"])
def test_floats_become_integers_saturated_as_the_interpreters_say(torch, source):
    """Every integer target: towards zero, saturated to the type, NaN to 0, from float16, float32
    and float64, through a copy and through casts (tw::to_integer; the CPU test:
    tests/interpreter/test_interpreter.py). CuPy arrays: torch's uint16 to uint64 are partial types."""
    import cupy

    from tileworkbench.examples import edge_cases

    want = edge_cases.conversions_expected(source)
    outs = {name: cupy.full(len(v), 7, dtype=v.dtype) for name, v in want.items()}
    tw.compile(edge_cases.float_to_integer_conversions(source))(cupy.asarray(edge_cases.conversion_inputs(source)),
                                                               *outs.values())
    for name, got in outs.items():
        assert cupy.asnumpy(got).tolist() == want[name].tolist(), name
