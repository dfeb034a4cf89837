"""A grammar of small kernels for the property-based test: random programs of the DSL, mostly
well formed (so that they reach the passes and the code generator) with mistakes mixed in (bad
sizes, dtypes, indices, operands, tile shapes), as source text.

``kernels()`` is a hypothesis strategy of ``Program`` records: the source and what went into it.
The generator keeps track of what is in scope (tensors, buffers with their shapes and scopes,
loop and block variables) and picks among them, so most statements make sense; with probability
one in thirteen a choice is drawn from values that are wrong for the place instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

DTYPES = ["float16", "bfloat16", "float32", "int32", "uint8", "float8_e4m3"]
BAD_DTYPES = ['"flaot16"', "None", "3"]
SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 96, 100, 1000]
BAD_SIZES = ["0", "-4", "2.5", '"n"', "None", "2**40"]
THREADS = [32, 64, 128, 256]
BAD_THREADS = ["0", "2048", "33.5", '"t"']


@dataclass
class Buf:
    name: str
    shape: tuple
    dtype: str
    scope: str  # global, shared, fragment, local


@dataclass
class Scope:
    buffers: list = field(default_factory=list)
    ints: list = field(default_factory=list)  # names of integer kernel values (block, loop vars)
    lines: list = field(default_factory=list)
    depth: int = 0
    counter: int = 0
    barriers: list = field(default_factory=list)

    def fresh(self, base):
        self.counter += 1
        return f"{base}{self.counter}"

    def emit(self, text):
        self.lines.append("    " * (self.depth + 2) + text)


@dataclass
class Program:
    source: str
    statements: int


# One draw in thirteen is a mistake (hypothesis draws the ends of a range often; the middle one of
# a sampled list is no likelier than the others).
_MISTAKES = [False] * 6 + [True] + [False] * 6


def _mistake(draw) -> bool:
    return draw(st.sampled_from(_MISTAKES))


def _size(draw) -> str:
    if _mistake(draw):
        return draw(st.sampled_from(BAD_SIZES))
    return str(draw(st.sampled_from(SIZES)))


def _dtype(draw):
    if _mistake(draw):
        return draw(st.sampled_from(BAD_DTYPES))
    return f'"{draw(st.sampled_from(DTYPES))}"'


def _int_expr(draw, scope: Scope, depth=0) -> str:
    """An integer expression over the kernel's integer values and constants."""
    choices = ["const"] + (["var"] * 3 if scope.ints else [])
    if depth < 2:
        choices += ["binop", "binop"]
    kind = draw(st.sampled_from(choices))
    if kind == "const":
        return str(draw(st.sampled_from([0, 1, 2, 3, 7, 16, 64, 127, -1, 2**31])))
    if kind == "var":
        return draw(st.sampled_from(scope.ints))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^"]))
    a, b = _int_expr(draw, scope, depth + 1), _int_expr(draw, scope, depth + 1)
    if op in ("<<", ">>"):
        b = str(draw(st.integers(0, 40)))
    return f"({a} {op} {b})"


def _value_expr(draw, scope: Scope, depth=0) -> str:
    """A numeric expression: loads, constants, integer values, math calls."""
    loads = [b for b in scope.buffers if b.scope in ("global", "shared", "local")]
    choices = ["float", "int"] + (["load"] * 2 if loads else [])
    if depth < 2:
        choices += ["binop", "call", "select"]
    if _mistake(draw):
        return draw(st.sampled_from(['"x"', "None", "[1]", "T.float32"] + [b.name for b in scope.buffers]))
    kind = draw(st.sampled_from(choices))
    if kind == "float":
        return repr(draw(st.sampled_from([0.0, 1.0, -2.5, 0.125, 1e3, 1e30, 70000.0])))
    if kind == "int":
        return _int_expr(draw, scope, depth + 1)
    if kind == "load":
        buf = draw(st.sampled_from(loads))
        return f"{buf.name}[{_indices(draw, scope, buf)}]"
    if kind == "call":
        fn = draw(st.sampled_from(["T.exp", "T.sqrt", "T.abs", "T.max", "T.min", "T.exp2", "T.cast", "T.erf",
                                   "T.round", "T.trunc", "T.tan", "T.pow", "T.fmod", "T.atan2", "T.fma",
                                   "T.isnan", "T.__exp"]))
        a = _value_expr(draw, scope, depth + 1)
        if fn in ("T.pow", "T.fmod", "T.atan2"):
            return f"{fn}({a}, {_value_expr(draw, scope, depth + 1)})"
        if fn == "T.fma":
            return f"T.fma({a}, {_value_expr(draw, scope, depth + 1)}, {_value_expr(draw, scope, depth + 1)})"
        if fn in ("T.max", "T.min"):
            return f"{fn}({a}, {_value_expr(draw, scope, depth + 1)})"
        if fn == "T.cast":
            return f"T.cast({a}, {_dtype(draw)})"
        return f"{fn}({a})"
    if kind == "select":
        return (f"T.if_then_else({_int_expr(draw, scope)} < {_int_expr(draw, scope)}, "
                f"{_value_expr(draw, scope, depth + 1)}, {_value_expr(draw, scope, depth + 1)})")
    op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%"]))
    return f"({_value_expr(draw, scope, depth + 1)} {op} {_value_expr(draw, scope, depth + 1)})"


def _indices(draw, scope: Scope, buf: Buf) -> str:
    parts = []
    for dim in buf.shape:
        kind = draw(st.sampled_from(["const", "expr", "mod"]))
        if kind == "const":
            parts.append(str(draw(st.integers(-1, dim if isinstance(dim, int) else 4))))
        elif kind == "mod" and isinstance(dim, int):
            parts.append(f"({_int_expr(draw, scope)}) % {dim}")
        else:
            parts.append(_int_expr(draw, scope))
    return ", ".join(parts)


def _region(draw, scope: Scope, buf: Buf) -> str:
    """The whole buffer, a slice of it, or a tile origin."""
    kind = draw(st.sampled_from(["whole", "whole", "slice", "origin"]))
    if kind == "whole":
        return buf.name
    if kind == "origin":
        return f"{buf.name}[{_indices(draw, scope, buf)}]"
    parts = []
    for dim in buf.shape:
        n = dim if isinstance(dim, int) else 4
        lo = draw(st.integers(0, max(n - 1, 0)))
        hi = draw(st.integers(lo + 1, n + 2))
        parts.append(f"{lo}:{hi}")
    return f"{buf.name}[{', '.join(parts)}]"


def _alloc(draw, scope: Scope):
    scope_name = draw(st.sampled_from(["shared", "shared", "fragment", "local"]))
    rank = draw(st.integers(1, 2))
    shape = tuple(draw(st.sampled_from([1, 4, 16, 32, 64, 128])) for _ in range(rank))
    dtype = draw(st.sampled_from(DTYPES))
    name = scope.fresh({"shared": "s", "fragment": "f", "local": "v"}[scope_name])
    text_shape = ", ".join(str(s) for s in shape)
    if _mistake(draw):
        text_shape = ", ".join([_size(draw)] * rank)
    scope.emit(f'{name} = T.alloc_{scope_name}(({text_shape},), "{dtype}")')
    scope.buffers.append(Buf(name, shape, dtype, scope_name))


def _statement(draw, scope: Scope):
    """One statement (a `pass` where the kind drawn has nothing in scope to work on)."""
    before = len(scope.lines)
    _any_statement(draw, scope)
    if len(scope.lines) == before:
        scope.emit("pass")


def _block(draw, scope: Scope, count: int):
    """``count`` statements one level in; what they declare goes out of scope after them."""
    names = (len(scope.buffers), len(scope.ints), len(scope.barriers))
    scope.depth += 1
    for _ in range(count):
        _statement(draw, scope)
    scope.depth -= 1
    del scope.buffers[names[0]:], scope.ints[names[1]:], scope.barriers[names[2]:]


def _any_statement(draw, scope: Scope):
    kinds = ["alloc", "store", "copy", "fill", "let", "temporary"]
    if scope.depth < 2:
        kinds += ["loop", "parallel", "if"]
    if any(b.scope == "fragment" for b in scope.buffers):
        kinds += ["gemm", "reduce"]
    if any(b.scope in ("fragment", "shared") for b in scope.buffers):
        kinds += ["scan"]
    kinds += ["barrier"]
    kind = draw(st.sampled_from(kinds))
    tiles = [b for b in scope.buffers]
    stores = [b for b in scope.buffers if b.scope in ("global", "shared", "local")]
    if kind == "alloc":
        _alloc(draw, scope)
    elif kind == "store" and stores:
        buf = draw(st.sampled_from(stores))
        scope.emit(f"{buf.name}[{_indices(draw, scope, buf)}] = {_value_expr(draw, scope)}")
    elif kind == "copy" and len(tiles) >= 2:
        a, b = draw(st.sampled_from(tiles)), draw(st.sampled_from(tiles))
        extra = draw(st.sampled_from(["", "", ', prefer_instruction="tma"', ', prefer_instruction="cp_async"']))
        scope.emit(f"T.copy({_region(draw, scope, a)}, {_region(draw, scope, b)}{extra})")
    elif kind == "fill" and tiles:
        buf = draw(st.sampled_from(tiles))
        fn = draw(st.sampled_from(["fill", "clear"]))
        if fn == "clear":
            scope.emit(f"T.clear({_region(draw, scope, buf)})")
        else:
            scope.emit(f"T.fill({_region(draw, scope, buf)}, {_value_expr(draw, scope)})")
    elif kind == "temporary" and stores:
        # a thread array of its own, written and read back at one element in each iteration of a
        # loop, as kernels keep per-iteration values (scalarize_loop_temporaries makes it a scalar)
        name, var = scope.fresh("t"), scope.fresh("i")
        dtype = draw(st.sampled_from(DTYPES))
        size = draw(st.sampled_from([1, 4, 8]))
        target = draw(st.sampled_from(stores))
        scope.emit(f'{name} = T.alloc_local(({size},), "{dtype}")')
        scope.emit(f"for {var} in T.serial({draw(st.integers(0, 8))}):")
        scope.ints.append(var)
        scope.depth += 1
        at = draw(st.sampled_from([var, f"{var} % {size}", f"({var} + 1) % {size}", "0"]))
        scope.emit(f"{name}[{at}] = {_value_expr(draw, scope)}")
        if draw(st.booleans()):
            scope.emit(f"{name}[{at}] = {name}[{at}] * 2")
        scope.emit(f"{target.name}[{_indices(draw, scope, target)}] = {name}[{at}] + {_value_expr(draw, scope)}")
        scope.depth -= 1
        scope.ints.remove(var)
    elif kind == "let":
        name = scope.fresh("x")
        scope.emit(f"{name} = {_int_expr(draw, scope)}")
        scope.ints.append(name)
    elif kind in ("loop", "parallel"):
        var = scope.fresh("i")
        if kind == "parallel":
            frags = [b for b in scope.buffers if b.scope == "fragment"]
            if frags and draw(st.booleans()):
                frag = draw(st.sampled_from(frags))
                names = [scope.fresh("p") for _ in frag.shape]
                scope.emit(f"for {', '.join(names)} in T.Parallel({', '.join(map(str, frag.shape))}):")
                scope.depth += 1
                scope.emit(f"{frag.name}[{', '.join(names)}] = {frag.name}[{', '.join(names)}] * 2.0")
                scope.depth -= 1
                return
            header = f"for {var} in T.Parallel({_size(draw)}):"
        else:
            loop = draw(st.sampled_from(["T.serial", "T.unroll", "range", "T.Pipelined"]))
            extent = _size(draw) if _mistake(draw) else str(draw(st.integers(0, 8)))
            stages = f", num_stages={draw(st.integers(0, 3))}" if loop == "T.Pipelined" else ""
            header = f"for {var} in {loop}({extent}{stages}):"
        scope.emit(header)
        scope.ints.append(var)
        _block(draw, scope, draw(st.integers(1, 2)))
        scope.ints.remove(var)
    elif kind == "if":
        scope.emit(f"if {_int_expr(draw, scope)} < {_int_expr(draw, scope)}:")
        _block(draw, scope, 1)
    elif kind == "gemm":
        frag = draw(st.sampled_from([b for b in scope.buffers if b.scope == "fragment"]))
        m, n = (frag.shape + (16,))[:2]
        k = draw(st.sampled_from([16, 32, 64]))
        dt = draw(st.sampled_from(["float16", "bfloat16", "float32"]))
        a, b = scope.fresh("ga"), scope.fresh("gb")
        scope.emit(f'{a} = T.alloc_shared(({m}, {k}), "{dt}")')
        scope.emit(f'{b} = T.alloc_shared(({k}, {n}), "{dt}")')
        trans = draw(st.sampled_from(["", ", transpose_B=False"]))
        scope.emit(f"T.gemm({a}, {b}, {frag.name}{trans})")
    elif kind == "reduce":
        frag = draw(st.sampled_from([b for b in scope.buffers if b.scope in ("fragment", "shared")]))
        out = scope.fresh("r")
        rest = frag.shape[:-1] or (1,)
        alloc = draw(st.sampled_from(["T.alloc_fragment", "T.alloc_shared"]))  # a result other threads read
        scope.emit(f'{out} = {alloc}(({", ".join(map(str, rest))},), "{frag.dtype}")')
        fn = draw(st.sampled_from(["sum", "max", "min", "absmax"]))
        scope.emit(f"T.reduce_{fn}({frag.name}, {out}, dim={draw(st.sampled_from([-1, 0, 1, 2]))})")
        scope.buffers.append(Buf(out, tuple(rest), frag.dtype, alloc.split("_")[-1]))  # later statements read it
    elif kind == "scan":
        buf = draw(st.sampled_from([b for b in scope.buffers if b.scope in ("fragment", "shared")]))
        fn = draw(st.sampled_from(["cumsum", "cummax"]))
        into = ""
        if draw(st.booleans()):
            into = scope.fresh("c")
            alloc = draw(st.sampled_from(["T.alloc_fragment", "T.alloc_shared"]))  # either into either
            scope.emit(f'{into} = {alloc}(({", ".join(map(str, buf.shape))},), "{buf.dtype}")')
            scope.buffers.append(Buf(into, tuple(buf.shape), buf.dtype, alloc.split("_")[-1]))  # read later
            into = f", {into}"
        dim = draw(st.sampled_from([0, -1, len(buf.shape) - 1, 3]))
        scope.emit(f"T.{fn}({buf.name}{into}, dim={dim}, reverse={draw(st.booleans())})")
    elif kind == "barrier":
        if not scope.barriers or draw(st.booleans()):
            name = scope.fresh("mb")
            scope.emit(f"{name} = T.alloc_barrier({draw(st.sampled_from(['128', '[128, 128]', '32', '0']))})")
            scope.barriers.append(name)
            return
        bar = draw(st.sampled_from(scope.barriers))
        shared = [b for b in scope.buffers if b.scope == "shared"]
        op = draw(st.sampled_from(["arrive", "wait", "tma"] if shared else ["arrive", "wait"]))
        if op == "arrive":
            scope.emit(f"T.barrier_arrive({bar})")
        elif op == "wait":
            scope.emit(f"T.barrier_wait({bar}, {draw(st.sampled_from(['0', '1', 'bx % 2']))})")
        else:
            tensor = draw(st.sampled_from([b for b in scope.buffers if b.scope == "global"]))
            scope.emit(f"T.tma_copy({_region(draw, scope, tensor)}, {draw(st.sampled_from(shared)).name}, "
                       f"barrier={bar})")


@st.composite
def kernels(draw) -> Program:
    scope = Scope()
    params = []
    for i in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(1, 2))
        shape = tuple(draw(st.sampled_from(SIZES)) for _ in range(rank))
        dtype = draw(st.sampled_from(DTYPES))
        text = ", ".join(str(s) for s in shape)
        dtype_text = f'"{dtype}"'
        if _mistake(draw):
            text = ", ".join([_size(draw)] * rank)
        if _mistake(draw):
            dtype_text = _dtype(draw)
        params.append(f"T{i}: T.Tensor(({text},), {dtype_text})")
        scope.buffers.append(Buf(f"T{i}", shape, dtype, "global"))
    if draw(st.booleans()):
        params.append("n: T.int32")
    grid_dims = draw(st.integers(1, 2))
    grid = [str(draw(st.sampled_from([1, 2, 4, 8]))) if not _mistake(draw) else _size(draw) for _ in range(grid_dims)]
    threads = str(draw(st.sampled_from(THREADS))) if not _mistake(draw) else draw(st.sampled_from(BAD_THREADS))
    block_vars = ["bx", "by"][:grid_dims]
    scope.ints.extend(block_vars)
    count = draw(st.integers(1, 6))
    for _ in range(count):
        _statement(draw, scope)
    head = (f"@T.prim_func\ndef main({', '.join(params)}):\n"
            f"    with T.Kernel({', '.join(grid)}, threads={threads}) as ({', '.join(block_vars)},):\n")
    return Program(head + "\n".join(scope.lines) + "\n", count)
