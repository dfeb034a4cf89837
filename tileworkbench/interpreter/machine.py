"""One thread block of the tile-level IR, run on the CPU.

Statements run as generators: a barrier wait that cannot complete yet *yields*, so the two sides of
a warp-specialised block (``ir.WarpSpecialize``) run side by side, each up to its next blocked
wait, and a block in which every side is blocked is a deadlock (a ``KernelRuntimeError`` naming
the barrier, slot, parity, iteration and line). Tile operations run whole (numpy): copies with
TMA's zero fill outside a global tensor and its clipped stores, a gemm as a float32 matmul, reductions,
fills. A ``T.Parallel`` nest runs once for all its iterations (arrays over them); ``cp.async``
copies (and the shared stores of a nest a pipeline issues ahead, ``ir.ASYNC_COPY``) land when a
``cp_async_wait`` lets their group complete, as on the GPU, so a read before it sees the old tile;
TMA loads land at once and count towards nothing but their barrier's phase (the arrivals complete
it). Reading a tile a TMA load fills before waiting on the phase it lands with is a race: a
``KernelRuntimeError`` naming the read's line and the load's (``races``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from .races import RaceRecords
from .sides import Blocked, Side, run_sides
from .thread_copies import ThreadCopies, land
from .tiles import TileOps, shaped
from .updates import update_all, update_in_turn, vars_after_branch
from .values import (Unsupported, compute_dtype, converted, evaluate, held, loaded, print_lines, storage_dtype, stored,
                     uniform)

_NO_OPS = ("tw::fence_proxy_async", "tw::fence_barrier_init", "tw::schedule_fence")


@dataclass
class AtGridBarrier:
    """Why a block stopped: it reached a ``T.sync_grid`` (the line), where it waits for the others."""

    line: int | None


@dataclass
class Slot:
    """One mbarrier: its arrival count, the arrivals of its current phase, the phases completed."""

    count: int
    arrived: int = 0
    completed: int = 0


@dataclass
class Block(RaceRecords):
    """The state of one block: its buffers (``arrays``), barriers, variables and pending copies."""

    func: ir.PrimFunc
    globals_: dict
    block_index: tuple
    hw: dict = field(default_factory=dict)  # "(int)blockIdx.x" and the like -> this block's value
    vars: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    barriers: dict = field(default_factory=dict)  # barrier buffer -> [Slot]
    groups: list = field(default_factory=list)  # committed cp.async groups: [(dst array, index, values)]
    pending: list = field(default_factory=list)  # cp.async copies not committed yet
    thread_copies: list = field(default_factory=list)  # ir.ThreadCopy runs not landed yet (thread_copies)
    mask: np.ndarray | None = None  # inside a T.Parallel nest under an `if`: the iterations it holds for
    active: np.ndarray | None = None  # the threads running the code (their indices)
    in_parallel: int = 0  # depth of T.Parallel nests around the code
    async_copy: bool = False  # inside a nest a pipeline issues ahead (ir.ASYNC_COPY): its shared stores are cp.async
    in_flight: list = field(default_factory=list)  # TMA loads (InFlight) not known to have landed everywhere
    seen: dict = field(default_factory=dict)  # (barrier, slot) -> phases the running side has waited for
    # (barrier, slot, phase) -> what the sides arriving in that phase had waited for: a wait on the
    # phase learns it too (an arrival releases, a wait acquires: FlashMLA's consumer sees the loads
    # another scope waited for through that scope's own barrier)
    carried: dict = field(default_factory=dict)
    line: int | None = None  # the line of the statement running
    side: object = "block"  # who runs the code: the block, a role, a T.ws scope
    readers: list = field(default_factory=list)  # races.Access records: reads of shared boxes
    writers: list = field(default_factory=list)  # races.Access records: threads' writes of shared boxes
    loops: list = field(default_factory=list)  # (name, value) of the serial loops around

    # ---- memory --------------------------------------------------------------------------------
    def array(self, buf: ir.Buffer) -> np.ndarray:
        found = self.arrays.get(buf)
        if found is None:
            found = self.globals_.get(buf.name)
        if found is None:
            raise KernelRuntimeError(f"internal: the interpreter has no memory for {buf.name}")
        return found

    def per_thread(self, buf: ir.Buffer, indices, reading: bool = False) -> list:
        """A local buffer is each thread's own (a leading dimension over the block's threads): the
        running threads' copies (inside ``T.Parallel``, a read of one every thread holds alike)."""
        if buf.scope != "local":
            return list(indices)
        if self.in_parallel and reading:
            copies = self.array(buf)[self.active]
            first = copies[:1]
            same = (copies == first) | (np.isnan(copies) & np.isnan(first)) if copies.dtype.kind == "f" else \
                copies == first
            if same.all():
                return [int(self.active[0])] + list(indices)
        if self.in_parallel:
            raise Unsupported(f"the CPU interpreter does not run a thread-local buffer ({buf.name}) inside "
                              "T.Parallel yet: which thread runs which iteration is decided after the tile passes")
        return [self.active] + [np.broadcast_to(i, self.active.shape) if isinstance(i, np.ndarray) else i
                                for i in indices]

    def load(self, buf: ir.Buffer, indices):
        arr = self.array(buf)
        indices = self.per_thread(buf, indices, reading=True)
        idx = tuple(np.asarray(i, dtype=np.int64) if isinstance(i, np.ndarray) else int(i) for i in indices)
        if len(idx) == 1 and arr.ndim > 1:  # a flat index into a tile (T.Tensor views)
            arr = arr.reshape(-1)
        taken = self.taken_lanes(idx)
        reached = idx
        if taken is not None:  # the lanes a condition leaves out read the first element instead
            if not taken.any():
                return np.zeros(taken.shape, compute_dtype(buf.dtype))
            idx = tuple(np.broadcast_to(i, taken.shape) if isinstance(i, np.ndarray) else i for i in idx)
            reached = [i[taken] if isinstance(i, np.ndarray) else i for i in idx]
            idx = tuple(np.where(taken, i, 0) if isinstance(i, np.ndarray) else i for i in idx)
        self._check_bounds(buf, arr.shape, reached, "reads")
        if buf.scope == "shared":
            lo, hi = _box(reached)
            if self.in_flight:
                self.check_landed(buf, lo, hi)
            self.reading(buf, lo, hi)
        value = loaded(arr[idx], buf.dtype)
        return uniform(value) if buf.scope == "local" else value

    def taken_lanes(self, idx):
        """Under an ``if`` (or a ``?:`` side) that holds for some lanes: which lanes read, a mask
        of the lanes' shape; None where every lane does (or the indices are not over those lanes)."""
        if self.mask is None or self.mask.all():
            return None
        try:
            shape = np.broadcast_shapes(*[np.shape(i) for i in idx], self.mask.shape)
        except ValueError:
            return None
        return np.broadcast_to(self.mask, shape) if shape == self.mask.shape else None

    def store(self, buf: ir.Buffer, indices, value, loc=None):
        arr = self.array(buf)
        indices = self.per_thread(buf, indices)
        idx = [np.asarray(i, dtype=np.int64) if isinstance(i, np.ndarray) else int(i) for i in indices]
        if len(idx) == 1 and arr.ndim > 1:
            arr = arr.reshape(-1)
        if buf.scope == "local" and not isinstance(value, np.ndarray):
            value = np.broadcast_to(value, self.active.shape)  # every running thread stores it
        if any(isinstance(i, np.ndarray) for i in idx) or isinstance(value, np.ndarray) or self.mask is not None:
            # (under an ``if`` of T.Parallel iterations even an element every iteration names:
            # stored by those where it holds, and by none where it holds for none)
            idx, value = self.targets(idx, value)
        idx = tuple(idx)
        self._check_bounds(buf, arr.shape, idx, "writes", loc)
        if buf.scope == "shared" and self.async_copy:  # lands when a cp_async_wait completes its group
            self.pending.append((arr, idx, stored(value, buf.dtype)))
            return
        if buf.scope == "shared":
            box = _box(idx)
            if self.readers:
                self.writing(buf, *box, "the threads' store")
            self.written(buf, *box)
        arr[idx] = stored(value, buf.dtype)

    def call_hook(self, e: ir.Call):
        """The calls whose value this interpreter works out itself: an atomic update's (the
        element's value before it, ``T.atomic_add(..., return_prev=True)``), the running threads'
        updates made one after another in thread order; else NotImplemented."""
        if e.name not in ir.ATOMIC_UPDATES:
            return NotImplemented
        if self.in_parallel:
            raise Unsupported("the CPU interpreter runs an atomic update's returned value in code each thread "
                              "runs, not in T.Parallel")
        target = e.args[0].args[0]
        n = self.active.size
        idx = [np.broadcast_to(np.asarray(evaluate(i, self), np.int64), (n,)) for i in target.indices]
        value = np.broadcast_to(np.asarray(evaluate(e.args[1], self)), (n,))
        arr = self.array(target.buffer)
        self._check_bounds(target.buffer, arr.shape, tuple(idx), "updates", None)
        return update_in_turn(arr, target.buffer, e.name, idx, value)

    def targets(self, idx: list, value):
        """The elements many iterations or threads write at once and their values: indices and
        values broadcast to one shape, kept where the ``if`` around them holds (``mask``)."""
        masks = () if self.mask is None else (self.mask.shape,)
        shape = np.broadcast_shapes(*[np.shape(i) for i in idx], np.shape(value), *masks)
        idx = [np.broadcast_to(np.asarray(i, np.int64), shape) for i in idx]
        value = np.broadcast_to(value, shape)
        if self.mask is not None:
            keep = np.broadcast_to(self.mask, shape)
            idx, value = [i[keep] for i in idx], value[keep]
        return idx, value

    def _check_bounds(self, buf, shape, idx, what, loc=None):
        for d, (i, n) in enumerate(zip(idx, shape)):
            if isinstance(i, np.ndarray) and not i.size:
                continue
            lo, hi = (int(np.min(i)), int(np.max(i))) if isinstance(i, np.ndarray) else (i, i)
            if lo < 0 or hi >= n:
                raise KernelRuntimeError(f"the kernel {what} {buf.name} out of bounds: index {lo if lo < 0 else hi} "
                                         f"of dimension {d} (size {n}){_at(loc)}")

    def region(self, r: ir.Region):
        """(starts, extents) of a region as ints."""
        starts = [uniform(evaluate(s, self)) for s in r.starts]
        if any(isinstance(s, np.ndarray) for s in starts):
            raise Unsupported(f"the CPU interpreter runs tile operations on one region at a time; {r.buffer.name}'s "
                              "origin differs between threads here")
        return [int(s) for s in starts], [int(ir.const_int(e)) for e in r.extents]

    def read(self, r: ir.Region) -> np.ndarray:
        """A region's elements (a global tensor's outside its shape read as zero; of a thread-local
        buffer, the running threads' copies, when they agree)."""
        arr = self.array(r.buffer)
        if r.buffer.scope == "shared":
            starts, extents = self.region(r)
            last = [s + n - 1 for s, n in zip(starts, extents)]
            if self.in_flight:
                self.check_landed(r.buffer, starts, last)
            self.reading(r.buffer, starts, last)
        if r.buffer.scope == "local":
            starts, extents = self.region(r)
            tiles = arr[self.active][(slice(None),) + tuple(slice(s, s + n) for s, n in zip(starts, extents))]
            if not (tiles == tiles[:1]).all():
                raise Unsupported(f"the CPU interpreter moves a thread-local tile ({r.buffer.name}) only where every "
                                  "thread holds the same one yet")
            return tiles[0]
        starts, extents = self.region(r)
        out = np.zeros(extents, dtype=arr.dtype)
        src, dst = _clipped(starts, extents, arr.shape)
        out[dst] = arr[src]
        return out

    def write_index(self, r: ir.Region, shape):
        """(index into the array, index into a value of ``shape``) of a region write, clipped to
        a global tensor's shape (TMA's stores and copies drop what lies outside)."""
        arr = self.array(r.buffer)
        starts, extents = self.region(r)
        if r.buffer.scope != "global":
            for d, (s, n, size) in enumerate(zip(starts, extents, arr.shape)):
                if s < 0 or s + n > size:
                    raise KernelRuntimeError(f"a tile operation writes {r.buffer.name} out of bounds (dimension "
                                             f"{d}: {s}..{s + n - 1} of {size})")
        return _clipped(starts, extents, arr.shape)

    def inside(self, r: ir.Region) -> np.ndarray:
        """Which elements of a region lie inside its tensor's shape (a mask of the region's shape)."""
        starts, extents = self.region(r)
        keep = np.zeros(extents, bool)
        keep[_clipped(starts, extents, self.array(r.buffer).shape)[1]] = True
        return keep

    def write(self, r: ir.Region, values: np.ndarray, what: str = "a tile copy", keep=None):
        """Store ``values`` into region ``r`` (only where ``keep``, a mask of the values, holds)."""
        extents = [int(ir.const_int(e)) for e in r.extents]
        values = shaped(values, extents, r.buffer.name)
        if r.buffer.scope == "local":  # every running thread's copy
            starts, _ = self.region(r)
            window = (self.active,) + tuple(slice(s, s + n) for s, n in zip(starts, extents))
            self.array(r.buffer)[window] = converted(values, r.buffer.dtype)
            return
        dst, src = self.write_index(r, extents)
        if r.buffer.scope == "shared":
            starts, _ = self.region(r)
            last = [a + n - 1 for a, n in zip(starts, extents)]
            if self.readers:
                self.writing(r.buffer, starts, last, what)
            if what != "the TMA load":  # (a TMA load's readers wait for it to land: ``check_landed``)
                self.written(r.buffer, starts, last)
        as_stored = converted(values, r.buffer.dtype)[src]
        if keep is None:
            self.array(r.buffer)[dst] = as_stored
        else:
            mask = shaped(keep, extents, r.buffer.name)[src]
            self.array(r.buffer)[dst][mask] = as_stored[mask]

    # ---- barriers ------------------------------------------------------------------------------
    def slot(self, ref: ir.BarrierRef) -> tuple[Slot, int]:
        index = evaluate(ref.index, self)
        if isinstance(index, np.ndarray):
            values = np.unique(index)
            if values.size != 1:
                raise Unsupported("the CPU interpreter runs barrier operations of one slot at a time")
            index = values[0]
        slots = self.barriers.get(ref.buffer)
        if slots is None:
            raise KernelRuntimeError(f"internal: the barrier {ref.buffer.name} is used before it is allocated")
        return slots[int(index)], int(index)

    def threads(self) -> int:
        return int(self.active.size)


def _parallel_nest(loop: ir.For) -> list:
    """A ``T.Parallel`` loop and the parallel loops directly inside it, outermost first."""
    loops = [loop]
    while isinstance(loops[-1].body, ir.For) and loops[-1].body.kind == "parallel":
        loops.append(loops[-1].body)
    return loops


def _at(loc) -> str:
    return f" at line {loc.line}" if loc is not None and loc.line else ""


def _clipped(starts, extents, shape) -> tuple[tuple, tuple]:
    """(index into the array, index into the region) of the part of a region inside ``shape``:
    what a copy reads or writes of a global tensor (empty slices where none of it is)."""
    array, region = [], []
    for s, n, size in zip(starts, extents, shape):
        lo, hi = max(s, 0), min(s + n, size)
        hi = max(hi, lo)
        array.append(slice(lo, hi))
        region.append(slice(lo - s, hi - s))
    return tuple(array), tuple(region)


def _box(idx) -> tuple[list, list]:
    """The lowest and highest index an access reaches in each dimension."""
    return ([int(np.min(i)) if isinstance(i, np.ndarray) else i for i in idx],
            [int(np.max(i)) if isinstance(i, np.ndarray) else i for i in idx])


class Runner(ThreadCopies, TileOps):
    """Runs statements on a :class:`Block` (generators: see the module doc)."""

    def __init__(self, block: Block):
        self.b = block

    def run(self, s):
        if s is None:
            return
        if s.loc is not None and s.loc.line:
            self.b.line = s.loc.line
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise Unsupported(f"the CPU interpreter does not run {type(s).__name__} statements yet{_at(s.loc)}")
        yield from method(s)

    # ---- structure -----------------------------------------------------------------------------
    def s_SeqStmt(self, s):
        for x in ir.scope_runs(s.stmts):
            if isinstance(x, ir.ScopeRun):  # scopes of different threads: side by side
                b = self.b
                yield from run_sides(self, [Side(self, ir.seq(scopes), (b.active >= first) & (b.active < first + n),
                                                  label=b.side) for (first, n), scopes in x.sides])
            else:
                yield from self.run(x)

    def s_Comment(self, s):
        yield from ()

    def s_Allocate(self, s):
        buf = s.buffer
        if buf.scope == "barrier":
            self.b.barriers[buf] = [Slot(int(c)) for c in buf.attrs["counts"]]
            return
        if buf.scope == "global" and buf.attrs.get("view_of") is not None:
            base = self.b.globals_[buf.attrs["view_of"].name]
            self.b.arrays[buf] = base.reshape(-1)[:int(np.prod(buf.static_shape()))].reshape(buf.static_shape())
            return
        dtype = storage_dtype(buf.dtype)
        shape = tuple(buf.static_shape())
        if buf.scope == "shared":
            # Memory a kernel has not written reads as all-ones bytes, as at the thread level: NaN
            # for floats, -1 (or the largest value) for integers, so a wrong read shows in the result.
            self.b.arrays[buf] = np.full(shape + (dtype.itemsize,), 0xFF, np.uint8).view(dtype).reshape(shape)
            return
        fill = np.nan if dtype.kind == "f" or buf.dtype.is_float else 0  # a thread's own: NaN or 0, as there
        if buf.scope == "local":  # each thread's own
            shape = (self.b.func.launch.total_threads,) + shape
        self.b.arrays[buf] = np.full(shape, fill, dtype=dtype)
        return
        yield

    def s_LetStmt(self, s):
        self.b.vars[s.var] = uniform(held(evaluate(s.value, self.b), s.var.dtype))
        return
        yield

    s_Assign = s_LetStmt

    def s_For(self, s):
        if s.kind == "parallel":
            yield from self.parallel(s)
            return
        start, extent = (uniform(evaluate(bound, self.b)) for bound in (s.start, s.extent))
        if isinstance(start, np.ndarray) or isinstance(extent, np.ndarray):
            raise Unsupported(f"the CPU interpreter runs loops whose bounds every thread shares{_at(s.loc)}")
        for v in range(int(start), int(start) + int(extent)):
            self.b.vars[s.var] = v
            loops = self.b.loops  # this side's (run_sides swaps them; a closed generator pops its own)
            loops.append((s.var.name, v))
            try:
                yield from self.run(s.body)
            finally:
                loops.pop()

    def s_While(self, s):
        while True:
            c = uniform(evaluate(s.cond, self.b))
            if isinstance(c, np.ndarray):
                raise Unsupported(f"the CPU interpreter runs while loops whose condition every thread shares{_at(s.loc)}")
            if not c:
                return
            yield from self.run(s.body)

    def parallel(self, s):
        loops = _parallel_nest(s)
        extents = [int(evaluate(loop.extent, self.b)) for loop in loops]
        if min(extents) <= 0:  # no iteration: nothing runs, not even a store that names no loop index
            return
        starts = [int(evaluate(loop.start, self.b)) for loop in loops]
        grids = np.meshgrid(*[np.arange(st, st + n) for st, n in zip(starts, extents)], indexing="ij")
        saved = self.b.mask
        for loop, g in zip(loops, grids):
            self.b.vars[loop.var] = g.reshape(-1)
        self.b.mask = None if saved is None else np.broadcast_to(saved, grids[0].reshape(-1).shape)
        self.b.in_parallel += 1
        self.b.async_copy = bool(s.annotations.get(ir.ASYNC_COPY))
        try:
            yield from self.run(loops[-1].body)
        finally:
            self.b.mask, self.b.async_copy = saved, False
            self.b.in_parallel -= 1

    def s_IfThenElse(self, s):
        c = evaluate(s.cond, self.b)
        if not isinstance(c, np.ndarray):
            yield from self.run(s.then_body if c else s.else_body)
            return
        c = c.astype(bool)
        if self.b.in_parallel:  # a condition per T.Parallel iteration
            saved = self.b.mask
            base = np.ones(c.shape, bool) if saved is None else np.broadcast_to(saved, c.shape)
            self.b.mask = base & c
            try:
                yield from self.run(s.then_body)
                if s.else_body is not None:
                    self.b.mask = base & ~c
                    yield from self.run(s.else_body)
            finally:
                self.b.mask = saved
            return
        yield from self.threads_where(c, s.then_body)  # a condition per thread (`if tx < 288`)
        if s.else_body is not None:
            yield from self.threads_where(~c, s.else_body)

    def threads_where(self, keep, body):
        if not keep.any():
            return
        b = self.b
        saved_active, saved_vars = b.active, dict(b.vars)
        for var, value in b.vars.items():
            if isinstance(value, np.ndarray) and value.shape == saved_active.shape and b.mask is None:
                b.vars[var] = value[keep]
        entry = dict(b.vars)
        b.active = saved_active[keep]
        try:
            yield from self.run(body)
        finally:
            b.active = saved_active
            b.vars = vars_after_branch(saved_vars, entry, b.vars, keep, masked=b.mask is not None)

    def s_ThreadScope(self, s):
        b = self.b
        keep = (b.active >= s.first) & (b.active < s.first + s.count)
        if not keep.any():
            return
        b.vars[s.var] = b.active[keep] - s.first
        outer, b.side = b.side, ("ws", s.first, s.count)
        try:
            yield from self.threads_where(keep, s.body)
        finally:
            b.side = outer

    def s_WarpSpecialize(self, s):
        b = self.b
        sides: list = []
        for body, lo, hi in ((s.producer, s.consumer_threads, s.consumer_threads + s.producer_threads),
                             (s.consumer, 0, s.consumer_threads)):
            sides.append(Side(self, body, (b.active >= lo) & (b.active < hi)))
        yield from run_sides(self, sides)

    # ---- scalar statements ---------------------------------------------------------------------
    def s_BufferStore(self, s):
        value = evaluate(s.value, self.b)
        self.b.store(s.buffer, [evaluate(i, self.b) for i in s.indices], value, s.loc)
        return
        yield

    def s_Evaluate(self, s):
        call = s.call
        name = call.name if isinstance(call, ir.Call) else None
        if name == ir.GRID_SYNC:  # the kernel runs the grid's blocks side by side up to it (CpuKernel)
            yield AtGridBarrier(s.loc.line if s.loc is not None else None)
            return
        if name in ir.ATOMIC_UPDATES:
            self.atomic(call, s.loc)
        elif name == ir.CP_ASYNC_COMMIT:
            self.b.groups.append(self.b.pending)
            self.b.pending = []
        elif (n := ir.cp_async_waited(name or "")) is not None:
            while len(self.b.groups) > n:
                for arr, dst, values in self.b.groups.pop(0):
                    arr[dst] = values
        elif name == ir.PRINT:
            for line in print_lines(call, self.b):
                print(line)
        elif name == ir.SYNCWARP:  # the threads run in lockstep: only who runs it is checked (values.py)
            evaluate(call, self.b)
        elif name in _NO_OPS or ir.wgmma_waited(name or "") is not None or ir.max_registers_set(name or ""):
            pass
        else:
            raise Unsupported(f"the CPU interpreter does not run the call {name or call}{_at(s.loc)}")
        return
        yield

    def atomic(self, call, loc):
        target = call.args[0].args[0]
        arr = self.b.array(target.buffer)
        name = ir.ATOMIC_ADD if ir.atomic_lanes(call.name) > 1 else call.name
        first = [evaluate(i, self.b) for i in target.indices]
        for k, amount in enumerate(call.args[1:]):  # a vector atomic: its neighbours along the last dimension
            indices = first[:-1] + [first[-1] + k]
            idx, value = self.b.targets(indices, evaluate(amount, self.b))
            self.b._check_bounds(target.buffer, arr.shape, tuple(idx), "updates", loc)
            update_all(arr, target.buffer, name, tuple(idx), value)

    def s_SyncThreads(self, s):
        # Its threads' reads are done: a block barrier orders every side's, one inside a T.ws scope
        # or a role (a barrier of their threads) that side's. Writes: only a block barrier orders
        # a side's before another side's reads.
        b = self.b
        b.readers = [] if b.side == "block" else [r for r in b.readers if r.side != b.side]
        if b.side == "block" and s.threads is None:
            b.writers = []
        return
        yield

    def s_TmaStoreWait(self, s):
        return
        yield

    def s_BarrierArrive(self, s):
        if s.after_copies:
            land(self.b)
        slot, index = self.b.slot(s.barrier)
        self.b.arrived((s.barrier.buffer.name, index), slot.completed + 1)
        known = self.b.carried.setdefault((s.barrier.buffer.name, index, slot.completed + 1), {})
        for k, phase in self.b.seen.items():
            known[k] = max(known.get(k, 0), phase)
        slot.arrived += self.b.threads()
        if slot.arrived > slot.count:
            raise KernelRuntimeError(f"{s.barrier.buffer.name}: {slot.arrived} arrivals on a barrier of count "
                                     f"{slot.count}{_at(s.loc)}")
        if slot.arrived == slot.count:
            slot.completed += 1
            slot.arrived = 0
        return
        yield

    def s_BarrierWait(self, s):
        slot, index = self.b.slot(s.barrier)
        parity = evaluate(s.parity, self.b)
        parity = int(np.unique(parity)[0]) if isinstance(parity, np.ndarray) else int(parity)
        while slot.completed % 2 == parity:  # the phase of that parity has not completed yet
            yield Blocked(s.barrier.buffer.name, index, parity, s.loc.line if s.loc is not None else None,
                          tuple(self.b.loops))
        key = (s.barrier.buffer.name, index)
        self.b.seen[key] = max(self.b.seen.get(key, 0), slot.completed)
        for k, phase in self.b.carried.get((*key, slot.completed), {}).items():
            self.b.seen[k] = max(self.b.seen.get(k, 0), phase)
