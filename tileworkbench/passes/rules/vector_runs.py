"""How ``partition_parallel_loops`` spreads an element-wise ``T.Parallel`` nest that touches no
fragment over the threads in runs of neighbours, moving each run with one vector access.

It applies to a nest whose body is one store, ``dst[...] = value``, where the store or a load in
``value`` is *movable*: a global tensor the launcher checks (a kernel parameter or a view of one)
or a shared tile not laid out in panels, of a dtype of at least one byte, whose element offset
steps by one with the innermost loop variable and is otherwise a multiple of the run. A run is
``16 // widest`` neighbours (the widest element among the movable accesses: 8 halves or 4 floats;
a shared tile in 128-byte panels where a run lies inside one);
the innermost extent must be a whole number of runs. Each thread then takes runs
``it * threads + tid`` in turn (TileLang's vectorised element-wise loops, Q scaled into its shared
tile in chunked retention): every movable load comes into a ``local`` array with one
``tw::copy_vec`` (16 bytes or fewer), the value is computed element by element from those arrays
(every other load read as before, at its own element), and a movable store leaves with one
``tw::copy_vec``. A swizzled tile keeps a run contiguous: runs are at most 16 bytes and start at a
multiple of their size, and the swizzles permute whole 16-byte units. Loads under a select (the
bounds checks of ``guard_global_accesses``, a ``T.if_then_else``) are never moved ahead of their
condition: where the condition is the same for a run's elements (a row's bounds, the sparse MLA's
gathered rows of KV), the run moves under it, its elements read from the run only where it holds;
a store that only copies such a load (zero where the guard fails) moves whole, with one
``tw::copy_vec`` where the guard holds and one ``tw::zero_vec`` where it fails. Anything else is left to the element-by-element split (correct, only slower).

A nest whose body is one float32 ``T.atomic_add`` into a tensor the launcher checks (under an ``if``
the run's variable does not enter, at most), stepping by one along the innermost variable in
whole runs of four, adds each run with one ``tw::atomic_add_x4`` (``_atomic_runs``).

A nest a software pipeline issues ahead (``ir.ASYNC_COPY``: ``async_copy=True``) whose store only
copies the moved load (or zero where its run-invariant guard fails) into a shared tile moves each
run with one ``tw::cp_async`` (4, 8 or 16 bytes; the guard's zero fill is ``cp.async``'s own): the
pipeline's ``cp.async`` waits order it. Any other such nest moves as above.
"""

from __future__ import annotations

import math

from ...ir import nodes as ir
from ...ir.layout import unravel
from ...ir.printer import expr_text
from ...ir.simplify import simplify
from ...ir.visitor import IRMutator, IRVisitor, always_evaluated, substitute, uses_var
from .calls import address_of, call, needs_alignment
from .fragment_runs import CHUNK_BYTES, steps_by_one


class _Loads(IRVisitor):
    """The loads of ``value`` that may move ahead of its element loop (``found``): those it always
    evaluates, and those it evaluates only where a condition holds that is the same for every
    element of a run (``conditions``: id of the load -> that condition), on the taken side of a
    select whose condition does not use the run's variable ``last`` (a bounds check of a row,
    ``guard_global_accesses``'). None inside an address or under any other select."""

    def __init__(self, last: ir.Var):
        self.last, self.condition = last, None
        self.found: list = []
        self.conditions: dict = {}

    def visit_Select(self, node):
        self.visit(node.cond)  # its branches run only when chosen
        if self.condition is None and not uses_var(node.cond, self.last):
            self.condition = node.cond
            self.visit(node.a)
            self.condition = None

    def visit_Call(self, node):
        if node.name in ("address_of", "if_then_else"):
            return
        self.generic_visit(node)

    def visit_BufferLoad(self, node):
        self.found.append(node)
        if self.condition is not None:
            self.conditions[id(node)] = self.condition
        self.generic_visit(node)


class _FromRuns(IRMutator):
    def __init__(self, temps: dict, k: ir.Var):
        self.temps, self.k = temps, k

    def visit_BufferLoad(self, node):
        tmp = self.temps.get(id(node))
        if tmp is not None:
            return ir.BufferLoad(tmp, (self.k,), node.dtype)
        return self.generic_visit(node)


def launcher_checked(func: ir.PrimFunc) -> set:
    """The tensors whose alignment the launcher can check: the kernel's tensor parameters."""
    return {p for p in func.params if isinstance(p, ir.Buffer)}


def alignment_checked(tensor: ir.Buffer, checked: set) -> bool:
    """A global tensor the launcher checks (``launcher_checked``), or a view of one; a pointer the
    kernel loads itself has no such check, so nothing may assume its alignment."""
    return tensor in checked or tensor.attrs.get("view_of") in checked


def _movable(access, checked: set) -> bool:
    buf = access.buffer
    if buf.dtype.packed or buf.dtype.storage_bits < 8:
        return False
    if buf.scope == "global":
        return alignment_checked(buf, checked)
    return buf.scope == "shared"  # panels too, where a run lies in one (vector_runs)


def _is_zero(e) -> bool:
    """A constant whose bits are all zero (``cp.async``'s fill and ``tw::zero_vec``'s): not -0.0."""
    while isinstance(e, ir.Cast):
        e = e.value
    return (isinstance(e, ir.Const) and not isinstance(e.value, bool) and e.value == 0
            and math.copysign(1.0, e.value) > 0)


def _guarded_load(e) -> ir.BufferLoad | None:
    """The load ``e`` is: a scalar load, or one under its bounds check (``guard_global_accesses``'
    ``cond ? load : c``); None for anything else."""
    if isinstance(e, ir.Select):
        for load, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(load, ir.BufferLoad) and isinstance(other, ir.Const):
                return load
        return None
    return e if isinstance(e, ir.BufferLoad) else None


def _always_read_loads(cond: ir.Expr) -> list:
    """The (guarded) loads ``cond`` reads whenever it is evaluated (``ir.visitor.always_evaluated``)."""
    return [e for e in always_evaluated(cond) if _guarded_load(e) is not None]


class _ReadOnce(IRMutator):
    """Each (guarded) load whose text is bound to a name replaced by that name."""

    def __init__(self, names: dict):
        self.names = names

    def visit(self, node):
        if isinstance(node, (ir.BufferLoad, ir.Select)):
            name = self.names.get(_load_key(node))
            if name is not None:
                return name
        return super().visit(node)


def _load_key(e: ir.Expr) -> str:
    """What identifies a load across the check and the addresses: its simplified text (a run's
    addresses are simplified, ``Idx[k * 64 + i + 64]``, the check is as written, ``Idx[(k + 1) * 64 + i]``)."""
    return expr_text(simplify(e))


def _read_once(condition: ir.Expr | None, exprs: list, loc) -> tuple:
    """``(lets, condition, exprs)``: a run's check and the addresses it guards read the same index
    several times (a gathered row's ``bos + Indices[...]``, bounds-checked itself, once per side of
    the row's bounds check and again in the row's address). Each such load a conjunct of the check
    always reads is read once into a name before the check (under the conjuncts before it, which
    C++ tests first: ``pre ? load : 0``), so the run waits for one index load, not three in a row,
    each behind a branch of its own (the sparse MLA backward's gathers, as NVCC compiled them).
    No check (None): nothing to name."""
    if condition is None:
        return [], None, exprs
    parts = ir.conjuncts(condition)
    texts = [_load_key(e) for e in parts + list(exprs)]
    names, lets = {}, []  # text -> (name, the first conjunct it stands in)

    def known_by(k: int) -> dict:
        return {text: var for text, (var, first) in names.items() if first <= k}

    for j, part in enumerate(parts):
        for text, load in sorted(((_load_key(e), e) for e in _always_read_loads(part)), key=lambda p: len(p[0])):
            if text in names or load.dtype.is_float or sum(t.count(text) for t in texts[j:]) < 2:
                continue
            value = _ReadOnce(known_by(j)).visit(load)  # an index read inside it is named already
            if j:
                value = ir.Select(ir.logical_and(*parts[:j]), value, ir.zero(load.dtype), load.dtype)
            var = ir.Var(f"{_guarded_load(load).buffer.name}_at", load.dtype)
            lets.append(ir.LetStmt(var, value, loc=loc))
            names[text] = (var, j)
    if not names:
        return [], condition, exprs
    condition = ir.logical_and(*[_ReadOnce(known_by(k)).visit(part) for k, part in enumerate(parts)])
    rename = _ReadOnce(known_by(len(parts)))
    return lets, condition, [rename.visit(e) for e in exprs]


def _copied_load(body: ir.BufferStore, finder: _Loads, accesses: list):
    """``(load, condition)`` where the store only copies ``load`` (of the store's dtype, or zero where
    ``condition`` fails: a bounds check), both moving in runs; else None."""
    value, condition = body.value, None
    if isinstance(value, ir.Select) and _is_zero(value.b):
        value, condition = value.a, value.cond
    if not isinstance(value, ir.BufferLoad) or value.dtype != body.buffer.dtype or \
            finder.conditions.get(id(value)) is not condition:
        return None
    if not any(a is body for a in accesses) or not any(a is value for a in accesses):
        return None
    return value, condition


def _atomic_add(body, last: ir.Var, checked: set):
    """``(guard, target, value)`` of a nest body that is one float32 ``T.atomic_add`` into a tensor
    the launcher checks, maybe under an ``if`` the run's variable ``last`` does not enter (a row's
    bounds check, ``guard_global_accesses``'); None for any other body."""
    guard = None
    if isinstance(body, ir.IfThenElse) and body.else_body is None and not uses_var(body.cond, last):
        guard, body = body.cond, body.then_body
    call = body.call if isinstance(body, ir.Evaluate) else None
    if not (isinstance(call, ir.Call) and call.name == ir.ATOMIC_ADD):
        return None
    target = call.args[0].args[0]
    buf = target.buffer
    if buf.scope != "global" or buf.dtype.name != "float32" or not alignment_checked(buf, checked):
        return None
    return guard, target, call.args[1]


def vector_runs(loop_vars, extents, body, threads: int, tid, checked: set, loc=None,
                async_copy: bool = False) -> ir.For | None:
    """The nest as runs of vector moves (module doc), or None where it is not such a nest."""
    atomic = _atomic_add(body, loop_vars[-1], checked)
    if atomic is not None:
        return _atomic_runs(loop_vars, extents, *atomic, threads, tid, checked, loc)
    if not isinstance(body, ir.BufferStore):
        return None
    last = loop_vars[-1]
    finder = _Loads(last)
    finder.visit(body.value)
    accesses = [a for a in [body, *finder.found] if _movable(a, checked)]
    while accesses:  # the run of the widest access that can move; those that cannot drop out
        run = CHUNK_BYTES // max(a.buffer.dtype.storage_bits // 8 for a in accesses)
        kept = [a for a in accesses if steps_by_one(a.buffer, a.indices, last, run)
                and a.buffer.attrs.get("panel", 0) % run == 0]  # a run inside one 128-byte panel
        if len(kept) == len(accesses):
            break
        accesses = kept
    if not accesses or run < 2 or extents[-1] % run:
        return None

    def chunk(access) -> int:
        return run * (access.buffer.dtype.storage_bits // 8)

    def one_run(first, run_address) -> list:
        copied = _copied_load(body, finder, accesses)
        if copied is not None and async_copy and body.buffer.scope == "shared" and chunk(body) in (4, 8, 16):
            load, condition = copied  # one cp.async, zero-filled where the guard fails
            lets, condition, (source,) = _read_once(condition, [run_address(load)], loc)
            return lets + [call(f"tw::cp_async<{chunk(body)}>", run_address(body), source,
                                ir.const(True) if condition is None else condition)]
        if copied is not None and copied[1] is not None:
            # A guarded copy (a gathered row of the sparse MLA's KV): the whole run moves where its
            # guard holds and is zeroed where it fails, as TileLang moves it; through a local array
            # and a choice per element it cost a select and its predicate logic for every element.
            load, condition = copied
            lets, condition, (source,) = _read_once(condition, [run_address(load)], loc)
            return lets + [ir.IfThenElse(condition, call(f"tw::copy_vec<{chunk(body)}>", run_address(body), source),
                                         call(f"tw::zero_vec<{chunk(body)}>", run_address(body)))]
        return _moved_run(body, accesses, finder, run, last, first, run_address, chunk, loc)

    for a in accesses:
        if a.buffer.scope == "global":
            needs_alignment(a.buffer, chunk(a))
    return _runs_of_threads(loop_vars, extents, run, threads, tid, one_run, loc)


def _runs_of_threads(loop_vars, extents, run: int, threads: int, tid, one_run, loc) -> ir.For:
    """The nest as runs of ``run`` neighbours along its innermost variable, thread ``tid`` taking
    runs ``it * threads + tid`` in turn: ``one_run(first, run_address)`` gives a run's statements,
    ``first`` the innermost variable's value at the run's start and ``run_address(access)`` the
    address of ``access`` there (the other variables are bound to the run's place)."""
    last = loop_vars[-1]
    total = 1
    for e in extents:
        total *= e
    runs = total // run
    it, flat, first = ir.Var("it"), ir.Var("flat"), ir.Var(f"{last.name}0")
    iters = -(-runs // threads)
    start = thread_share(it, iters, tid, threads, run, extents)
    at_run = {last: first}

    def run_address(access):
        return address_of(access.buffer, tuple(simplify(substitute(i, at_run)) for i in access.indices))

    lets = [ir.LetStmt(v, e) for v, e in zip(loop_vars[:-1], start[:-1])] + [ir.LetStmt(first, start[-1])]
    inner = ir.seq(lets + one_run(first, run_address))
    if runs % threads:
        inner = ir.seq([ir.LetStmt(flat, (it * threads + tid) * run), ir.IfThenElse(ir.cmp("<", flat, total), inner)])
    return ir.For(it, ir.const(iters), inner, "unrolled" if iters <= 32 else "serial", loc=loc)


def thread_share(it: ir.Var, iters: int, tid: ir.Var, threads: int, run: int, extents) -> tuple:
    """The nest's indices where thread ``tid`` starts its ``it``-th share, ``flat = (it * threads +
    tid) * run`` unravelled over ``extents``, each simplified knowing ``0 <= it < iters`` and ``0 <=
    tid < threads``: ``(it * 1024 + tid * 8) // 512`` is ``it * 2 + tid * 8 // 512``, so the unrolled
    shares of a thread differ by constants (NVVM folds them into the addresses' immediates; as one
    division of a sum it computes each share's quotient anew: the fine-tuning sparse MLA forward's
    gathers, 1759 -> 1595 SASS instructions a main-loop iteration)."""
    ranges = {it: (0, iters - 1), tid: (0, threads - 1)}
    return tuple(simplify(i, ranges) for i in unravel((it * threads + tid) * run, tuple(extents)))


ATOMIC_RUN = 4  # float32 neighbours one vector atomic adds (16 bytes: sm_90's float4 atomicAdd)


def _atomic_runs(loop_vars, extents, guard, target, value, threads, tid, checked, loc) -> ir.For | None:
    """A nest of float32 ``T.atomic_add``s into neighbouring elements as runs of four, each added
    with one ``tw::atomic_add_x4`` (TileLang vectorises such adds too: DeepSeek's sparse MLA
    backward's dKV, four times fewer L2 atomics): each thread takes runs ``it * threads + tid``,
    its movable loads come in with one vector copy, the four values are computed element by
    element and added together. Where the target does not step by one along the innermost
    variable in whole runs, None (element atomics, as before)."""
    last = loop_vars[-1]
    if extents[-1] % ATOMIC_RUN or not steps_by_one(target.buffer, target.indices, last, ATOMIC_RUN):
        return None
    finder = _Loads(last)
    finder.visit(value)
    loads = [a for a in finder.found if _movable(a, checked) and a.buffer.attrs.get("panel", 0) % ATOMIC_RUN == 0
             and steps_by_one(a.buffer, a.indices, last, ATOMIC_RUN) and a.buffer.dtype.storage_bits == 32]
    for load in loads:
        if load.buffer.scope == "global":
            needs_alignment(load.buffer, 16)
    needs_alignment(target.buffer, 4 * ATOMIC_RUN)

    def one_run(first, run_address) -> list:
        k = ir.Var("k")
        stmts, temps = _loads_into_runs(loads, finder, ATOMIC_RUN, run_address, lambda load: 16, loc)
        sums = ir.Buffer(f"{target.buffer.name}_adds", (ir.const(ATOMIC_RUN),), ir.dtypes.float32, "local", loc=loc)
        compute = ir.For(k, ir.const(ATOMIC_RUN), ir.seq([ir.LetStmt(last, first + k),
                                                        ir.BufferStore(sums, (k,), _FromRuns(temps, k).visit(value))]),
                         "unrolled", loc=loc)
        lets, checked_guard, (address,) = _read_once(guard, [run_address(target)], loc)
        add = call(ir.ATOMIC_ADD_VECTORS[ATOMIC_RUN], address,
                   *[ir.BufferLoad(sums, (ir.const(j),), ir.dtypes.float32) for j in range(ATOMIC_RUN)],
                   dtype=ir.dtypes.float32)
        run = ir.seq(stmts + [ir.Allocate(sums), compute, add])
        return [run] if guard is None else lets + [ir.IfThenElse(checked_guard, run)]

    return _runs_of_threads(loop_vars, extents, ATOMIC_RUN, threads, tid, one_run, loc)


def _loads_into_runs(loads: list, finder: _Loads, run: int, run_address, chunk, loc) -> tuple:
    """``(statements, arrays)``: each of ``loads`` into a local array of ``run`` elements with one
    vector copy (under its guard where it has one), one array per distinct element read
    (``s[i, j] * s[i, j]`` reads it once); ``arrays`` maps each load's id to its array."""
    stmts, temps, seen = [], {}, {}
    for load in loads:
        condition = finder.conditions.get(id(load))
        key = (id(load.buffer), expr_text(load), None if condition is None else expr_text(condition))
        if key not in seen:
            tmp = ir.Buffer(f"{load.buffer.name}_run{len(seen)}", (ir.const(run),), load.dtype, "local",
                            attrs={"align_bytes": chunk(load)}, loc=loc)
            move = call(f"tw::copy_vec<{chunk(load)}>", address_of(tmp, (ir.const(0),)), run_address(load))
            # a guarded load moves where its condition holds (the run's elements are read only then)
            stmts += [ir.Allocate(tmp), move if condition is None else ir.IfThenElse(condition, move)]
            seen[key] = tmp
        temps[id(load)] = seen[key]
    return stmts, temps


def _moved_run(body: ir.BufferStore, accesses: list, finder: _Loads, run: int, last: ir.Var, first: ir.Var,
               run_address, chunk, loc) -> list:
    """One run's statements: each movable load into a local array with one vector copy (under its
    guard where it has one), the value computed element by element (``last`` = ``first + k``), and
    the store out with one vector copy where it moves, else element by element."""
    k = ir.Var("k")
    stmts, temps = _loads_into_runs([a for a in accesses if isinstance(a, ir.BufferLoad)], finder, run, run_address,
                                    chunk, loc)
    value = _FromRuns(temps, k).visit(body.value)
    element = ir.LetStmt(last, first + k)
    if any(a is body for a in accesses):
        out = ir.Buffer(f"{body.buffer.name}_run", (ir.const(run),), body.buffer.dtype, "local",
                        attrs={"align_bytes": chunk(body)}, loc=loc)
        compute = ir.For(k, ir.const(run), ir.seq([element, ir.BufferStore(out, (k,), value)]), "unrolled", loc=loc)
        return stmts + [ir.Allocate(out), compute,
                        call(f"tw::copy_vec<{chunk(body)}>", run_address(body), address_of(out, (ir.const(0),)))]
    store = ir.BufferStore(body.buffer, body.indices, value, loc=body.loc)
    return stmts + [ir.For(k, ir.const(run), ir.seq([element, store]), "unrolled", loc=loc)]
