"""Evaluate IR index expressions with concrete values.

The analyses replay the lowered program: loop variables get Python ints, and the thread index
gets a numpy vector ``arange(threads)`` so one evaluation covers the whole thread block (an
expression that does not mention the thread index stays a plain int). Division and modulo use
floor semantics, as the IR does (the code generator emits ``tw::floordiv`` whenever the C
truncating operators would differ).
"""

from __future__ import annotations

import operator

import numpy as np

from ..ir import nodes as ir


class Unknown(Exception):
    """The expression needs a value the analysis does not have (a buffer load, a raw C++ text,
    a variable bound to something it could not evaluate)."""


_ARITH = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
    "%": operator.mod, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "<<": operator.lshift, ">>": operator.rshift,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}


def _is_vector(v) -> bool:
    return isinstance(v, np.ndarray)


def _logical(op: str, a, b):
    if _is_vector(a) or _is_vector(b):
        fn = np.logical_and if op == "and" else np.logical_or
        return fn(a, b)
    return (bool(a) and bool(b)) if op == "and" else (bool(a) or bool(b))


def _minmax(op: str, a, b):
    if _is_vector(a) or _is_vector(b):
        return (np.minimum if op == "min" else np.maximum)(a, b)
    return min(a, b) if op == "min" else max(a, b)


def evaluate(expr, env: dict):
    """Value of ``expr`` with ``env`` mapping :class:`ir.Var` (by identity) to ints or vectors.

    Raises :class:`Unknown` when a value is missing.
    """
    if isinstance(expr, (bool, int, float)):
        return expr
    if isinstance(expr, ir.Const):
        return expr.value
    if isinstance(expr, ir.Var):
        if expr in env:
            value = env[expr]
            if value is Unknown:
                raise Unknown(expr.name)
            return value
        raise Unknown(expr.name)
    if isinstance(expr, ir.BinOp):
        a, b = evaluate(expr.a, env), evaluate(expr.b, env)
        if expr.op in ("and", "or"):
            return _logical(expr.op, a, b)
        if expr.op in ("min", "max"):
            return _minmax(expr.op, a, b)
        if expr.op == "/":
            return a / b
        if expr.op in ("//", "%") and not _is_vector(b) and b == 0:
            raise Unknown("division by zero")
        return _ARITH[expr.op](a, b)
    if isinstance(expr, ir.Not):
        a = evaluate(expr.a, env)
        return np.logical_not(a) if _is_vector(a) else not a
    if isinstance(expr, ir.Select):
        c, a, b = evaluate(expr.cond, env), evaluate(expr.a, env), evaluate(expr.b, env)
        if _is_vector(c):
            return np.where(c, a, b)
        return a if c else b
    if isinstance(expr, ir.Cast):
        v = evaluate(expr.value, env)
        if expr.dtype.kind == "bool":
            return v.astype(bool) if _is_vector(v) else bool(v)
        if not expr.dtype.is_float:
            return v.astype(np.int64) if _is_vector(v) else int(v)
        return v
    if isinstance(expr, ir.Call) and expr.name in ("min", "max") and len(expr.args) == 2:
        return _minmax(expr.name, evaluate(expr.args[0], env), evaluate(expr.args[1], env))
    if isinstance(expr, ir.Raw):  # a built-in index (blockIdx.x, ...): bound by its text, when it is
        if expr.text in env:
            return env[expr.text]
        raise Unknown(expr.text)
    raise Unknown(type(expr).__name__ if not isinstance(expr, ir.Call) else expr.name)


def as_int(value) -> int:
    """A uniform (same for every thread) integer value; vectors that agree collapse to one."""
    if _is_vector(value):
        first = value.flat[0]
        if not np.all(value == first):
            raise Unknown("value differs between threads")
        value = first
    return int(value)
