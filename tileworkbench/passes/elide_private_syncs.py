"""elide_private_syncs: drop a block barrier where every thread only meets its own elements across it.

Phase: lower, after ``simplify`` (thread-level code, indices simplified, shared memory placed).
Expects: the block barriers ``insert_thread_syncs`` (and the reduction rules) placed while the
threads' mapping was not known yet: a ``T.copy`` into a shared tile and a ``T.Parallel`` loop over
it got a barrier between them because some thread might read what another wrote.
Applies to kernels of plain loads and stores, vector copies (``tw::copy_vec``, ``tw::zero_vec``),
warp shuffles and arithmetic (``_pure_call``), and TMA stores of tiles (``store_last_tile_by_tma``'s:
modelled as an unknown thread reading the whole tile and writing the global region, so the barrier
before one always stays): no TMA load, mbarrier, cp.async, tensor-core or matrix instruction,
swizzled tile, atomic, other raw CUDA text, warp specialisation or ``T.ws`` scope (``why_not``).
Guarantees: a block-wide ``T.sync_threads()`` is removed only when, for every buffer (shared or
global) written on one side of it and read or written on the other, each element both sides may
touch is touched by the same thread on both. The sides are every access that can run between the
barrier before it and the barrier after it on some path, across loop iterations and out of loops
and branches (a statement holding barriers counts whole). An access proves which thread touches an
element when its offset is ``S * tx + r + P * m`` with ``P = S * threads``, the run it touches
``[r, r + w)`` inside ``[0, S)`` for every value of the other variables and ``m`` an integer:
element ``x`` then belongs to thread ``(x mod P) // S`` alone (``_Owner``). Two accesses of one
buffer with the same ``S`` agree on every element's thread; other pairs keep the barrier, and so
do distinct shared buffers that the plan placed over each other. Barriers are removed one at a
time, each decided with the barriers still standing. What it buys: TileLang's rms_norm_splitk
copies each step of a row into a shared tile and reads it back in the same threads' runs, with no
block barrier between (``docs/experiments.md``, "Norms' fragments in runs over shared memory").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.simplify import Affine, interval, launch_ranges, loop_range, simplify
from ..ir.math_calls import C_NAMES as MATH_CALL_NAMES, CALLS as MATH_CALLS
from ..ir.visitor import IRMutator, collect, reassigned_vars, substitute
from .manager import register
from .rules import tma as tma_rules
from .rules.reductions import FULL_WARP

_PURE_PREFIXES = ("tw::from_float", "tw::to_float", "__shfl", "__int_as_float", "__float_as_int")
_PURE_MATH = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "fabs", "abs", "fmax", "fmin", "max", "min", "tanh",
              "sin", "cos", "erf", "pow", "floor", "ceil", "round", "trunc", "rcp", "expf", "exp2f", "logf", "log2f",
              "sqrtf", "rsqrtf", "fabsf", "fmaxf", "fminf", "tanhf", "sinf", "cosf", "erff", "powf", "floorf",
              "ceilf", "roundf", "truncf", "__expf", "__exp2f", "__logf", "__log2f", "__powf", "__sinf", "__cosf",
              "__tanf", "__fdividef", "hexp2", "h2exp2", "hrsqrt", "isinf", "isnan", "copysignf", "fmodf"} \
    | set(MATH_CALLS) | MATH_CALL_NAMES


def _pure_call(call: ir.Call) -> bool:
    name = call.name
    return (name == "address_of" or name.startswith(("tw::copy_vec<", "tw::zero_vec<")) or name in _PURE_MATH
            or name.startswith(_PURE_PREFIXES))


# A TMA store of a tile (``store_last_tile_by_tma``), its commit and wait, the elect that issues it
# and the proxy fence before it: the store counts as one unknown thread reading the whole tile and
# writing the global region (``_Accesses.store_accesses``), so the barrier before it always stays.
_STORE_ISSUE = ("tw::shuffle_elect<", "tw::fence_proxy_async")
WHOLE = 1 << 62  # the width of an access to every element of a global tensor


def _store_call(call: ir.Call) -> bool:
    return tma_rules.is_store_call(call.name) or call.name.startswith(_STORE_ISSUE)


def why_not(func: ir.PrimFunc) -> str | None:
    """None when the kernel is of the kind this pass reasons about, else why not."""
    if func.launch.producer_threads:
        return "the kernel is warp-specialised"
    for call in collect(func.body, ir.Call):
        if not (_pure_call(call) or _store_call(call)):
            return f"the kernel calls {call.name}"
    if collect(func.body, (ir.ThreadScope, ir.WarpSpecialize, ir.TmaCopy, ir.BarrierWait, ir.BarrierArrive)):
        return "the kernel has T.ws scopes, warp specialisation, TMA or mbarriers"
    if any(s.threads is not None for s in collect(func.body, ir.SyncThreads)):
        return "the kernel has named barriers"
    if any(not isinstance(e.call, ir.Call) for e in collect(func.body, ir.Evaluate)):
        return "the kernel evaluates an expression that is no call"
    known = {ir.HW_BLOCK.text, ir.HW_BLOCKS.text, FULL_WARP.text}  # block indices, a shuffle's lane mask
    known |= {d.name for d in func.attrs.get("tma_descriptors") or ()}  # a store's tensor map
    if any(raw.text not in known for raw in collect(func.body, ir.Raw)):
        return "the kernel holds raw CUDA text"
    return None


class _Unmodelled(Exception):
    """A TMA store whose global tensor the pass cannot name: the kernel is left as it is."""


@dataclass(frozen=True)
class _Access:
    buffer: ir.Buffer
    offset: ir.Expr  # the first element, flat, in terms of tx, loop and block variables
    width: int  # elements
    write: bool


class _Accesses:
    """Every memory access under a statement, its offset with the kernel's scalar names put in."""

    def __init__(self, func: ir.PrimFunc):
        params = {p.name: p for p in func.params if isinstance(p, ir.Buffer)}
        # tensor map -> the global tensor it describes (a descriptor TMA store names only the map)
        self.described = {d.name: params.get(d.buffer) for d in func.attrs.get("tma_descriptors") or ()}
        lets = collect(func.body, ir.LetStmt)
        bindings = Counter(id(let.var) for let in lets)
        # a name bound twice or re-assigned has no one value: it stays a name (and proves nothing)
        reassigned = reassigned_vars(func.body)
        self.names = {let.var: let.value for let in lets if bindings[id(let.var)] == 1 and let.var not in reassigned}

    def resolved(self, e: ir.Expr) -> ir.Expr:
        for _ in range(32):  # names defined by names
            if not any(v in self.names for v in collect(e, ir.Var)):
                break
            e = substitute(e, self.names)
        return e

    def flat(self, buf: ir.Buffer, indices) -> ir.Expr:
        offset = ir.const(0)
        for i, stride in zip(indices, buf.effective_strides()):
            offset = offset + self.resolved(i) * stride
        return offset

    def store_accesses(self, call: ir.Call, addresses: set) -> list:
        """A TMA store's accesses: the whole shared tile read and the global tensor written, each
        at an offset without the thread index (so no thread owns them: every barrier between them
        and the threads' accesses stays). ``addresses`` collects the address arguments' loads,
        which are no reads of their own."""
        out = []
        for arg in call.args:
            if isinstance(arg, ir.Call) and arg.name == "address_of":
                load = arg.args[0]
                addresses.add(id(load))
                buf = load.buffer
                out.append(_Access(buf, ir.const(0), buf.numel if buf.scope == "shared" else WHOLE, buf.scope != "shared"))
            elif isinstance(arg, ir.Raw) and arg.text in self.described:
                tensor = self.described[arg.text]
                if tensor is None:  # a map of something not a parameter: the kernel is left alone
                    raise _Unmodelled(arg.text)
                out.append(_Access(tensor, ir.const(0), WHOLE, True))
        return out

    def of(self, stmt) -> list:
        out = []
        vector_targets = set()
        for call in collect(stmt, ir.Call):
            if ir.is_tma_store_issue(call.name):
                out.extend(self.store_accesses(call, vector_targets))
                continue
            if call.name.startswith(("tw::copy_vec<", "tw::zero_vec<")):
                nbytes = int(call.name.split("<")[1].rstrip(">"))
                for n, arg in enumerate(call.args):
                    load = arg.args[0]
                    vector_targets.add(id(load))
                    width = nbytes * 8 // load.buffer.dtype.storage_bits
                    out.append(_Access(load.buffer, self.flat(load.buffer, load.indices), width, n == 0))
        for store in collect(stmt, ir.BufferStore):
            out.append(_Access(store.buffer, self.flat(store.buffer, store.indices), 1, True))
        for load in collect(stmt, ir.BufferLoad):
            if id(load) not in vector_targets:
                out.append(_Access(load.buffer, self.flat(load.buffer, load.indices), 1, False))
        return [a for a in out if a.buffer.scope in ("shared", "global")]


@dataclass(frozen=True)
class _Frame:
    """A statement list, the loop or branch it is the body of (None: the kernel's), and where that
    statement stands in its own list."""

    stmts: list
    owner: object
    parent: "_Frame | None"
    index: int


def _is_barrier(stmt) -> bool:
    return isinstance(stmt, ir.SyncThreads) and stmt.threads is None


def _barriers(frame: _Frame):
    """(barrier, its frame, its index) for every block barrier, in program order."""
    for i, stmt in enumerate(frame.stmts):
        if _is_barrier(stmt):
            yield stmt, frame, i
        for body in ir.heads_and_bodies(stmt)[1]:
            yield from _barriers(_Frame(ir.statements(body), stmt, frame, i))


class _Sides:
    def __init__(self, accesses: _Accesses):
        self.accesses = accesses

    def _stmts(self, stmts) -> tuple[list, bool]:
        """Accesses of ``stmts`` in the order given, up to a block barrier: (accesses, met one)."""
        out = []
        for stmt in stmts:
            if _is_barrier(stmt):
                return out, True
            out += self.accesses.of(stmt)
        return out, False

    def heads(self, owner) -> list:
        """What a loop or branch reads to decide whether its body runs (its condition, its bounds)."""
        return [access for head in ir.heads_and_bodies(owner)[0] for access in self.accesses.of(head)]

    def after(self, frame: _Frame, start: int) -> list:
        out, met = self._stmts(frame.stmts[start:])
        if met:
            return out
        out += self.heads(frame.owner)  # a loop decides whether to go on (a branch was decided before)
        if isinstance(frame.owner, (ir.For, ir.While)):
            out += self._stmts(frame.stmts)[0]  # the next iteration, up to its first barrier
        if frame.parent is not None:  # the loop ends, or the branch is done
            out += self.after(frame.parent, frame.index + 1)
        return out

    def before(self, frame: _Frame, end: int) -> list:
        out, met = self._stmts(reversed(frame.stmts[:end]))
        if met:
            return out
        out += self.heads(frame.owner)  # the condition or bounds that let this body run
        if isinstance(frame.owner, (ir.For, ir.While)):
            out += self._stmts(reversed(frame.stmts))[0]  # the previous iteration, after its last barrier
        if frame.parent is not None:
            out += self.before(frame.parent, frame.index)
        return out


_DIV_MOD = {"//": "%", "truncdiv": "truncmod"}  # a quotient's op -> its remainder's


def _recombined(e: ir.Expr) -> Affine:
    """``e`` as an affine form in which ``(x // b) * b c + (x % b) * c`` is ``x * c`` again: a copy's
    thread split into rows and columns (``i0 = flat / 8``, ``i1 = flat % 8``, offset ``i0 * 32 +
    i1 * 4``) touches ``4 * flat`` (exact for floor division, and for C's where ``x >= 0``, which
    the simplifier's ``truncdiv`` already means)."""
    form = Affine.of(e)
    while True:
        quotients = {}
        for key, (atom, coef) in form.terms.items():
            if isinstance(atom, ir.BinOp) and atom.op in _DIV_MOD and ir.const_int(atom.b):
                quotients[(_DIV_MOD[atom.op], expr_text(atom.a), ir.const_int(atom.b))] = (key, coef)
        pair = None
        for key, (atom, coef) in form.terms.items():
            if isinstance(atom, ir.BinOp) and ir.const_int(atom.b):
                found = quotients.get((atom.op, expr_text(atom.a), ir.const_int(atom.b)))
                if found is not None and found[1] == coef * ir.const_int(atom.b):
                    pair = (found[0], key, atom.a, coef)
                    break
        if pair is None:
            return form
        quotient, remainder, x, c = pair
        rest = Affine({k: v for k, v in form.terms.items() if k not in (quotient, remainder)}, form.const)
        form = rest.plus(Affine.of(simplify(x * c)))


class _Owner:
    """Which thread an access gives each element to (module doc), or None where it cannot tell."""

    def __init__(self, func: ir.PrimFunc, accesses: _Accesses):
        self.tx = func.launch.thread_var
        self.threads = func.launch.threads
        self.ranges = launch_ranges(func)
        for loop in collect(func.body, ir.For):  # outer loops first: their ranges bound the inner ones
            # the bounds in the names the accesses are written in (lets resolved), start simplified first
            start = simplify(accesses.resolved(loop.start), self.ranges)
            self.ranges[loop.var] = loop_range(replace(loop, start=start, extent=accesses.resolved(loop.extent)),
                                               self.ranges)

    def run(self, access: _Access) -> int | None:
        """``S``: the access touches elements of thread ``tx``'s own run of ``S`` in each period of ``S * threads``."""
        form = _recombined(simplify(access.offset, self.ranges))
        steps = [coef for atom, coef in form.terms.values() if atom is self.tx]
        if len(steps) != 1 or steps[0] <= 0:
            return None
        run = steps[0]
        period = run * self.threads
        rest = ir.const(form.const % period)
        for atom, coef in form.terms.values():
            if atom is not self.tx and coef % period:
                rest = rest + atom * coef
        if any(v is self.tx for v in collect(rest, ir.Var)):
            return None  # tx inside another term (tx // 32, say)
        lo, hi = interval(simplify(rest, self.ranges), self.ranges)
        if lo is None or hi is None or lo < 0 or hi + access.width > run:
            return None
        return run


def _overlap(a: ir.Buffer, b: ir.Buffer) -> bool:
    """Two distinct shared buffers the plan placed over each other (or that it did not place)."""
    if a.scope != "shared" or b.scope != "shared":
        return False
    spans = []
    for buf in (a, b):
        offset = buf.attrs.get("offset")
        if offset is None:
            return True
        spans.append((offset, offset + buf.dtype.bytes_for(buf.numel)))
    return spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]


def _needed(before: list, after: list, owner: _Owner) -> bool:
    """Some element written on one side and touched on the other by another thread, as far as can be told."""
    runs: dict = {}  # id(access) -> its run, each worked out once

    def run(access):
        if id(access) not in runs:
            runs[id(access)] = owner.run(access)
        return runs[id(access)]

    for p in before:
        for q in after:
            if not (p.write or q.write):
                continue
            if p.buffer is not q.buffer:
                if _overlap(p.buffer, q.buffer):
                    return True
                continue
            if run(p) is None or run(q) != run(p):
                return True
    return False


class _Drop(IRMutator):
    def __init__(self, barrier):
        self.barrier = barrier

    def visit_SeqStmt(self, node):
        return ir.seq([self.visit(s) for s in node.stmts if s is not self.barrier])

    def visit_SyncThreads(self, node):  # a loop or branch whose body is the barrier alone
        return ir.seq([]) if node is self.barrier else node


@register("elide_private_syncs", "lower")
def elide_private_syncs(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    out = func.with_body(func.body)
    reason = why_not(func)
    if reason is not None:
        return out
    accesses = _Accesses(func)
    owner = _Owner(func, accesses)
    removed = 0
    try:
        while True:
            root = _Frame(ir.statements(out.body), None, None, 0)
            sides = _Sides(accesses)
            for barrier, frame, i in _barriers(root):
                if not _needed(sides.before(frame, i), sides.after(frame, i + 1), owner):
                    out = out.with_body(_Drop(barrier).visit(out.body))
                    removed += 1
                    break
            else:
                break
    except _Unmodelled:
        return func.with_body(func.body)
    if removed:
        out.attrs["elided_syncs"] = removed
    return out
