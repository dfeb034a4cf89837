"""What every C-like target prints the same way: names, expressions and control flow.

``CStyleRenderer`` prints the IR the codegen phase leaves (``passes/linearize_accesses``,
``passes/resolve_int_arithmetic``): every access one element offset, every integer operation
typed with the width it needs and ``truncdiv``/``truncmod`` where C's ``/`` and ``%`` are right,
every loop with the bound it runs to (``For.form``). It decides nothing of that itself; a target
(``codegen/cuda.py``) overrides what its language spells differently: how a value of a dtype is
held and converted, how a buffer element is addressed, memory, barriers and the kernel's frame.

An ``int64`` operation on narrower operands casts its left operand to ``long long`` (C promotes
the other side); ``//`` and ``%`` on values that may be negative are floor division and modulo
(:meth:`CStyleRenderer.floor_div_mod`, inline for 64-bit values).
"""

from __future__ import annotations

import math

from ..ir import nodes as ir
from ..ir.math_calls import C_NAMES as MATH_CALL_NAMES, CALLS as MATH_CALLS, c_function

# The least magnitude a float32 rounds to infinity (halfway between FLT_MAX and 2^128, a tie that
# rounds to the even 2^128): a larger constant would be a C literal out of range.
FLOAT32_ROUNDS_TO_INFINITY = 2.0**128 - 2.0**103

C_KEYWORDS = frozenset({
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
    "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
    "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
    "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
    "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
})
# The C math library's names, which the generated code calls unqualified.
C_MATH_NAMES = frozenset({
    "min", "max", "fminf", "fmaxf", "fmin", "fmax", "abs", "fabsf", "floorf", "expf", "exp2f", "logf", "log2f",
    "sqrtf", "rsqrtf", "tanhf", "sinf", "cosf", "ceilf", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh",
    "sin", "cos", "floor", "ceil",
}) | MATH_CALL_NAMES

MATH_F32 = {"exp": "expf", "exp2": "exp2f", "log": "logf", "log2": "log2f", "sqrt": "sqrtf", "rsqrt": "rsqrtf",
            "tanh": "tanhf", "sin": "sinf", "cos": "cosf", "floor": "floorf", "ceil": "ceilf"}
MATH_F64 = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
            "tanh": "tanh", "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil"}


def identifier(name: str, reserved) -> str:
    """``name`` as a C identifier: ASCII letters, digits and ``_`` as they are, any other
    character as ``_u<hex>`` (unicode names), and a trailing ``_`` on a ``reserved`` word."""
    out = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else f"_u{ord(ch):x}" for ch in name)
    if not out or out[0].isdigit():
        out = "_" + out
    return out + "_" if out in reserved else out


class CStyleRenderer:
    """Prints one kernel body, statement by statement, into ``self.lines``.

    A target sets ``reserved`` (the names a kernel's own cannot take), ``math_f32`` (its float32
    math functions) and overrides the ``value_type``, ``load``, ``element``, ``store_value`` and
    ``s_<Statement>`` methods its language spells differently; the rest is C."""

    reserved = C_KEYWORDS | C_MATH_NAMES
    math_f32 = MATH_F32
    math_f64 = MATH_F64

    def __init__(self, func: ir.PrimFunc):
        self.func = func
        self.lines: list[str] = []
        self.names: dict = {}
        self.taken: set = set()
        self.raw_names: dict = {}  # names that lowering wrote as text (ir.Raw) -> their C spelling

    # ---- names -----------------------------------------------------------------------------
    def declare(self, var) -> str:
        """A fresh C name for ``var`` (a Var or Buffer): its own, unless reserved or taken."""
        base = identifier(var.name, self.reserved)
        name, n = base, 1
        while name in self.taken:
            name = f"{base}_{n}"
            n += 1
        self.taken.add(name)
        self.names[var] = name
        if isinstance(var, ir.Buffer) and name != var.name:
            self.raw_names[var.name] = name  # the gemm call names its accumulator as text
        return name

    def name(self, var) -> str:
        if var not in self.names:
            return self.declare(var)
        return self.names[var]

    def buffer_name(self, buf: ir.Buffer) -> str:
        return self.names.get(buf, buf.name)

    # ---- types -------------------------------------------------------------------------------
    def value_type(self, dtype) -> str:
        """The C type that holds a *value* of ``dtype`` in generated arithmetic."""
        return dtype.cpp

    # ---- expressions -------------------------------------------------------------------------
    def expr(self, e) -> str:
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise TypeError(f"cannot render {type(e).__name__}")
        return method(e)

    def e_Var(self, e: ir.Var) -> str:
        return self.name(e)

    def e_Not(self, e: ir.Not) -> str:
        return f"(!{self.expr(e.a)})"

    def e_Select(self, e: ir.Select) -> str:
        return f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"

    def e_Raw(self, e: ir.Raw) -> str:
        return self.raw_names.get(e.text, e.text)

    def e_BarrierRef(self, e: ir.BarrierRef) -> str:
        return f"{self.buffer_name(e.buffer)}[{self.expr(e.index)}]"

    def e_BufferLoad(self, e: ir.BufferLoad) -> str:
        return self.load(e, self.element(e))

    def e_Const(self, e: ir.Const) -> str:
        if e.dtype.kind == "bool" or isinstance(e.value, bool):
            return "true" if e.value else "false"
        if e.dtype.is_float:
            v = float(e.value)
            if e.dtype.name != "float64" and math.isfinite(v) and abs(v) >= FLOAT32_ROUNDS_TO_INFINITY:
                v = math.copysign(math.inf, v)  # the value as a float32 (held so) is infinite
            if math.isinf(v) or math.isnan(v):
                return self.special_float(v)
            text = repr(v)
            return text if e.dtype.name == "float64" else f"{text}f"
        if e.dtype.name in ("int64", "uint64"):
            return f"{e.value}LL"
        return str(e.value)

    def special_float(self, v: float) -> str:
        """Infinity or NaN as a float32 literal."""
        return {"inf": "INFINITY", "-inf": "(-INFINITY)"}.get(repr(v), "NAN")

    @staticmethod
    def is_64_bit(e) -> bool:
        return e.dtype.bits == 64 and not e.dtype.is_float

    def e_BinOp(self, e: ir.BinOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if self.is_64_bit(e) and not (self.is_64_bit(e.a) or self.is_64_bit(e.b)):
            a = f"(long long)({a})"  # the operation (and C's promotion of the other side) in 64 bits
        if e.op in ("truncdiv", "truncmod"):
            return f"({a} {'/' if e.op == 'truncdiv' else '%'} {b})"
        if e.op in ("//", "%") and self.is_64_bit(e):
            return self.floor_div_mod_64(e.op, a, b)
        if e.op in ("min", "max"):
            fn = {"min": "fminf", "max": "fmaxf"}[e.op] if e.dtype.is_float else e.op
            if e.dtype.name == "float64":
                fn = "f" + e.op
            return f"{fn}({a}, {b})"
        if e.op in ("//", "%") and not e.dtype.is_float:
            return self.floor_div_mod(e.op, a, b)
        if e.op in ("//", "%"):  # floats: Python's floor division and the modulo that goes with it
            floor = "floor" if e.dtype.name == "float64" else "floorf"
            return f"{floor}({a} / {b})" if e.op == "//" else f"({a} - {floor}({a} / {b}) * {b})"
        if e.op == "/" and not (e.a.dtype.is_float or e.b.dtype.is_float):
            return f"((float)({a}) / (float)({b}))"
        op = {"and": "&&", "or": "||"}.get(e.op, e.op)
        return f"({a} {op} {b})"

    def floor_div_mod(self, op: str, a: str, b: str) -> str:
        """Floor division or modulo of ``int`` values that may be negative."""
        return self.floor_div_mod_64(op, a, b)

    @staticmethod
    def floor_div_mod_64(op: str, a: str, b: str) -> str:
        """Floor division or modulo of 64-bit values of any sign."""
        if op == "//":
            return f"(({a}) / ({b}) - ((({a}) % ({b}) != 0) && ((({a}) < 0) != (({b}) < 0))))"
        return f"(((({a}) % ({b})) + ({b})) % ({b}))"

    def e_Cast(self, e: ir.Cast) -> str:
        return f"(({self.value_type(e.dtype)})({self.expr(e.value)}))"

    def e_Call(self, e: ir.Call) -> str:
        if e.name == "address_of":
            return self.address(e.args[0])
        if e.name in self.math_f32:
            table = self.math_f64 if e.dtype.name == "float64" else self.math_f32
            return f"{table[e.name]}({self.expr(e.args[0])})"
        if e.name == "abs":
            fn = "fabsf" if e.dtype.is_float else "abs"
            return f"{fn}({self.expr(e.args[0])})"
        library = MATH_CALLS.get(e.name)
        if library is not None:
            fn = c_function(library, e.args[0].dtype.bits)
            return f"{fn}({', '.join(self.expr(a) for a in e.args)})"
        if e.name.startswith("."):  # a method of its first argument
            target, *rest = e.args
            return f"{self.expr(target)}{e.name}({', '.join(self.expr(a) for a in rest)})"
        return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"

    # ---- buffers -----------------------------------------------------------------------------
    def offset(self, access) -> str:
        """The element offset of a flat access (``linearize_accesses``)."""
        if not access.flat:
            raise TypeError(f"{access.buffer.name}: a {access.buffer.scope} access the codegen phase left unflattened")
        return self.expr(access.indices[0])

    def element(self, access) -> str:
        """The element a ``BufferLoad`` or ``BufferStore`` names, as an lvalue."""
        return f"{self.buffer_name(access.buffer)}[{self.offset(access)}]"

    def load(self, load: ir.BufferLoad, element: str) -> str:
        """The value of a loaded element, as arithmetic uses it."""
        return element

    def address(self, load: ir.BufferLoad) -> str:
        if load.buffer.dtype.packed:  # two 4-bit elements a byte
            return f"({self.buffer_name(load.buffer)} + (({self.offset(load)}) >> 1))"
        return f"(&{self.element(load)})"

    def store_value(self, store: ir.BufferStore) -> str:
        """The right-hand side of a store: an element of the same type moves as it is."""
        value = store.value
        if isinstance(value, ir.BufferLoad) and value.buffer.dtype == store.buffer.dtype:
            return self.element(value)
        return self.expr(value)

    # ---- statements --------------------------------------------------------------------------
    def emit(self, depth: int, text: str):
        self.lines.append("  " * depth + text)

    def stmt(self, s, d: int):
        getattr(self, "s_" + type(s).__name__)(s, d)

    def s_SeqStmt(self, s, d):
        for x in s.stmts:
            self.stmt(x, d)

    def s_Comment(self, s, d):
        self.emit(d, f"// {s.text}")

    def loop_pragma(self, s: ir.For) -> str | None:
        """A line before the loop (an unroll hint), or None."""
        return None

    def s_For(self, s, d):
        var = self.declare(s.var)
        begin, end = self.expr(s.start), self.expr(s.form.end)
        pragma = self.loop_pragma(s)
        if s.form.at_least_once:
            self.emit(d, f"int {var} = {begin};  // at least one iteration: a do-while")
            if pragma:
                self.emit(d, pragma)
            self.emit(d, "do {")
            self.stmt(s.body, d + 1)
            self.emit(d, f"}} while (++{var} < {end});")
            return
        if pragma:
            self.emit(d, pragma)
        self.emit(d, f"for (int {var} = {begin}; {var} < {end}; ++{var}) {{")
        self.stmt(s.body, d + 1)
        self.emit(d, "}")

    def s_While(self, s, d):
        self.emit(d, f"while ({self.expr(s.cond)}) {{")
        self.stmt(s.body, d + 1)
        self.emit(d, "}")

    def s_IfThenElse(self, s, d):
        self.emit(d, f"if ({self.expr(s.cond)}) {{")
        self.stmt(s.then_body, d + 1)
        if s.else_body is not None:
            self.emit(d, "} else {")
            self.stmt(s.else_body, d + 1)
        self.emit(d, "}")

    def s_LetStmt(self, s, d):
        self.emit(d, f"{self.value_type(s.var.dtype)} {self.declare(s.var)} = {self.expr(s.value)};")

    def s_Assign(self, s, d):
        self.emit(d, f"{self.name(s.var)} = {self.expr(s.value)};")

    def s_BufferStore(self, s, d):
        self.emit(d, f"{self.element(s)} = {self.store_value(s)};")

    def s_Evaluate(self, s, d):
        self.emit(d, f"{self.expr(s.call)};")

    def s_BaseOffset(self, s, d):
        """A loop of result stores indexes from this base (``linearize_accesses``): a pointer into
        a global tensor, or an element offset into a shared tile."""
        name, offset = self.declare(s.target), self.expr(s.offset)
        if isinstance(s.target, ir.Buffer):
            self.emit(d, f"{s.buffer.dtype.cpp}* {name} = &{self.buffer_name(s.buffer)}[{offset}];")
        else:
            self.emit(d, f"const int {name} = {offset};")
