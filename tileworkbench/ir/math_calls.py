"""The math library calls the IR holds as ``Call(name, args)`` beyond the first few (``exp``,
``log``, ... have their own tables in ``codegen.c_style``): one record each, read by the front end
(``T.erf``, ``T.pow``, ``T.isnan`` ...: how many arguments and of what kind), by code generation
(CUDA's function for float32 and float64 arguments) and by the interpreters (numpy's, in
``interpreter.values``), so the three agree on the same list."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MathCall:
    name: str  # T.<name>, and the IR call's
    arity: int
    kind: str  # "float": float arguments, a value of their type; "test": float arguments, a bool;
    #            "int": integer arguments, a value of the first's type
    c_float: str  # CUDA's function for float32 (and narrower: computed in float32) arguments
    c_double: str | None = None  # for float64 arguments (None: as c_float); for "int": 64-bit integers


def _float(name, arity=1, c_float=None, c_double=None):
    return MathCall(name, arity, "float", c_float or f"{name}f", c_double or name)


def _fast(name, cuda):
    """TileLang's ``T.__exp`` and friends: CUDA's fast float32 intrinsics (float64 takes the exact one)."""
    return MathCall(name, 1, "float", cuda, name[2:])


CALLS = {c.name: c for c in [
    _float("erf"), _float("log1p"), _float("log10"), _float("exp10"), _float("tan"), _float("sinh"),
    _float("cosh"), _float("asin"), _float("acos"), _float("atan"), _float("asinh"), _float("acosh"),
    _float("atanh"), _float("round"), _float("trunc"), _float("nearbyint"), _float("fabs"),
    _float("pow", 2), _float("fmod", 2), _float("atan2", 2), _float("hypot", 2), _float("copysign", 2),
    _float("nextafter", 2), _float("fma", 3),
    MathCall("isnan", 1, "test", "isnan"), MathCall("isinf", 1, "test", "isinf"),
    MathCall("isfinite", 1, "test", "isfinite"),
    MathCall("popcount", 1, "int", "__popc", "__popcll"), MathCall("clz", 1, "int", "__clz", "__clzll"),
    _fast("__exp", "__expf"), _fast("__exp10", "__exp10f"), _fast("__log", "__logf"),
    _fast("__log2", "__log2f"), _fast("__log10", "__log10f"), _fast("__sin", "__sinf"),
    _fast("__cos", "__cosf"), _fast("__tan", "__tanf"),
]}


def c_function(call: MathCall, bits: int) -> str:
    """CUDA's function for arguments of ``bits`` (64: ``c_double``)."""
    return call.c_double if bits == 64 and call.c_double else call.c_float


C_NAMES = frozenset(n for c in CALLS.values() for n in (c.c_float, c.c_double) if n)
