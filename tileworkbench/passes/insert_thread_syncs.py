"""insert_thread_syncs: block barriers (``__syncthreads``) between threads' shared-memory accesses.

Expects: tile-level IR (copies, gemms and user stores not yet lowered to threads).
Guarantees: a ``T.sync_threads()`` stands between
  * a thread write of a shared buffer (copy, fill, store) and any later read of it (RAW),
  * a read of a shared buffer and a later write of it by threads or by a TMA load (WAR),
including across iterations of serial and pipelined loops and of ``while`` loops (whose body
needing a barrier is a ``CompileError`` when the loop's condition may differ between threads). What came before an ``if`` is ordered
by a sync before it; a hazard between two statements inside one gets its sync inside when the
condition is the same for every thread of the block (``rules.uniformity``: ``if BlockMask[by, bx,
k]:`` around a tile's copies and its gemm), and is a ``CompileError`` when the condition may differ
between threads (a barrier some threads skip would hang the block).
A ``T.view`` that lies over its tile's bytes (``SharedView.shares_bytes``) counts as that tile,
every access through it touching the whole tile.
TMA loads make their data visible through their mbarrier, so a read after a TMA load needs none;
a thread's own ``cp.async`` (``T.ptx_cp_async``) lands the same way and counts as such a load.
A ``T.atomic_add`` to a shared element is ordered like a write against reads and writes, but not
against other atomic adds (they commute: threads may add in any order); ``T.atomic_max``/``min``
are ordered as writes. A shared buffer that
different iterations of a serial loop touch only at different elements (``A_s[k]``, ``B_s[tx, k]``
in ``for k``) carries no hazard from one iteration to the next. Accesses whose first index is the
same for every thread of the block and provably different (``s[r ^ 1, pos]`` written where
``s[r, i]`` was read, ``r`` a loop's or a block's value: the halves of a double buffer; ``s[k]`` and
``s[k + 1]``) touch different elements and need no barrier between them (``_Walk.part``,
``_disjoint``); at a loop's back edge and exit such an index that uses a variable bound inside the
loop counts as the whole buffer again. A sync needed only because of what
came before a loop goes before it, not into every iteration. Each sync stands right before the
statement that needs it, except that a loop body's first sync moves to the top of the body when
the statements it passes fill tiles from global memory and the body needs no more syncs for it
(``_sync_on_top``: those loads then overlap the ones after it).
Inside a ``WarpSpecialize`` only the consumer side gets syncs (the producer side is TMA only).
Inside a ``T.ws`` scope (``ThreadScope``) the syncs between its own threads' accesses stand inside
it (``scope_consumer_syncs`` makes them barriers of its threads only); see ``_thread_scope`` for
what orders one scope's accesses against the block's and other scopes'.
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field, replace

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.layout import strided_offset
from ..ir.printer import expr_text
from ..ir.simplify import Affine, simplify
from ..ir.visitor import IRVisitor, collect, uses_var
from .manager import register
from .rules.uniformity import Variance


WHOLE = None  # the part of an access whose first index proves nothing: the whole buffer


@dataclass
class _State:
    # (kind "r" read / "w" written / "a" atomically added, shared buffer) -> the first indices of
    # those accesses by threads since the last sync (WHOLE: any element)
    parts: dict = field(default_factory=dict)
    # Which threads made those accesses: (kind, buffer) -> {None (the whole block) or a T.ws scope's
    # (first, count)}; and the threads of the code being walked now.
    roles: dict = field(default_factory=dict)
    role: tuple | None = None
    # The mbarriers T.ws scopes before this point in the same run of statements wait on (their
    # threads may still be waiting here: a block barrier before a scope that arrives on one of them
    # would never be passed). A loop's own waits are done at its back edge and its exit.
    awaited: frozenset = frozenset()
    # mbarrier -> the accesses (keys of ``parts``) the whole block made before every thread of it
    # arrived on that mbarrier, and not since: a T.ws scope that waits on it sees them done
    # (TileLang's seesaw MLA: every thread copies Q, arrives on bar_q; the consumers wait on bar_q)
    released: dict = field(default_factory=dict)

    def merge(self, other: "_State") -> "_State":
        roles = {k: set(v) for k, v in self.roles.items()}
        for k, v in other.roles.items():
            roles.setdefault(k, set()).update(v)
        parts = {k: list(v) for k, v in self.parts.items()}
        for k, v in other.parts.items():
            parts.setdefault(k, []).extend(v)
        return _State(parts, roles, self.role, self.awaited, _merged_releases(self, other))

    def copy(self) -> "_State":
        return _State({k: list(v) for k, v in self.parts.items()}, {k: set(v) for k, v in self.roles.items()},
                      self.role, self.awaited, {b: set(keys) for b, keys in self.released.items()})

    def cleared(self) -> "_State":
        """After a barrier of the threads being walked (a block barrier: every wait before it is done)."""
        return _State(role=self.role, awaited=self.awaited if self.role is not None else frozenset())

    def note(self, acc: "_Accesses"):
        for key, parts in acc.parts.items():
            if key[0] != "t":  # TMA writes are ordered by their mbarriers
                self.parts.setdefault(key, []).extend(parts)
                self.roles.setdefault(key, set()).add(self.role)
                if self.role is None:  # the whole block's, after its arrivals: not released by them
                    for keys in self.released.values():
                        keys.discard(key)

    def arrived_by_all(self, barrier: ir.Buffer):
        """Every thread of the block arrived on ``barrier`` here (the kernel's top-level sequence),
        after the accesses so far."""
        self.released[barrier] = {k for k in self.parts if None in self.roles.get(k, ())}

    def by(self, who) -> "_State":
        """The accesses some threads satisfying ``who(role)`` made (per kind of access and buffer:
        a tile the whole block wrote and a scope read counts as read by that scope only)."""
        keys = {k for k, v in self.roles.items() if any(who(r) for r in v)}
        return _State({k: list(v) for k, v in self.parts.items() if k in keys},
                      {k: set(self.roles[k]) for k in keys}, self.role, self.awaited,
                      {b: set(released) for b, released in self.released.items()})

    def without_parts_using(self, bound: set) -> "_State":
        """The state with every first index that uses a variable of ``bound`` (bound inside a loop
        whose back edge or exit this is) counted as the whole buffer."""
        parts = {k: [WHOLE if p is not WHOLE and any(uses_var(p, v) for v in bound) else p for p in v]
                 for k, v in self.parts.items()}
        return replace(self, parts=parts)


def _merged_releases(a: _State, b: _State) -> dict:
    """``released`` of two states' accesses together: where both know an arrival, what both still
    count as released; where one alone does (the other is a scope's accesses or a loop body's, walked
    from a state without it), its keys but those the other made as the whole block."""
    out = {}
    for bar in set(a.released) | set(b.released):
        if bar in a.released and bar in b.released:
            out[bar] = a.released[bar] & b.released[bar]
        else:
            keys, other = (a.released[bar], b) if bar in a.released else (b.released[bar], a)
            out[bar] = {k for k in keys if not (k in other.parts and None in other.roles.get(k, ()))}
    return out


class _Walk(Variance):
    """The kernel's thread-variant values (``Variance``) and the variables a kernel assigns: what
    an access's first index may be trusted as (``part``)."""

    def __init__(self, func: ir.PrimFunc):
        super().__init__(func)
        self.assigned = {a.var for a in collect(func.body, ir.Assign)}

    def part(self, first_index: ir.Expr):
        """``first_index`` as the part of its buffer an access touches, where two such parts can be
        compared (``_disjoint``): the same for every thread and made of values no statement
        re-assigns (loop variables, block indices, let-bound names); else WHOLE."""
        if not self.is_uniform(first_index) or any(v in self.assigned for v in collect(first_index, ir.Var)):
            return WHOLE
        return first_index


def _disjoint(a, b) -> bool:
    """Whether two uniform first indices (``_Walk.part``), read at points no binding of their
    variables separates, are provably different: ``x ^ c`` and ``x`` (c != 0), ``x ^ c`` and
    ``x ^ d`` (c != d), a nonzero constant apart, or ``(x + c) % m`` and ``x % m`` (m not dividing c)."""
    if a is WHOLE or b is WHOLE:
        return False
    xa, ca = _xor_parts(a)
    xb, cb = _xor_parts(b)
    if ca != cb and _same(xa, xb):
        return True
    difference = Affine.of(simplify(ir.binop("-", a, b)))
    if not difference.terms and difference.const != 0:
        return True
    # (x + c) % m and x % m, c not a multiple of m: the halves (r + 1) % 2 and r % 2
    m = _modulus(a)
    if m is not None and m == _modulus(b):
        apart = Affine.of(simplify(ir.binop("-", a.a, b.a)))
        return not apart.terms and apart.const % m != 0
    return False


def _modulus(e) -> int | None:
    """m where ``e`` is ``x % m`` for a positive constant m, else None."""
    if isinstance(e, ir.BinOp) and e.op == "%" and (m := ir.const_int(e.b)) is not None and m > 0:
        return m
    return None


def _xor_parts(e: ir.Expr) -> tuple:
    """(x, c) with e == x ^ c for a constant c (c = 0 where e is no such xor)."""
    if isinstance(e, ir.BinOp) and e.op == "^" and ir.const_int(e.b) is not None:
        return e.a, ir.const_int(e.b)
    return e, 0


def _same(a: ir.Expr, b: ir.Expr) -> bool:
    """Structural equality, variables by identity."""
    if a is b:
        return True
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        return a.value == b.value
    if isinstance(a, ir.BinOp) and isinstance(b, ir.BinOp):
        return a.op == b.op and _same(a.a, b.a) and _same(a.b, b.b)
    return False


class _Accesses(IRVisitor):
    """Shared buffers (by name) a statement reads / writes with threads, or writes with TMA; with a
    ``_Walk``, also the part of each buffer each access touches (``parts``: (kind, name) -> first
    indices; kind "r" read, "w" written, "a" atomically added, "t" TMA-written)."""

    def __init__(self, walk: "_Walk | None" = None):
        self.reads, self.writes, self.tma_writes, self.adds = set(), set(), set(), set()
        self.walk = walk
        self.parts: dict = {}

    @staticmethod
    def shared(buf):
        return buf.scope == "shared"

    def _touch(self, kind: str, buf, first_index):
        if (tile := ir.tile_under(buf)) is not None:  # the viewed tile's bytes, any of them
            buf, first_index = tile, None
        {"r": self.reads, "w": self.writes, "a": self.adds, "t": self.tma_writes}[kind].add(buf.name)
        part = WHOLE if self.walk is None or first_index is None else self.walk.part(first_index)
        self.parts.setdefault((kind, buf.name), []).append(part)

    @staticmethod
    def _first(indices):
        return indices[0] if indices else None

    @staticmethod
    def _region_first(region: ir.Region):
        """A region's first start where it is one index thick along the first dimension."""
        return region.starts[0] if region.starts and ir.const_int(region.extents[0]) == 1 else None

    def visit_BufferLoad(self, n):
        if self.shared(n.buffer):
            self._touch("r", n.buffer, self._first(n.indices))
        self.generic_visit(n)

    def visit_BufferStore(self, n):
        if self.shared(n.buffer):
            self._touch("w", n.buffer, self._first(n.indices))
        self.generic_visit(n)

    def visit_Call(self, call):
        # an atomic, a statement of its own or the value of a `prev = T.atomic_add(..., return_prev=True)`
        if call.name in ir.ATOMIC_UPDATES:  # (address_of(buf[idx]), value)
            target = call.args[0].args[0]
            if self.shared(target.buffer):  # adds commute with each other; max/min count as writes
                self._touch("a" if call.name == ir.ATOMIC_ADD else "w", target.buffer, self._first(target.indices))
            for index in target.indices:
                self.visit(index)
            self.visit(call.args[1])
            return
        self.generic_visit(call)

    def visit_Copy(self, n):
        if self.shared(n.src.buffer) and n.instruction != "tma":
            self._touch("r", n.src.buffer, self._region_first(n.src))
        if self.shared(n.dst.buffer):
            self._touch("t" if n.instruction == "tma" else "w", n.dst.buffer, self._region_first(n.dst))

    def visit_Im2Col(self, n):
        self._touch("w", n.dst.buffer, None)

    def visit_TmaCopy(self, n):
        if n.is_load:
            self._touch("t", n.dst.buffer, None)

    def visit_ThreadCopy(self, n):
        # a thread's own cp.async (T.ptx_cp_async) lands for the program's mbarrier, as a TMA load
        # does: no barrier after it, but one before it where other threads read or wrote its bytes
        if self.shared(n.dst.buffer):
            self._touch("t", n.dst.buffer, self._region_first(n.dst))

    def visit_Fill(self, n):
        if self.shared(n.dst.buffer):
            self._touch("w", n.dst.buffer, self._region_first(n.dst))

    def visit_Gemm(self, n):
        for r in (n.a, n.b):
            if self.shared(r.buffer):
                self._touch("r", r.buffer, self._region_first(r))


def _accesses(stmt, walk: "_Walk | None" = None):
    a = _Accesses(walk)
    a.visit(stmt)
    return a


# An access of each kind (later) against the kinds of earlier accesses it must wait for.
_AFTER = {"r": "wa", "w": "rwa", "t": "rwa", "a": "rw"}


def _hazard(acc: _Accesses, state: _State) -> bool:
    for (kind, name), later in acc.parts.items():
        for earlier_kind in _AFTER[kind]:
            earlier = state.parts.get((earlier_kind, name))
            if earlier is None:
                continue
            if not all(_disjoint(p, q) for p in later for q in earlier):
                return True
    return False


def _without(state: _State, names: set, awaited: frozenset = frozenset()) -> _State:
    return _State({k: list(v) for k, v in state.parts.items() if k[1] not in names},
                  {k: set(v) for k, v in state.roles.items() if k[1] not in names}, state.role, awaited)


def _bound_inside(loop) -> set:
    """The variables a loop (or ``while``) binds anew each iteration: its own and those of the
    loops and lets inside it."""
    own = {loop.var} if isinstance(loop, ir.For) else set()
    return own | {f.var for f in collect(loop.body, ir.For)} | {let.var for let in collect(loop.body, ir.LetStmt)}


def _iteration_disjoint(loop: ir.For) -> set:
    """Shared buffers that different iterations of a serial loop touch only at different elements,
    so nothing one iteration does to them is a hazard for the next: every access is a plain load or
    store whose element offset is ``v + g`` for the loop variable ``v`` (from 0, extent ``n``) and a
    ``g`` that is a multiple of ``n`` (each offset's residue mod ``n`` is its iteration), e.g.
    ``A_s[k]`` or ``B_s[tx, k]`` of a ``(threads, n)`` tile in ``for k in T.serial(n)``."""
    n, start = ir.const_int(loop.extent), ir.const_int(loop.start)
    if loop.kind == "pipelined" or n is None or n < 2 or start != 0:
        return set()
    tiles = _Accesses()
    # atomics stand in statements of their own, or as the value of `prev = T.atomic_add(..., return_prev=True)`
    returned = [s.value for s in collect(loop.body, ir.LetStmt)
                if isinstance(s.value, ir.Call) and s.value.name in ir.ATOMIC_UPDATES]
    for op in [*collect(loop.body, (ir.Copy, ir.TmaCopy, ir.ThreadCopy, ir.Fill, ir.Gemm, ir.Evaluate)), *returned]:
        tiles.visit(op)  # tile operations and atomics: their elements are not followed here
    for op in collect(loop.body, ir.Reduce):
        tiles.reads |= {op.src.name, op.dst.name}
    for op in collect(loop.body, ir.Scan):
        tiles.reads |= {op.src.buffer.name, op.dst.buffer.name}
    others = tiles.reads | tiles.writes | tiles.tma_writes | tiles.adds
    offsets: dict = {}
    for access in collect(loop.body, (ir.BufferLoad, ir.BufferStore)):
        if access.buffer.scope == "shared":
            offsets.setdefault(access.buffer.name, []).append(strided_offset(access.buffer, access.indices))
    # a tile a view lies over (share_view_storage) is touched through two names: neither is followed
    shared_bytes = {name for b in collect(loop.body, ir.Buffer) if (tile := ir.tile_under(b)) is not None
                    for name in (b.name, tile.name)}
    return {name for name, offs in offsets.items() if name not in others and name not in shared_bytes
            and all(_residue_is_iteration(off, loop.var, n) for off in offs)}


def _residue_is_iteration(offset: ir.Expr, v: ir.Var, n: int) -> bool:
    form = Affine.of(simplify(offset))
    if form.const % n:
        return False
    seen_v = False
    for atom, coef in form.terms.values():
        if atom is v:
            seen_v = coef == 1
            if not seen_v:
                return False
        elif coef % n or uses_var(atom, v):
            return False
    return seen_v


def _syncs(stmt) -> int:
    return len(collect(stmt, ir.SyncThreads))


def _sync(out: list):
    # The reader may be the async proxy (wgmma, TMA): order the threads' writes for it too.
    out.append(ir.Evaluate(ir.Call("tw::fence_proxy_async", ())))
    out.append(ir.SyncThreads())


def _leaf(stmt, state: _State, walk: _Walk, out: list) -> _State:
    acc = _accesses(stmt, walk)
    if _hazard(acc, state):
        _sync(out)
        state = state.cleared()
    out.append(stmt)
    state.note(acc)
    return state


def _after_first_sync(stmt):
    """The statement right after the first sync in ``stmt`` (nested blocks searched), or None."""
    stmts = stmt.stmts if isinstance(stmt, ir.SeqStmt) else [stmt]
    for i, s in enumerate(stmts):
        if isinstance(s, ir.SyncThreads):
            return stmts[i + 1] if i + 1 < len(stmts) else s
        for child in (getattr(s, "body", None), getattr(s, "then_body", None), getattr(s, "else_body", None)):
            if isinstance(child, ir.Stmt) and (found := _after_first_sync(child)) is not None:
                return found
    return None


def _if(s: ir.IfThenElse, state: _State, variance: Variance, out: list) -> _State:
    if _hazard(_accesses(s, variance), state):  # what came before the if: one sync before it
        _sync(out)
        state = state.cleared()
    then, then_end = _block(s.then_body, state.copy(), variance)
    other, other_end = (None, state) if s.else_body is None else _block(s.else_body, state.copy(), variance)
    needs = _after_first_sync(then) or (other is not None and _after_first_sync(other))
    if not needs:
        out.append(s)
    elif variance.is_uniform(s.cond):
        out.append(replace(s, then_body=then, else_body=other))
    else:
        raise _barrier_under_variant_condition(s, needs, "`if`", "threads that skip it would hang the block")
    return then_end.merge(other_end)


def _barrier_under_variant_condition(s, needs, what: str, why: str) -> CompileError:
    """The error for a hazard inside ``s`` (an ``if`` or a ``while``) whose condition may differ
    between threads: the barrier it needs (before ``needs``) cannot stand there."""
    line = f" (before line {needs.loc.line})" if needs is not None and needs.loc is not None and needs.loc.line else ""
    return CompileError(
        f"threads write shared memory and read it again inside this {what}, whose condition "
        f"({expr_text(s.cond)}) may differ between the threads of a block: the block barrier needed "
        f"between them{line} cannot go inside it ({why}). Make the condition the same for every thread "
        f"(block indices, loop variables, loads at such indices), or move the shared-memory work out of the "
        f"{what}", s.loc)


def _while(s: ir.While, state: _State, variance: Variance, out: list) -> _State:
    """As a serial loop of unknown trip count: what one iteration leaves behind meets the next."""
    if _hazard(_accesses(ir.Evaluate(s.cond), variance), state):  # the condition reads what was just written
        _sync(out)
        state = state.cleared()
    bound = _bound_inside(s)
    _, end = _block(s.body, state.copy(), variance)
    body, end = _block(s.body, state.merge(end.without_parts_using(bound)), variance)
    end = end.without_parts_using(bound)
    if _syncs(body) and not variance.is_uniform(s.cond):
        raise _barrier_under_variant_condition(s, _after_first_sync(body), "`while` loop",
                                               "threads that leave the loop early would hang the block")
    out.append(replace(s, body=body))
    return state.merge(end)  # the body may run no time at all


def _thread_scope(s: ir.ThreadScope, state: _State, variance: Variance, out: list) -> _State:
    """``with T.ws(...)``: hazards among its own threads get a barrier of theirs inside it; what
    the whole block did before it gets a block barrier before it; what other scopes did is ordered
    by the user's mbarriers when the scope waits on one, or arrives on one a scope before it in the
    same run waits on (the barrier checker verifies that protocol; a block barrier there would
    never be passed by the threads waiting for this scope's arrivals: FlashMLA's producer, written
    after its consumers, loads and arrives), else by a block barrier before it too. What the whole
    block did before every thread of it arrived on an mbarrier the scope waits on is ordered by that
    arrival (``_State.released``: TileLang's seesaw MLA copies Q, arrives on ``bar_q``, and its
    scopes, the producer's first, wait on it; a block barrier there would hang). Every access
    the scope made counts after it for the other threads, those its own barriers ordered included
    (they order its threads only)."""
    role = (s.first, s.count)
    waits = frozenset(w.barrier.buffer for w in collect(s.body, ir.BarrierWait))
    arrivals = {a.barrier.buffer for a in collect(s.body, ir.BarrierArrive)}
    trusts_mbarriers = bool(waits) or bool(arrivals & state.awaited)
    before = state.by(lambda r: r is None or (r != role and not trusts_mbarriers))
    ordered = set().union(*(state.released.get(w, set()) for w in waits))
    if ordered:  # the whole block's accesses before its arrival on a barrier this scope waits on
        before = replace(before, parts={k: v for k, v in before.parts.items() if k not in ordered})
    if _hazard(_accesses(s, variance), before):
        _sync(out)
        state = state.cleared()
    inner = state.by(lambda r: r == role)
    inner.role = role
    body, end = _block(s.body, inner, variance)
    out.append(replace(s, body=body))
    end.role = state.role
    # The scope's own barriers ordered its accesses before its threads only: for every other thread
    # (another scope's, or the whole block's after it) each of them is still unordered.
    ordered_within = _State(role=("ordered within", role))
    ordered_within.note(_accesses(s, variance))
    after = state.merge(ordered_within).merge(end)
    after.awaited = state.awaited | waits
    return after


def _loads_tiles(stmt) -> bool:
    """Whether ``stmt`` fills a shared tile from global memory with the threads' own loads (a
    ``T.copy`` that is not TMA, or a ``T.Parallel`` store of global loads)."""
    for copy in collect(stmt, ir.Copy):
        if copy.instruction != "tma" and copy.src.buffer.scope == "global" and copy.dst.buffer.scope == "shared":
            return True
    return any(store.buffer.scope == "shared" and any(ld.buffer.scope == "global" for ld in collect(store.value, ir.BufferLoad))
               for store in collect(stmt, ir.BufferStore))


def _sync_on_top(source, body, end: _State, role, variance: Variance):
    """A loop body whose first sync waits for what the previous iteration left (a write after its
    reads) behind statements that fill tiles from global memory: the same number of syncs with one
    at the top of the body instead, when that is all it takes, so those loads and the ones after the
    old sync are in flight together (retention's q, k and v tiles: one memory latency an iteration,
    not two). Else the body as it was."""
    stmts = ir.statements(body)
    first = next((i for i, x in enumerate(stmts) if _syncs(x)), 0)
    if first == 0 or not isinstance(stmts[first], ir.SyncThreads) \
            or not any(_loads_tiles(x) for x in stmts[:first]):
        return body, end
    top, top_end = _block(source, _State(role=role), variance)
    if _syncs(top) + 1 > _syncs(body):
        return body, end
    synced: list = []
    _sync(synced)
    return ir.seq(synced + [top]), top_end


def _block(stmt, state: _State, variance: Variance, top: bool = False) -> tuple[ir.Stmt, _State]:
    """``stmt`` with the syncs it needs, and the state after it; ``top``: the kernel's own sequence
    of statements, which every thread runs in order (an arrival there is every thread's)."""
    out: list = []
    stmts = stmt.stmts if isinstance(stmt, ir.SeqStmt) else [stmt]
    for s in stmts:
        if isinstance(s, ir.SyncThreads):
            out.append(s)
            state = state.cleared()
        elif isinstance(s, ir.For) and s.kind in ("serial", "pipelined", "unrolled"):
            own = _iteration_disjoint(s)  # buffers no two iterations touch at one element
            bound = _bound_inside(s)  # what one iteration leaves behind, at the back edge and the exit:
            _, end = _block(s.body, state.copy(), variance)  # first pass
            end = end.without_parts_using(bound)
            body, end = _block(s.body, state.merge(_without(end, own)), variance)  # loop-carried hazards included
            end = end.without_parts_using(bound)
            inside = _syncs(body)
            if inside:  # would nothing from before the loop need fewer? (a third walk only then)
                carried, carried_end = _block(s.body, _without(end, own, state.awaited), variance)
                if _syncs(carried) < inside:
                    # Only what came before the loop needs this one: a sync before it, not one per iteration.
                    _sync(out)
                    body, end = carried, carried_end.without_parts_using(bound)
            if _syncs(body) and s.kind != "unrolled":
                body, end = _sync_on_top(s.body, body, end, state.role, variance)
                end = end.without_parts_using(bound)
            out.append(dataclasses.replace(s, body=body))
            state = state.merge(end)
        elif isinstance(s, ir.WarpSpecialize):
            # The producer side only issues TMA (ordered by mbarriers); the consumer side is code
            # like any other (its barriers become consumer-only ones in scope_consumer_syncs).
            consumer, state = _block(s.consumer, state, variance)
            out.append(replace(s, consumer=consumer))
        elif isinstance(s, ir.ThreadScope):
            state = _thread_scope(s, state, variance, out)
        elif isinstance(s, ir.BarrierArrive) and top:
            out.append(s)
            state = state.copy()
            state.arrived_by_all(s.barrier.buffer)
        elif isinstance(s, ir.IfThenElse):
            state = _if(s, state, variance, out)
        elif isinstance(s, ir.While):
            state = _while(s, state, variance, out)
        else:
            state = _leaf(s, state, variance, out)
    return ir.seq(out), state


@register("insert_thread_syncs", "tile")
def insert_thread_syncs(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    body, _ = _block(func.body, _State(), _Walk(func), top=True)
    return func.with_body(body)
