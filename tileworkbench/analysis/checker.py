"""The mbarrier-protocol checker: definite bugs stop compilation, suspicious patterns warn.

It rides along the protocol simulation (:mod:`.barriers`, one thread block, every loop
iteration unrolled, thread scopes exact) as an observer and adds what the protocol alone does
not see:

* **the data**: which shared elements each TMA load writes and on which barrier phase it lands,
  which elements threads, gemms and TMA stores read and write, which phase every thread has
  observed through its waits (and what ``__syncthreads`` passes on to the others);
* **late landing**: the simulation lets TMA bytes land at once; the checker also keeps a
  shadow of every slot in which they land as late as they may (when something waits), which is
  when extra arrivals and early slot reuse corrupt a phase.

Errors (definite bugs): ``wait_never_completes`` (found by the simulation; the checker adds its
``cause``: ``no_arrivals``, ``own_later_arrive``, ``arrive_count_unreachable``, ``tx_mismatch``,
``wrong_parity``, or ``may_complete_later``, which is only a warning), ``uninitialized`` (the
simulation's), ``extra_arrivals``, ``slot_reused_before_wait``, ``tx_mismatch``,
``read_before_landed``, ``overwrite_in_use``, ``overwrite_in_flight``. Warnings (suspicious):
``store_source_reused``, ``store_unwaited_at_exit``, ``load_never_waited`` and the simulation's
own. docs/checker.md says what each one means.

The pass config ``tw.barrier_check`` (``PassConfigKey.TW_BARRIER_CHECK``) is ``"error"``
(default: :func:`enforce`, a post-lower hook, raises a :class:`CompileError` at the kernel
line of the first error, or turns each warning into a :class:`TileworkbenchWarning`), ``"warn"``
(errors become warnings, in the trace too) or ``"off"`` (no checker; the simulation's own
findings stay in the trace).

Limits: one block (block indices 0) stands for all; threads run in lockstep, so warp-specialised
producer/consumer loops are not modelled; loops without barrier operations are scanned once
(twice when they issue TMA stores) with their loop variables unknown, so their accesses count
as touching every element those variables may reach; thread-to-thread races on shared memory
are insert_thread_syncs' business and not checked here; memory fences are not checked.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import CompileError, SourceLocation
from ..ir import nodes as ir
from ..ir.layout import shared_element_offset
from . import barriers as _barriers
from . import program
from .evaluate import Unknown, evaluate
from .lines import KernelLines

SOURCE = "barrier_check"  # the ``source`` of the findings this module produces
CONFIG = "tw.barrier_check"
MODES = ("error", "warn", "off")
CHECKED_SOURCES = (SOURCE, _barriers.SOURCE)

_VEC = re.compile(r"^tw::(copy_vec|cp_async|zero_vec)<(\d+)>$")
# Stores of 16-bit results and the elements each thread's address covers: store_pair writes the
# thread's two neighbours; stmatrix writes, for the 8x8 matrix row a lane addresses, the row's 8
# elements (held by four other lanes, but a warp's lanes together write exactly those rows).
_RESULT_STORES = {"tw::store_pair": 2, "tw::store_matrix_x4": 8}
_ELECT = re.compile(r"^tw::shuffle_elect<(\d+)>$")
_WHOLE = np.iinfo(np.int64).max // 4  # "up to the end" for buffers of unknown size


class TileworkbenchWarning(UserWarning):
    """Something suspicious tileworkbench found in a kernel; compilation goes on. The message
    names the problem and the warning points at the kernel line."""


def mode_of(artifact) -> str:
    """The ``tw.barrier_check`` mode in force for a lowering artifact ("error" by default)."""
    value = (getattr(artifact, "pass_configs", None) or {}).get(CONFIG, "error")
    if value is True or value is None:
        return "error"
    if value is False:
        return "off"
    text = str(value).strip().lower()
    if text not in MODES:
        raise CompileError(f"pass config {CONFIG} must be 'error', 'warn' or 'off', not {value!r}")
    return text


# ---- what a statement touches ------------------------------------------------------------------


def _subexprs(expr, into_addresses=True):
    """``expr`` and everything below it (not below ``address_of`` unless ``into_addresses``)."""
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        if isinstance(e, ir.Call):
            if into_addresses or e.name != "address_of":
                stack.extend(a for a in e.args if isinstance(a, (ir.Expr, ir.BarrierRef)))
        elif isinstance(e, ir.BinOp):
            stack += [e.a, e.b]
        elif isinstance(e, ir.Not):
            stack.append(e.a)
        elif isinstance(e, ir.Cast):
            stack.append(e.value)
        elif isinstance(e, ir.Select):
            stack += [e.cond, e.a, e.b]
        elif isinstance(e, ir.BufferLoad):
            stack.extend(e.indices)
        elif isinstance(e, ir.BarrierRef):
            stack.append(e.index)


def _own_exprs(stmt) -> list:
    """The expressions a statement holds itself (not those of nested statements)."""
    if isinstance(stmt, ir.BufferStore):
        return [*stmt.indices, stmt.value]
    if isinstance(stmt, ir.Evaluate):
        return [stmt.call]
    if isinstance(stmt, ir.IfThenElse):
        return [stmt.cond]
    if isinstance(stmt, ir.For):
        return [stmt.start, stmt.extent]
    if isinstance(stmt, (ir.LetStmt, ir.Assign)):
        return [stmt.value]
    return []


def _is_shared(buf) -> bool:
    return isinstance(buf, ir.Buffer) and buf.scope == "shared"


def _touches_shared(stmt) -> bool:
    if isinstance(stmt, ir.BufferStore) and _is_shared(stmt.buffer):
        return True
    return any(isinstance(e, ir.BufferLoad) and _is_shared(e.buffer)
               for x in _own_exprs(stmt) for e in _subexprs(x))


def _call_of(stmt):
    return stmt.call if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call) else None


def _has_async_memory(func: ir.PrimFunc) -> bool:
    """Barriers or TMA stores: without them there is nothing for the checker to follow."""
    for s in program.preorder(func.body):
        if isinstance(s, ir.Allocate) and s.buffer.scope == "barrier":
            return True
        call = _call_of(s)
        if call is not None and call.name.startswith("tw::tma_"):
            return True
    return False


# ---- records -------------------------------------------------------------------------------------


@dataclass
class _Read:
    """Shared elements some threads read since the last block barrier (per thread [lo, hi])."""

    buffer: str
    lo: np.ndarray
    hi: np.ndarray
    threads: np.ndarray
    what: str
    line: int | None
    iteration: int | None
    stmt: int  # id of the reading statement
    released: dict = field(default_factory=dict)  # (slot key, phase) -> readers that arrived since


@dataclass
class _Load:
    """A TMA load that not every thread has observed yet."""

    buffer: str
    lo: int
    hi: int
    key: tuple  # (barrier, slot)
    phase: int  # the phase its bytes count towards
    issuer: np.ndarray
    event: dict
    reported: bool = False  # a finding names it already (no "never waited" on top)


@dataclass
class _Store:
    """A TMA store whose shared source may still be read (no store wait by its issuer yet)."""

    buffer: str
    lo: int
    hi: int
    issuer: np.ndarray
    line: int | None
    iteration: int | None


@dataclass
class _Shadow:
    """One slot with TMA bytes landing as late as they may: the phase ends when something waits."""

    count: int
    arrived: int = 0
    expect: int = 0
    issued: int = 0
    event: dict | None = None  # the phase's first expect_tx / load event
    broken: bool = False  # reported once; not followed further

    def reset(self):
        self.arrived = self.expect = self.issued = 0
        self.event = None

    @property
    def landing(self) -> bool:
        """Every arrival is in and transaction bytes are involved: only landing is left."""
        return self.arrived == self.count and bool(self.expect or self.issued)


def _overlap(lo, hi, a: int, b: int):
    return (lo <= b) & (hi >= a)


def _at(line) -> str:
    return f" at line {line}" if line is not None else ""


def _from(line) -> str:
    return f" from line {line}" if line is not None else ""


def _iter(iteration) -> str:
    return f" (iteration {iteration})" if iteration is not None else ""


# ---- the observer ------------------------------------------------------------------------------


class _Checker:
    def __init__(self, sim, mode: str):
        self.sim = sim
        self.mode = mode
        self.env = sim.env
        self.threads = sim.threads
        self.source = KernelLines(sim.func)
        self.seen: dict = {}  # slot key -> per-thread number of the last phase observed complete
        self.loads: list[_Load] = []
        self.reads: list[_Read] = []
        self.stores: list[_Store] = []
        self.shadow: dict = {}
        self.blocked: list = []  # (wait event, slot key, waiters, SlotState snapshot)
        self.stuck: set = set()  # slot keys with a deadlocked wait: what follows on them is moot
        self.arrivals: list = []  # (arrive event, slot key, arrivers)
        self.last_wait: dict = {}  # slot key -> the last wait event that returned
        self.carried: dict = {}  # (slot key, phase) -> {slot key: phase the arrivers had seen}
        self._store_loops: dict = {}

    # ---- findings --------------------------------------------------------------------------
    def report(self, key, severity, code, message, name=None, slot=None, frame=None, line=None, event=None):
        if line is None and (frame is None or frame.line is None) and name in self.sim.declared:
            loc = self.sim.declared[name].loc  # no better line known: where the barrier is declared
            line = loc.line if loc is not None else None
        idx = self.sim.finding(("check",) + key, severity, code, message, name, slot, frame, line, source=SOURCE)
        if event is not None:
            event.setdefault("finding", idx)
        return idx

    # ---- which statements we want to see -----------------------------------------------------
    def interesting(self, stmt) -> bool:
        if isinstance(stmt, ir.SyncThreads):
            return True
        call = _call_of(stmt)
        if call is not None and call.name.startswith("tw::tma_store"):
            return True
        return not isinstance(stmt, ir.SeqStmt) and _touches_shared(stmt)

    # ---- evaluation helpers ------------------------------------------------------------------
    def value(self, expr):
        try:
            return evaluate(expr, self.env)
        except (Unknown, ArithmeticError, TypeError, ValueError):
            return None

    def span(self, buf: ir.Buffer, indices, n: int | None = 1):
        """Per-thread [lo, hi] of the row-major elements of ``buf`` from ``buf[indices]`` on:
        ``n`` elements, or to the end of the pipeline version when ``n`` is None. An index that
        cannot be evaluated covers its whole dimension."""
        shape = buf.static_shape()
        zero = np.zeros(self.threads, dtype=np.int64)
        if shape is None or len(shape) != len(indices):
            return zero, zero + _WHOLE
        if buf.attrs.get("panel", 0) and len(shape) in (2, 3):
            return self.paneled_span(buf, shape, indices, n)
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        lo, hi = zero.copy(), zero.copy()
        for idx, dim, stride in zip(indices, shape, reversed(strides)):
            v = self.value(idx)
            if v is None:
                hi = hi + (dim - 1) * stride
            else:
                v = np.asarray(v).astype(np.int64)
                lo, hi = lo + v * stride, hi + v * stride
        if n is None:  # to the end of the version the access starts in
            per = acc // shape[0] if buf.attrs.get("versions", 1) > 1 else acc
            return lo, (hi // per + 1) * per - 1
        return lo, hi + max(n, 1) - 1

    def paneled_span(self, buf: ir.Buffer, shape, indices, n: int | None):
        """``span`` for a tile stored as 128-byte panels, in storage order
        (``ir.layout.shared_element_offset``: a panel's rows one after another), where a copy of
        one panel is one range. An index that cannot be evaluated covers its whole version."""
        zero = np.zeros(self.threads, dtype=np.int64)
        rows, cols = shape[-2:]
        version = rows * cols
        whole = version * (shape[0] if len(shape) == 3 else 1)
        values = [None if v is None else zero + np.asarray(v).astype(np.int64)
                  for v in (self.value(i) for i in indices)]
        if len(shape) == 3 and values[0] is None:
            return zero, zero + whole - 1
        if values[-2] is None or values[-1] is None:
            base = values[0] * version if len(shape) == 3 else zero
            return base, base + version - 1
        lo = shared_element_offset(buf, values)
        if n is None:  # to the end of the version the access starts in
            per = version if buf.attrs.get("versions", 1) > 1 else whole
            return lo, (lo // per + 1) * per - 1
        return lo, lo + max(n, 1) - 1

    def elements(self, buf: ir.Buffer, nbytes) -> int | None:
        return None if not nbytes else nbytes * 8 // max(buf.dtype.bits, 1)

    def seen_of(self, key) -> np.ndarray:
        if key not in self.seen:
            self.seen[key] = np.full(self.threads, -1, dtype=np.int64)
        return self.seen[key]

    def mention(self, name: str, word: str) -> int | None:
        """The one kernel line that mentions ``name`` and ``word`` (e.g. a T.tma_copy of it)."""
        pat = re.compile(rf"\b{re.escape(name)}\b")
        hits = [i for i, t in enumerate(self.source.source) if word in t and pat.search(t)
                and not t.lstrip().startswith("#")]
        return self.source.first + hits[0] if len(hits) == 1 else None

    # ---- accesses ----------------------------------------------------------------------------
    def live(self, buf):
        """The loads into ``buf`` worth checking against (not on a deadlocked slot)."""
        return [ld for ld in self.loads if ld.buffer == buf.name and ld.key not in self.stuck]

    def read(self, stmt, buf, lo, hi, who, frame, line, what: str, store=False):
        for load in self.live(buf):
            hit = who & _overlap(lo, hi, load.lo, load.hi)
            if (hit & (self.seen_of(load.key) < load.phase)).any():
                self.read_before_landed(stmt, buf, load, frame, line, what)
        if store:
            self.stores.append(_Store(buf.name, int(lo[who].min()), int(hi[who].max()), who.copy(), line,
                                      frame.iteration))
            return
        for rec in self.reads:  # the same statement again on the same elements: one record
            both = who & rec.threads
            if rec.stmt == id(stmt) and rec.buffer == buf.name and \
                    (lo[both] == rec.lo[both]).all() and (hi[both] == rec.hi[both]).all():
                rec.lo = np.minimum(rec.lo, np.where(who, lo, rec.lo))
                rec.hi = np.maximum(rec.hi, np.where(who, hi, rec.hi))
                rec.threads, rec.iteration, rec.released = rec.threads | who, frame.iteration, {}
                return
        empty_lo, empty_hi = np.where(who, lo, _WHOLE), np.where(who, hi, -1)  # non-readers: nothing
        self.reads.append(_Read(buf.name, empty_lo, empty_hi, who.copy(), what, line, frame.iteration, id(stmt)))

    def read_before_landed(self, stmt, buf, load: _Load, frame, line, what):
        name, slot = load.key
        wait = self.last_wait.get(load.key)
        wait = wait if wait is not None and wait["seq"] > load.event["seq"] else None
        if wait is not None:
            why = (f"the wait on {name}[{slot}]{_at(wait['line'])}{_iter(wait['iteration'])} waits for "
                   f"parity {wait['parity']}, which returns on phase {wait['phase']}, before the load's phase "
                   f"{load.phase} completes")
            at, mark = wait["line"], wait
        else:
            why = f"no wait on {name}[{slot}] observes the phase the load completes (phase {load.phase}) first"
            at, mark = line, load.event
        load.reported = True
        self.report(("raw", id(stmt), load.event["stmt"]), "error", "read_before_landed",
                    f"{what} reads {buf.name}{_at(line)}{_iter(frame.iteration)} before the TMA load"
                    f"{_from(load.event['line'])}{_iter(load.event['iteration'])} has landed: {why}",
                    name, slot, frame, at, mark)

    def ordered(self, rec: _Read, issuer) -> bool:
        """Whether some arrive/wait pair orders ``rec`` (by readers other than ``issuer``)
        before what ``issuer`` does now."""
        need = rec.threads & ~issuer
        for (key, phase), arrived in rec.released.items():
            if not (need & ~arrived).any() and (self.seen_of(key)[issuer] >= phase).all():
                return True
        return False

    def store_reused(self, stmt, buf, lo, hi, frame, line, by: str):
        for st in self.stores:
            if st.buffer == buf.name and _overlap(np.asarray(lo), np.asarray(hi), st.lo, st.hi).any():
                self.report(("reuse", id(stmt), st.line), "warning", "store_source_reused",
                            f"{by} {buf.name}{_at(line)}{_iter(frame.iteration)} while the TMA "
                            f"store from it{_at(st.line)}{_iter(st.iteration)} may still be reading it: "
                            "call T.tma_store_wait(read=True) before reusing the buffer", frame=frame, line=line)

    def write(self, stmt, buf, lo, hi, who, frame, line):
        """Threads write shared elements."""
        for load in self.live(buf):
            hit = who & _overlap(lo, hi, load.lo, load.hi) & (self.seen_of(load.key) < load.phase)
            if hit.any():
                name, slot = load.key
                self.report(("waw", id(stmt), load.event["stmt"]), "error", "overwrite_in_flight",
                            f"threads write {buf.name}{_at(line)}{_iter(frame.iteration)} while the TMA load "
                            f"into it{_from(load.event['line'])}{_iter(load.event['iteration'])} may still "
                            f"be writing: wait on {name}[{slot}] for phase {load.phase} first",
                            name, slot, frame, line, load.event)
        self.store_reused(stmt, buf, lo[who], hi[who], frame, line, "threads overwrite")

    def tma_write(self, stmt, buf, lo: int, hi: int, issuer, key, phase, event, frame):
        name, slot = key
        line = event["line"]
        for rec in self.reads:
            if rec.buffer != buf.name:
                continue
            hit = rec.threads & ~issuer & _overlap(rec.lo, rec.hi, lo, hi)
            if hit.any() and not self.ordered(rec, issuer):
                self.report(("war", id(stmt), rec.line), "error", "overwrite_in_use",
                            f"the TMA load{_at(line)}{_iter(frame.iteration)} overwrites {buf.name} while "
                            f"{rec.what}{_at(rec.line)}{_iter(rec.iteration)} may still read it: no block "
                            "barrier (or arrive/wait pair) orders that read before the load is issued",
                            name, slot, frame, line, event)
        self.store_reused(stmt, buf, lo, hi, frame, line, "a TMA load overwrites")
        kept = []
        for load in self.loads:
            if load.buffer == buf.name and load.lo <= hi and load.hi >= lo:
                if load.key not in self.stuck and (self.seen_of(load.key)[issuer] < load.phase).any():
                    self.report(("tma-waw", id(stmt), load.event["stmt"]), "error", "overwrite_in_flight",
                                f"the TMA load{_at(line)}{_iter(frame.iteration)} writes {buf.name} while "
                                f"the TMA load{_from(load.event['line'])}{_iter(load.event['iteration'])} "
                                f"into the same elements has not been waited for (phase {load.phase} of "
                                f"{load.key[0]}[{load.key[1]}])", name, slot, frame, line, event)
                continue  # the newer load supersedes it
            kept.append(load)
        self.loads = kept + [_Load(buf.name, lo, hi, key, phase, issuer.copy(), event)]

    # ---- statements outside the protocol -----------------------------------------------------
    def scan(self, stmt, active, frame):
        self.visit(stmt, active, frame, frame.line)

    def visit(self, s, active, frame, line):
        if s is None or not active.any():
            return
        line = s.loc.line if getattr(s, "loc", None) is not None else line
        if isinstance(s, ir.SeqStmt):
            for c in s.stmts:
                self.visit(c, active, frame, line)
        elif isinstance(s, ir.SyncThreads):
            self.sync()
        elif isinstance(s, (ir.LetStmt, ir.Assign)):
            self.reads_in(s, s.value, active, frame, line)
            value = self.value(s.value)
            self.env[s.var] = Unknown if value is None else value
        elif isinstance(s, ir.For):
            self.reads_in(s, s.extent, active, frame, line)
            passes = 2 if self.issues_stores(s) and ir.const_int(s.extent) != 1 else 1
            for _ in range(passes):  # a second pass meets what the first iteration left behind
                self.visit(s.body, active, frame, line)
        elif isinstance(s, ir.IfThenElse):
            self.reads_in(s, s.cond, active, frame, line)
            taken = self.condition(s.cond, active)
            self.visit(s.then_body, active if taken is None else taken, frame, line)
            self.visit(s.else_body, active if taken is None else active & ~taken, frame, line)
        elif isinstance(s, ir.BufferStore):
            self.reads_in(s, s.value, active, frame, line)
            if _is_shared(s.buffer):
                lo, hi = self.span(s.buffer, s.indices)
                self.write(s, s.buffer, lo, hi, active, frame, line)
        elif isinstance(s, ir.Evaluate) and isinstance(s.call, ir.Call):
            self.call(s, s.call, active, frame, line)

    def issues_stores(self, loop) -> bool:
        if id(loop) not in self._store_loops:
            self._store_loops[id(loop)] = any(
                (c := _call_of(x)) is not None and c.name == "tw::tma_store" for x in program.preorder(loop))
        return self._store_loops[id(loop)]

    def condition(self, cond, active):
        """Threads that take the branch, or None when the condition cannot be evaluated."""
        if isinstance(cond, ir.Call):
            m = _ELECT.match(cond.name)
            if m:
                return self.sim.elect(int(m.group(1)), active)
        v = self.value(cond)
        if v is None:
            return None
        if isinstance(v, np.ndarray):
            return active & v.astype(bool)
        return active.copy() if v else np.zeros_like(active)

    def reads_in(self, stmt, expr, who, frame, line):
        for e in _subexprs(expr, into_addresses=False):
            if isinstance(e, ir.BufferLoad) and _is_shared(e.buffer):
                lo, hi = self.span(e.buffer, e.indices)
                self.read(stmt, e.buffer, lo, hi, who, frame, line, "a thread")

    def call(self, stmt, call, who, frame, line):
        name = call.name
        if name.startswith("tw::tma_store_wait"):
            self.stores = [st for st in self.stores if not (st.issuer & who).any()]
            return
        addresses = [a.args[0] for a in call.args
                     if isinstance(a, ir.Call) and a.name == "address_of" and isinstance(a.args[0], ir.BufferLoad)]
        for a in call.args:
            if isinstance(a, ir.Expr) and not (isinstance(a, ir.Call) and a.name == "address_of"):
                self.reads_in(stmt, a, who, frame, line)
        if name == "tw::tma_store":
            src = call.args[1].args[0] if isinstance(call.args[1], ir.Call) else None
            if isinstance(src, ir.BufferLoad) and _is_shared(src.buffer):
                n = self.store_elements(call, src.buffer)
                line = self.mention(src.buffer.name, "tma_copy") or self.mention(src.buffer.name, "copy") or line
                lo, hi = self.span(src.buffer, src.indices, n)
                self.read(stmt, src.buffer, lo, hi, who, frame, line, "the TMA store", store=True)
            return
        if name in _RESULT_STORES:  # 16-bit results to a shared tile (module doc)
            if addresses and _is_shared(addresses[0].buffer):
                dst = addresses[0]
                lo, hi = self.span(dst.buffer, dst.indices, _RESULT_STORES[name])
                self.write(stmt, dst.buffer, lo, hi, who, frame, line)
            return
        vec = _VEC.match(name)
        if vec:
            nbytes = int(vec.group(2))
            for i, load in enumerate(addresses):
                if not _is_shared(load.buffer):
                    continue
                lo, hi = self.span(load.buffer, load.indices, max(nbytes * 8 // max(load.buffer.dtype.bits, 1), 1))
                if i == 0:
                    self.write(stmt, load.buffer, lo, hi, who, frame, line)
                else:
                    self.read(stmt, load.buffer, lo, hi, who, frame, line, "a thread")
            return
        what = "the gemm" if "gemm" in name else f"{name}"
        for load in addresses:  # operands by address (gemm tiles): read to the end of their version
            if _is_shared(load.buffer):
                lo, hi = self.span(load.buffer, load.indices, None)
                self.read(stmt, load.buffer, lo, hi, who, frame, line, what)

    def store_elements(self, call, buf) -> int | None:
        if isinstance(call.args[0], ir.Raw):
            desc = self.sim.descriptors.get(call.args[0].text)
            if desc is None:
                return None
            n = 1
            for d in desc.box_dims:
                n *= int(d)
            return n
        return self.elements(buf, ir.const_int(call.args[2]) if len(call.args) > 2 else None)

    def sync(self):
        """``__syncthreads``: every read before it is done, and what any thread observed through
        a wait, every thread now may rely on."""
        self.reads.clear()
        for seen in self.seen.values():
            seen[:] = seen.max()

    # ---- protocol operations (from the simulation) -------------------------------------------
    def on_init(self, name, slot, frame, event, state):
        self.shadow[(name, slot)] = _Shadow(state.count)
        self.seen[(name, slot)] = np.full(self.threads, -1, dtype=np.int64)

    def on_expect(self, name, slot, who, frame, event, state, nbytes):
        sh = self.shadow.get((name, slot))
        if sh is None or sh.broken:
            return
        if sh.landing:
            sh.broken = True
            self.report(("early-reuse", event["stmt"], name, slot), "error", "slot_reused_before_wait",
                        f"expect_tx on {name}[{slot}]{_at(event['line'])}{_iter(frame.iteration)} starts a new "
                        f"use of the slot while its previous phase may still wait for TMA bytes and no thread has "
                        "waited for it: the bytes join the old phase", name, slot, frame, event["line"], event)
            return
        sh.expect += nbytes
        sh.event = sh.event or event

    def on_tma_load(self, name, slot, who, frame, event, state, stmt, call, nbytes):
        key = (name, slot)
        sh = self.shadow.get(key)
        if sh is not None and not sh.broken:
            sh.issued += event["bytes"]
            sh.event = sh.event or event
        dst = call.args[2] if isinstance(call.args[0], ir.Raw) else call.args[0]
        load = dst.args[0] if isinstance(dst, ir.Call) and dst.name == "address_of" else None
        if not isinstance(load, ir.BufferLoad) or not _is_shared(load.buffer):
            return
        lo, hi = self.span(load.buffer, load.indices, self.elements(load.buffer, nbytes))
        self.tma_write(stmt, load.buffer, int(lo[who].min()), int(hi[who].max()), who, key, state.phase,
                       event, frame)

    def on_arrive(self, name, slot, who, frame, event, state):
        key = (name, slot)
        # Whoever waits for this phase learns what the arriving threads had observed (a consumer
        # that saw a load land and then frees the slot tells the producer that waits for it).
        carried = self.carried.setdefault((key, state.phase), {})
        for other, seen in self.seen.items():
            carried[other] = max(carried.get(other, -1), int(seen[who].max()))
        for rec in self.reads:
            mine = rec.threads & who
            if mine.any():
                rec.released[(key, state.phase)] = rec.released.get((key, state.phase), False) | mine
        self.arrivals.append((event, key, who.copy()))
        sh = self.shadow.get(key)
        if sh is None or sh.broken:
            return
        n = int(who.sum())
        if sh.arrived + n > sh.count:
            if sh.expect or sh.issued:
                sh.broken = True
                self.report(("extra", event["stmt"], name, slot), "error", "extra_arrivals",
                            f"{n} threads arrive on {name}[{slot}]{_at(event['line'])}"
                            f"{_iter(frame.iteration)}, but its init count is {sh.count} and the phase already has "
                            f"{sh.arrived} arrivals while its TMA bytes may still be in flight: the extra arrivals "
                            "complete the phase before the data lands, or complete the next phase early",
                            name, slot, frame, event["line"], event)
            else:  # a count-only barrier: the simulation reports the overflow
                sh.arrived = (sh.arrived + n) % sh.count
            return
        sh.arrived += n
        if sh.arrived == sh.count and not (sh.expect or sh.issued):
            sh.reset()

    def on_wait(self, name, slot, who, frame, event, state):
        key = (name, slot)
        if event["completes"]:
            seen = self.seen_of(key)
            seen[who] = np.maximum(seen[who], state.phase - 1)
            for other, phase in self.carried.get((key, state.phase - 1), {}).items():
                known = self.seen_of(other)
                known[who] = np.maximum(known[who], phase)
            self.last_wait[key] = event
            self.loads = [ld for ld in self.loads if not (self.seen_of(ld.key) >= ld.phase).all()]
        else:
            self.blocked.append((event, key, who.copy(), _barriers.SlotState(**vars(state))))
            self.stuck.add(key)
        sh = self.shadow.get(key)
        if sh is not None and not sh.broken and sh.landing:
            self.check_bytes(key, sh, frame)
            sh.reset()

    def check_bytes(self, key, sh: _Shadow, frame=None):
        if sh.expect == sh.issued:
            return
        name, slot = key
        ev = sh.event or {}
        more = "more" if sh.expect > sh.issued else "fewer"
        self.report(("tx", ev.get("stmt"), name, slot), "error", "tx_mismatch",
                    f"expect_tx announces {sh.expect} bytes on {name}[{slot}] but the TMA loads completing on it "
                    f"deliver {sh.issued} ({more} expected than delivered): the phase "
                    + ("never completes" if sh.expect > sh.issued else "completes before all the data lands"),
                    name, slot, frame, ev.get("line"), sh.event)

    # ---- the end -------------------------------------------------------------------------------
    def finish(self):
        for key, sh in self.shadow.items():
            if not sh.broken and sh.landing:
                self.check_bytes(key, sh)
        for st in self.stores:
            self.report(("exit-store", st.line, st.buffer), "warning", "store_unwaited_at_exit",
                        f"the block exits while the TMA store from {st.buffer}{_at(st.line)}"
                        f"{_iter(st.iteration)} may still read shared memory: end with T.tma_store_wait()",
                        line=st.line)
        stuck = self.stuck
        for load in self.loads:
            if not load.reported and load.key not in stuck and (self.seen_of(load.key) < load.phase).all():
                name, slot = load.key
                self.report(("unwaited", load.event["stmt"], name, slot), "warning", "load_never_waited",
                            f"no thread ever waits for the TMA load into {load.buffer}"
                            f"{_at(load.event['line'])}{_iter(load.event['iteration'])} (phase {load.phase} of "
                            f"{name}[{slot}]): its data is never known to have landed",
                            name, slot, None, load.event["line"], load.event)
        self.explain_deadlocks()
        if self.mode == "warn":
            for f in self.sim.findings:
                if f["severity"] == "error":
                    f["severity"], f["downgraded"] = "warning", True

    def explain_deadlocks(self):
        """Give each deadlock the simulation found its cause (and make it a warning where
        threads outside the waiting ones arrive later: lockstep cannot order those)."""
        explained = set()
        for event, key, who, st in self.blocked:
            index = event.get("finding")
            if index is None or index in explained:
                continue
            explained.add(index)
            finding = self.sim.findings[index]
            cause, why = self.deadlock_cause(event, key, who, st)
            finding["cause"] = cause
            finding["message"] += f"; {why}"
            if cause == "may_complete_later":
                finding["severity"] = "warning"

    def deadlock_cause(self, event, key, who, st) -> tuple[str, str]:
        later = [(e, w) for e, k, w in self.arrivals if k == key and e["seq"] > event["seq"]]
        others = [e for e, w in later if (w & ~who).any()]
        if others:
            return "may_complete_later", (f"other threads arrive on it later in program order"
                                          f"{_at(others[0]['line'])}; the lockstep simulation cannot tell "
                                          "whether they do so before this wait would need them")
        own = [e for e, w in later if (w & who).any() and e["iteration"] == event["iteration"]
               and e["stage"] == event["stage"]]
        arrived = st.count - st.pending
        if own:
            return "own_later_arrive", (f"the arrivals it needs include the arrive{_at(own[0]['line'])}, "
                                        "which the waiting threads only reach after this wait")
        if st.pending == 0 and st.tx != 0:
            return "tx_mismatch", ("all arrivals are in but the transaction bytes do not add up: expect_tx "
                                   f"announced {abs(st.tx)} bytes {'more' if st.tx > 0 else 'fewer'} than the TMA "
                                   "loads deliver")
        if 0 < arrived < st.count:
            return "arrive_count_unreachable", (f"only {arrived} of the {st.count} arrivals its init count "
                                                "asks for are ever made before it: the count can never be reached")
        if arrived == 0 and st.phase > 0:
            return "wrong_parity", (f"phase {st.phase - 1} (parity {(st.phase - 1) % 2}) is the last to complete "
                                    f"and nothing starts phase {st.phase} before this wait: the parity is one phase "
                                    "off (in a loop, flip it every use: k % 2)")
        if arrived == 0:
            return "no_arrivals", (f"no thread arrives on {key[0]}[{key[1]}] before this wait (init count "
                                   f"{st.count}): T.tma_copy does not arrive, add T.barrier_arrive")
        return "unknown", "the protocol does not complete this phase"


def observe(sim, artifact):
    """Observer factory for :data:`barriers.OBSERVERS` (registered by ``tileworkbench``)."""
    mode = mode_of(artifact)
    if mode == "off" or not _has_async_memory(sim.func):
        return None
    return _Checker(sim, mode)


# ---- after lowering ----------------------------------------------------------------------------


def check(artifact) -> list:
    """The barrier-protocol findings of a lowered kernel (simulation and checker), whatever
    the mode; errors first, in program order."""
    sim = _barriers.simulate(artifact, observers=[lambda s, a: _Checker(s, "error")
                                                   if _has_async_memory(s.func) else None])
    return sorted(sim.findings, key=lambda f: f["severity"] != "error")


def enforce(artifact):
    """Post-lower hook: warn about suspicious barrier patterns and raise a :class:`CompileError`
    at the kernel line of the first definite bug (``tw.barrier_check``: error / warn / off).
    Reads the findings ``analysis.attach`` put in the trace (running it if it has not run)."""
    mode = mode_of(artifact)
    if mode == "off":
        return artifact
    trace = artifact.trace
    if trace.barriers is None:
        from .attach import attach

        attach(artifact)
    findings = [f for f in trace.findings if f.get("source") in CHECKED_SOURCES]
    func = artifact.func
    errors = [f for f in findings if f["severity"] == "error"]
    if not errors:  # with an error, the warnings are in the error's findings (and the trace)
        for f in findings:
            warnings.warn_explicit(TileworkbenchWarning(_message(f)), TileworkbenchWarning, func.source_file,
                                   f.get("line") or func.source_line)
    if errors:
        first = errors[0]
        more = (f" (and {len(errors) - 1} more barrier-protocol error(s) in trace.findings)"
                if len(errors) > 1 else "")
        err = CompileError(_message(first) + more + "; pass_configs={'tw.barrier_check': 'warn'} compiles it "
                           "anyway", _location(func, first.get("line")))
        err.findings = errors + [f for f in findings if f["severity"] != "error"]  # errors first
        err.trace = trace
        raise err
    return artifact


def _message(f: dict) -> str:
    parts = []
    if f.get("barrier") is not None:
        parts.append(f"{f['barrier']}[{f['slot']}]" if f.get("slot") is not None else f["barrier"])
    if f.get("iteration") is not None:
        parts.append(f"iteration {f['iteration']}")
    where = ", ".join(parts)
    return f"barrier check ({f.get('code')}{', ' + where if where else ''}): {f['message']}"


def _location(func: ir.PrimFunc, line: int | None) -> SourceLocation:
    line = line if line is not None else func.source_line  # at least the kernel's def line
    lines = KernelLines(func)
    text = lines.source[line - lines.first] if 0 <= line - lines.first < len(lines.source) else ""
    return SourceLocation(func.source_file, line, len(text) - len(text.lstrip()), text)


__all__ = ["CONFIG", "MODES", "SOURCE", "TileworkbenchWarning", "check", "enforce", "mode_of", "observe"]
