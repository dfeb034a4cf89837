"""One thread block of the final lowered IR, its threads in lockstep.

Each statement runs once for all the block's threads: a per-thread value (the thread index, what
is computed from it, a thread-local element) is a numpy vector over the threads, a value every
thread shares a scalar (``values.evaluate`` computes both, as the generated CUDA does). Code under
a per-thread condition (``if tx < 64``, a guard, the elected thread of a TMA store), a loop whose
trip count differs between threads, or a side of a ``?:`` runs on the threads it holds for: the
``mask``; the others neither read nor write memory nor count for races. A ``LetStmt`` binds for the
rest of its body (a C declaration's scope), an ``Assign`` changes the running threads' values only.
Loops (serial, unrolled, vectorised; the codegen phase's loop forms, a do-while running once at
least), ``While``, branches, stores, declarations and ``T.sync_threads()`` (which every thread must
reach: else a hang on the GPU, a ``KernelRuntimeError`` here) run here; calls in ``thread_calls``,
memory in ``thread_memory``.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from .random import Generators
from .thread_async_copies import AsyncCopies
from .thread_calls import Calls
from .thread_memory import BlockMemory
from .values import Unsupported, compute_dtype, evaluate, held, loaded, stored

_MISSING = object()


class ThreadBlock(Calls, AsyncCopies):
    """Runs the statements of one block (module doc); the environment ``values.evaluate`` reads."""

    def __init__(self, func: ir.PrimFunc, memory: BlockMemory, block_index: tuple, hw: dict):
        self.func, self.mem, self.block_index, self.hw = func, memory, block_index, hw
        self.threads = func.launch.total_threads
        self.lanes = np.arange(self.threads, dtype=np.int64)
        self.vars: dict = {func.launch.thread_var: self.lanes}
        self.mask: np.ndarray | None = None  # the threads running the code (None: all)
        self._act_of, self._act = None, self.lanes
        self.frames: list[dict] = [{}]  # per body: the variables it declared, and what they hid
        self.descriptors = {d.name: d for d in func.attrs.get("tma_descriptors", [])}
        self.line: int | None = None
        self.generators: Generators | None = None  # the threads' random numbers, from the first T.rng_init
        self.held: list = []  # cp.async copies issued, not landed (thread_async_copies.HeldCopies)
        self.committed = np.zeros(self.threads, np.int64)  # each thread's closed cp.async groups

    # ---- the environment of values.evaluate ----------------------------------------------------
    @property
    def act(self) -> np.ndarray:
        """The indices of the running threads."""
        m = self.mask
        if m is None:
            return self.lanes
        if m is not self._act_of:
            self._act_of, self._act = m, np.flatnonzero(np.broadcast_to(m, self.lanes.shape))
        return self._act

    def describe(self) -> str:
        line = f" at line {self.line}" if self.line else ""
        return f"{line} (block {self.block_index})"

    def load(self, buf: ir.Buffer, indices):
        act = self.act
        if not act.size:
            return np.zeros(self.threads, compute_dtype(buf.dtype))
        sp, off = self.mem.offsets(buf, indices, act, 1, "reads")
        values = loaded(self.mem.read(sp, off[:, None], act)[:, 0], buf.dtype)
        if sp.kind != "local" and not any(isinstance(i, np.ndarray) and i.ndim for i in indices):
            return values[0]  # one element every thread reads alike
        return self.spread(values, act)

    def spread(self, values: np.ndarray, act: np.ndarray) -> np.ndarray:
        """Values of the running lanes as a vector over all threads (the others zero)."""
        if act.size == self.threads:
            return values
        out = np.zeros(self.threads, values.dtype)
        out[act] = values
        return out

    # ---- statements ----------------------------------------------------------------------------
    def run(self, s):
        if s is None:
            return
        if s.loc is not None and s.loc.line:
            self.line = s.loc.line
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            what = "tile operation" if isinstance(s, ir.TILE_OPS) else "statement"
            raise Unsupported(f"the thread-level interpreter does not run the {what} {type(s).__name__}"
                              f"{self.describe()}")
        method(s)

    def body(self, s):
        """``s`` as a C block: what it declares goes out of scope at its end."""
        self.frames.append({})
        try:
            self.run(s)
        finally:
            self.leave()

    def leave(self):
        """The end of a C block: its declarations go, what they hid comes back."""
        for var, old in self.frames.pop().items():
            if old is _MISSING:
                self.vars.pop(var, None)
            else:
                self.vars[var] = old

    def declare(self, var: ir.Var, value):
        frame = self.frames[-1]
        if var not in frame:
            frame[var] = self.vars.get(var, _MISSING)
        self.vars[var] = value

    def with_mask(self, mask, s):
        """``s`` run (as a C block) by the threads ``mask`` holds for."""
        saved = self.mask
        self.mask = mask
        try:
            self.body(s)
        finally:
            self.mask = saved

    def s_SeqStmt(self, s):
        for x in s.stmts:
            self.run(x)

    def s_Comment(self, s):
        pass

    def s_Allocate(self, s):
        if s.buffer.scope == "barrier":
            raise Unsupported(f"the thread-level interpreter does not run mbarriers ({s.buffer.name}){self.describe()}")
        self.mem.allocate(s.buffer)

    def s_LetStmt(self, s):
        self.declare(s.var, held(evaluate(s.value, self), s.var.dtype))

    def s_Assign(self, s):
        value = held(evaluate(s.value, self), s.var.dtype)
        if self.mask is None:
            self.vars[s.var] = value
        else:
            merged = np.where(self.mask, value, self.vars[s.var])
            self.vars[s.var] = merged.astype(compute_dtype(s.var.dtype), copy=False)

    def s_BaseOffset(self, s):
        if not isinstance(s.target, ir.Var):
            raise Unsupported(f"the thread-level interpreter does not run a pointer BaseOffset ({s.buffer.name})"
                              f"{self.describe()}")
        self.declare(s.target, evaluate(s.offset, self))

    def uniform(self, value):
        """``value`` as one scalar where the running threads agree on it; else None."""
        if isinstance(value, np.ndarray) and value.ndim:
            mine = value[self.act]
            return mine[0] if mine.size and (mine == mine[0]).all() else None
        return value

    def s_For(self, s):
        if s.kind == "parallel":
            raise Unsupported(f"a T.Parallel loop is left in the lowered IR{self.describe()}")
        start = evaluate(s.start, self)
        form = s.form
        extent = evaluate(form.end, self) - start if form is not None else evaluate(s.extent, self)
        once = form is not None and form.at_least_once
        self.frames.append({})
        try:
            first, count = self.uniform(start), self.uniform(extent)
            if first is not None and count is not None:
                for v in range(int(first), int(first) + max(int(count), 1 if once else 0)):
                    self.declare(s.var, v)
                    self.body(s.body)
            else:  # trip counts that differ between threads: each runs its own
                outer = np.ones(self.threads, bool) if self.mask is None else self.mask
                count = np.broadcast_to(extent, self.lanes.shape)
                if once:
                    count = np.maximum(count, 1)
                for it in range(int(count[self.act].max())):
                    self.declare(s.var, np.broadcast_to(start, self.lanes.shape) + it)
                    self.with_mask(outer & (it < count), s.body)
        finally:
            self.leave()  # the loop variable

    def s_While(self, s):
        saved = self.mask
        try:
            while True:
                c = evaluate(s.cond, self)
                if not (isinstance(c, np.ndarray) and c.ndim):
                    if not c:
                        return
                else:
                    held = np.asarray(c, bool) if self.mask is None else self.mask & c
                    if not held[self.act].any():
                        return
                    self.mask = held
                self.body(s.body)
        finally:
            self.mask = saved

    def s_IfThenElse(self, s):
        c = evaluate(s.cond, self)
        if not (isinstance(c, np.ndarray) and c.ndim):
            self.body(s.then_body if c else s.else_body)
            return
        c = np.asarray(c, bool)
        mine = c[self.act]
        if mine.all():
            self.body(s.then_body)
        elif not mine.any():
            self.body(s.else_body)
        else:
            base = np.ones(self.threads, bool) if self.mask is None else self.mask
            self.with_mask(base & c, s.then_body)
            if s.else_body is not None:
                self.with_mask(base & ~c, s.else_body)

    def s_BufferStore(self, s):
        value = evaluate(s.value, self)
        indices = [evaluate(i, self) for i in s.indices]
        act = self.act
        sp, off = self.mem.offsets(s.buffer, indices, act, 1, "writes")
        v = np.asarray(stored(value, s.buffer.dtype))
        v = np.broadcast_to(v, self.lanes.shape)[act] if v.ndim else np.full(act.size, v)
        self.mem.write(sp, off[:, None], act, v[:, None])

    def s_SyncThreads(self, s):
        if s.threads is not None:  # a named barrier of the threads running here (a scope's)
            if self.act.size != s.threads:
                raise KernelRuntimeError(f"a barrier of {s.threads} threads is reached by {self.act.size}"
                                         f"{self.describe()}: it never completes (a hang on the GPU)")
            members = np.zeros(self.threads, bool)
            members[self.act] = True
            self.mem.barrier(members)
            return
        if self.act.size != self.threads:
            raise KernelRuntimeError(f"T.sync_threads() is reached by {self.act.size} of the block's {self.threads} "
                                     f"threads{self.describe()}: the others never arrive (a hang on the GPU)")
        self.mem.barrier()

    def s_ThreadScope(self, s):
        """The block's threads ``[first, first + count)`` run the body, ``s.var`` their index in it."""
        inside = (self.lanes >= s.first) & (self.lanes < s.first + s.count)
        base = np.ones(self.threads, bool) if self.mask is None else self.mask
        self.frames.append({})
        try:
            self.declare(s.var, self.lanes - s.first)
            self.with_mask(base & inside, s.body)
        finally:
            self.leave()

