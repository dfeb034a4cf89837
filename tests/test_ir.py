"""The IR's printer and simplifier."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tileworkbench.ir import nodes as ir
from tileworkbench.ir.printer import expr_text
from tileworkbench.ir.simplify import simplify

k, t = ir.Var("k"), ir.Var("tx")


def test_affine_terms_collect():
    assert expr_text(simplify(k * 4 + 3 - k * 4 + t * 2 - t)) == "tx + 3"


def test_floordiv_and_mod_use_ranges():
    ranges = {t: (0, 31)}
    assert expr_text(simplify((k * 32 + t) // 32, ranges)) == "k"
    assert expr_text(simplify((k * 32 + t) % 32, ranges)) == "tx"
    assert expr_text(simplify((k * 64 + t) // 32, ranges)) == "k * 2"


def test_comparisons_decided_by_ranges_fold():
    ranges = {t: (0, 127), k: (0, 7)}
    assert simplify(ir.cmp("<", k * 128 + t, 1024), ranges).value is True
    assert not isinstance(simplify(ir.cmp("<", k * 128 + t, 1000), ranges), ir.Const)


def _evaluate(e, env):
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Var):
        return env[e]
    a, b = _evaluate(e.a, env), _evaluate(e.b, env)
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b if b else 0,
            "%": lambda: a % b if b else 0, "<<": lambda: a << b, ">>": lambda: a >> b, "&": lambda: a & b,
            "|": lambda: a | b, "^": lambda: a ^ b}[e.op]()


_ops = st.sampled_from(["+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^"])


@st.composite
def exprs(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([k, t, ir.const(draw(st.integers(0, 64)))]))
    op = draw(_ops)
    a = draw(exprs(depth=depth - 1))
    if op in ("//", "%"):
        b = ir.const(draw(st.integers(1, 16)))
    elif op in ("<<", ">>"):
        b = ir.const(draw(st.integers(0, 8)))  # shifts by constants (a thread index's bits)
    else:
        b = draw(exprs(depth=depth - 1))
    return ir.binop(op, a, b)


@settings(max_examples=300, deadline=None)
@given(exprs(), st.integers(0, 100), st.integers(0, 31))
def test_simplify_preserves_value(e, kv, tv):
    env = {k: kv, t: tv}
    assert _evaluate(simplify(e, {t: (0, 31), k: (0, 100)}), env) == _evaluate(e, env)


def test_a_mod_of_a_multiple_is_a_multiple_below_the_divisor():
    from tileworkbench.ir.simplify import interval

    ranges = {t: (0, 1023)}
    assert interval((t * 4) % 128, ranges) == (0, 124)
    assert interval((t * 6 + 2) % 128, ranges) == (0, 126)  # even: at most 126
    assert interval((t * 3) % 128, ranges) == (0, 127)  # nothing shared with 128
    assert simplify(ir.cmp("<", (t * 4) % 128 + k % 4, 128), ranges).value is True


@settings(max_examples=300, deadline=None)
@given(exprs(), st.integers(-100, 100), st.integers(0, 31))
def test_intervals_hold_every_value(e, kv, tv):
    from tileworkbench.ir.simplify import interval

    lo, hi = interval(e, {t: (0, 31), k: (-100, 100)})
    value = _evaluate(e, {k: kv, t: tv})
    assert (lo is None or lo <= value) and (hi is None or value <= hi)


def test_a_loop_from_a_block_index_to_a_constant_end_ranges_over_what_it_can_reach():
    """A causal loop ``for i in range(by, 16)`` is For(start=by, extent=16 - by): its variable
    stays within 0..15 for every block, though neither its start nor its extent is constant."""
    from tileworkbench.ir.simplify import loop_range

    by, i = ir.Var("by"), ir.Var("i")
    body = ir.Evaluate(ir.Call("noop", (), ir.dtypes.int32))
    causal = ir.For(i, 16 - by, body, start=by)
    assert loop_range(causal, {by: (0, 15)}) == (0, 15)
    assert simplify(ir.cmp("<", i * 64 + t, 1024), {by: (0, 15), t: (0, 63), i: loop_range(causal, {by: (0, 15)})}).value
    unknown_end = ir.For(i, k - by, body, start=by)
    assert loop_range(unknown_end, {by: (0, 15)}) == (0, None)


@settings(max_examples=300, deadline=None)
@given(st.integers(-3, 3), st.integers(-20, 20), st.integers(-20, 40), st.integers(-3, 3), st.integers(0, 15))
def test_a_loops_range_holds_every_value_it_takes(a, b, c, d, block):
    """``for i in range(a*by + b, (a*by + b) + (c - d*by))``: for every block ``by`` in 0..15 whose loop
    runs at all, each ``i`` it takes lies inside ``loop_range``; bounds checks are dropped on it."""
    from tileworkbench.ir.simplify import loop_range

    by, i = ir.Var("by"), ir.Var("i")
    start, extent = by * a + b, ir.const(c) - by * d
    loop = ir.For(i, extent, ir.Evaluate(ir.Call("noop", (), ir.dtypes.int32)), start=start)
    lo, hi = loop_range(loop, {by: (0, 15)})
    first, count = a * block + b, c - d * block
    for value in range(first, first + max(count, 0)):
        assert (lo is None or lo <= value) and (hi is None or value <= hi)


def test_buffers_written_names_every_kind_of_write():
    """Stores and the destinations of tile copies, a thread's own cp.async, fills, gemms, reductions
    and scans; a buffer only read is not written."""
    import tileworkbench.language as T
    from tileworkbench.ir.visitor import buffers_written

    @T.prim_func
    def main(A: T.Tensor((1024,), "float16"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((1024,), "float16")
            g = T.alloc_shared((1024,), "float16")
            f = T.alloc_fragment((128,), "float32")
            c = T.alloc_fragment((128,), "float32")
            bar = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            T.ptx_cp_async(T.access_ptr(g[tx * 8], "w", 8), T.access_ptr(A[tx * 8], "r", 8), 8)
            T.cp_async_barrier_noinc(bar)
            T.barrier_wait(bar, 0)
            T.copy(g, s)
            T.fill(f, 0)
            T.cumsum(f, c, dim=0)
            B[tx] = c[tx] + T.cast(s[tx], "float32")

    names = [b.name for b in buffers_written(main.body)]
    assert {"g", "s", "f", "c", "B"} <= set(names) and "A" not in names


def test_a_condition_bounds_the_one_name_it_compares_from_either_side():
    from tileworkbench.ir.simplify import narrowed_ranges

    bx = ir.Var("bx")
    assert narrowed_ranges({k: (0, 7)}, ir.cmp("<", k + 1, 8)) == {k: (0, 6)}  # the pipeline's issue-ahead guard
    assert narrowed_ranges({bx: (0, 1)}, ir.cmp("<", bx, bx + bx)) == {bx: (1, 1)}  # bx >= 1
    assert narrowed_ranges({k: (0, None)}, ir.cmp(">=", k * 2, 5)) == {k: (3, None)}
    assert narrowed_ranges({k: (0, 9)}, ir.cmp(">", 3, k)) == {k: (0, 2)}
    assert narrowed_ranges({k: (0, 9)}, ir.cmp("<", k * k, 4)) == {k: (0, 9)}  # not one name linearly: as it was
    assert narrowed_ranges({k: (0, 9)}, ir.cmp("<", k, 0)) == {k: (0, 9)}  # never holds: not narrowed to nothing


@settings(max_examples=300, deadline=None)
@given(st.integers(-4, 4), st.integers(-20, 20), st.sampled_from(["<", "<=", ">", ">="]), st.integers(-10, 10))
def test_narrowed_ranges_keep_every_value_the_condition_lets_through(coef, const, op, value):
    from tileworkbench.ir.simplify import narrowed_ranges

    cond = ir.cmp(op, k * coef + const, ir.const(0))
    holds = {"<": value * coef + const < 0, "<=": value * coef + const <= 0,
             ">": value * coef + const > 0, ">=": value * coef + const >= 0}[op]
    lo, hi = narrowed_ranges({k: (-10, 10)}, cond)[k]
    if holds:
        assert lo <= value <= hi
