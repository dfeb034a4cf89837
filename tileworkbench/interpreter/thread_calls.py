"""The calls of the final lowered IR at the thread level: what ``thread_block.ThreadBlock`` runs
besides plain statements, and what it refuses.

Vector copies ``tw::copy_vec<N>`` / ``tw::zero_vec<N>`` (naturally aligned: a misaligned one is a
``KernelRuntimeError``, as the GPU's fault; between packed FP4 tiles and tensors ``2N`` values),
pair stores ``tw::store_pair*`` (two neighbouring results rounded to the destination's type, one
aligned store: for packed FP4 one byte, so a pair starting at an odd value is an error), ``cp.async`` with its commit groups and waits
(``thread_async_copies``), atomic updates (one lane after another, each rounded),
warp shuffles (``__shfl_sync``, ``_xor``, ``_down``, ``_up``: lanes of a warp are ``tx % 32`` of
the threads in lockstep; every lane the mask names must run the shuffle, and the lane read must
be one that runs it), ``tw::shuffle_elect<N>`` (lane 0 of each group's first warp), and TMA
stores with their waits: a bulk store (``tma_store(dst, src, bytes)``) or a tensor store through a
descriptor of ``func.attrs["tma_descriptors"]`` (``tma_store(desc, src, c0, c1, ...)``,
coordinates innermost first; the elements of its box outside the tensor are not written). A
tensor store reads the box (its dimensions of more than one element) from the tile at the
address's element along the tile's last dimensions where the address has one index a dimension (the lowered IR's logical indices), else as
one run from a flat offset (the codegen phase's, panels resolved); the swizzle both the threads'
accesses and TMA apply cancels out, so neither models it. ``refusal`` names, before anything
runs, what a kernel holds that is none of these (wgmma, mma.sync, TMA loads, mbarriers, other
calls).
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from ..ir.visitor import collect
from ..passes.rules.result_stores import PAIR_STORES
from .random import Generators
from .thread_async_copies import is_async_copy_call
from .values import Unsupported, compute_dtype, evaluate, loaded, print_lines, storage_dtype, stored
from .warp_votes import vote

_VECTOR = re.compile(r"^tw::(copy|zero)_vec<(\d+)>$")
_PAIR_STORES = frozenset(PAIR_STORES.values())  # two neighbouring results in one store
_NO_OPS = ("tw::fence_proxy_async", "tw::tma_store_arrive", "tw::schedule_fence")
_ATOMIC = {ir.ATOMIC_ADD: np.add, "atomicMax": np.maximum, "atomicMin": np.minimum,
           "tw::atomic_max": np.maximum, "tw::atomic_min": np.minimum,
           **{vector: np.add for vector in ir.ATOMIC_ADD_VECTORS.values()}}
WARP = 32

# What the unsupported calls are, by a part of their names (first match).
_KINDS = (("grid_sync", "grid barriers (T.sync_grid; the tile-level interpreter runs them)"), ("wgmma", "wgmma"),
          ("tw::gemm_", "mma.sync"), ("mma", "mma.sync"), ("ldmatrix", "ldmatrix"),
          ("store_matrix", "stmatrix"), ("tma_load", "TMA loads"),
          ("barrier", "mbarriers"), (".init", "mbarriers"), ("arrive", "mbarriers"))
_RUNS = {"SeqStmt", "Comment", "Allocate", "LetStmt", "Assign", "BaseOffset", "For", "While", "IfThenElse",
         "BufferStore", "SyncThreads", "Evaluate", "ThreadScope"}


def refusal(func: ir.PrimFunc) -> str | None:
    """What in ``func`` the thread-level interpreter does not run, named with its first line (by
    kind: wgmma, mma.sync, TMA loads, mbarriers ...); None if it runs all of it."""
    found: dict = {}

    line = [None]  # the line of the nearest statement before that has one (lowered calls have none)

    def note(kind: str, what: str, loc):
        found.setdefault(kind, f"{what}{f' at line {line[0]}' if line[0] else ''}")

    for st in collect(func.body, ir.Stmt):
        if st.loc is not None and st.loc.line:
            line[0] = st.loc.line
        name = type(st).__name__
        if name not in _RUNS:
            note("mbarriers" if "Barrier" in name else name, name, st.loc)
        elif isinstance(st, ir.Evaluate) and isinstance(st.call, ir.Call):
            call = st.call.name
            if not (_VECTOR.match(call) or call in _ATOMIC or call in _PAIR_STORES or call in _NO_OPS or call == ir.SYNCWARP
                    or is_async_copy_call(call)
                    or ir.is_tma_store_issue(call) or call in (ir.PRINT, ir.RNG_INIT)
                    or call.startswith("tw::tma_store_wait<")):
                note(next((k for part, k in _KINDS if part in call), call), call, st.loc)
        elif isinstance(st, ir.Allocate) and st.buffer.scope == "barrier":
            note("mbarriers", st.buffer.name, st.loc)
        elif isinstance(st, ir.For) and st.kind == "parallel":
            note("T.Parallel loops", "T.Parallel", st.loc)
    if not found:
        return None
    return "the thread-level interpreter does not run " + ", ".join(f"{k} ({w})" for k, w in found.items())


def _literal(e: ir.Raw) -> int:
    """An integer literal of C++ text (a shuffle's mask, ``0xffffffffu``)."""
    try:
        return int(e.text.rstrip("uUlL"), 0)
    except ValueError:
        raise Unsupported(f"the thread-level interpreter does not evaluate the C++ text {e.text!r}") from None


class Calls:
    """The calls (module doc), a part of ``ThreadBlock``."""

    def call_hook(self, e: ir.Call):
        if e.name in ir.SHUFFLES:
            return self.shuffle(e)
        if e.name in _ATOMIC:  # `prev = atomicAdd(...)`: each running thread's element before its update
            prev = np.zeros(self.threads, compute_dtype(e.args[0].args[0].buffer.dtype))
            prev[self.act] = self.atomic(e, returning=True)
            return prev
        if (group := ir.elected_group(e.name)) is not None:  # lane 0 of each group's first warp (tw/common.h)
            return self.lanes % group == 0
        if e.name == ir.RNG_INIT or e.name in ir.RNG_DRAWS:
            return self.random(e)
        if e.name == ir.THREAD_INDEX:  # %tid.x read again (passes/reread_thread_index.py)
            return self.lanes
        if e.name in ir.VOTES:
            return self.spread(self.warp_vote(e), self.act)
        return NotImplemented

    def warp_vote(self, call: ir.Call) -> np.ndarray:
        act = self.act
        args = [np.broadcast_to(np.asarray(evaluate(a, self)), self.lanes.shape)[act] for a in call.args]
        return vote(call.name, act, args, self.threads, self.describe())

    def random(self, e: ir.Call):
        """``T.rng_init`` (returns nothing) or a draw: the running threads' generators (``random.Generators``)."""
        if self.generators is None:
            self.generators = Generators(self.threads)
        act = self.act
        if e.name == ir.RNG_INIT:
            self.generators.init(act, *(evaluate(a, self) for a in e.args))
            return 0
        values = getattr(self.generators, e.name.removeprefix("tw_rng."))(act)
        return self.spread(values.astype(compute_dtype(e.dtype)), act)

    def shuffle(self, e: ir.Call):
        args = [_literal(a) if isinstance(a, ir.Raw) else evaluate(a, self) for a in e.args]
        member, value, arg = int(args[0]) & 0xFFFFFFFF, args[1], args[2]
        width = int(args[3]) if len(args) > 3 else WARP
        t, act = self.lanes, self.act
        lane = t % WARP
        group = lane - lane % width
        arg = np.asarray(arg, np.int64)
        if e.name == ir.SHFL_SYNC:
            src, own = group + arg % width, np.zeros_like(t, bool)
        elif e.name == ir.SHFL_XOR_SYNC:
            src = lane ^ arg
            own = src >= group + width
        elif e.name == ir.SHFL_DOWN_SYNC:
            src = lane + arg
            own = lane % width + arg >= width
        else:
            src = lane - arg
            own = lane % width < arg
        source = np.where(own, t, t - lane + src)
        running = np.zeros(self.threads + WARP, bool)
        running[act] = True
        reads = source[act]
        bad = (reads < 0) | ~running[np.clip(reads, 0, self.threads)]
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise KernelRuntimeError(f"{e.name}: thread {int(act[k])} reads lane {int(reads[k]) % WARP} of its warp, "
                                     f"whose thread does not run the shuffle{self.describe()}")
        self._check_converged(e.name, member, act, running)
        value = np.broadcast_to(np.asarray(value), t.shape)
        return value[np.clip(source, 0, self.threads - 1)]

    def _check_converged(self, name: str, member: int, act: np.ndarray, running: np.ndarray):
        """Every lane the shuffle's mask names, of each warp running it, runs it too."""
        warps = np.unique(act // WARP)
        lanes = np.array([b for b in range(WARP) if member >> b & 1], np.int64)
        need = (warps[:, None] * WARP + lanes[None, :]).ravel()
        need = need[need < self.threads]
        missing = need[~running[need]]
        if missing.size:
            raise KernelRuntimeError(f"{name} with mask {member:#x}: thread {int(missing[0])} of a warp running it "
                                     f"does not run it{self.describe()}")

    # ---- calls -----------------------------------------------------------------------------------
    def s_Evaluate(self, s):
        call = s.call
        name = call.name if isinstance(call, ir.Call) else None
        if name is None:
            raise Unsupported(f"the thread-level interpreter does not run {call}{self.describe()}")
        m = _VECTOR.match(name)
        if m:
            self.vector_copy(call, int(m.group(2)), m.group(1) == "zero")
        elif name in _ATOMIC:
            self.atomic(call)
        elif name in _PAIR_STORES:
            self.pair_store(call)
        elif name == ir.SYNCWARP:  # lanes in lockstep: only who runs it is checked
            self.warp_vote(call)
        elif ir.is_tma_store_issue(name):
            self.tma_store(call, adds=name != ir.TMA_STORE)
        elif name.startswith("tw::tma_store_wait<"):
            self.mem.tma_waited(self.act)
        elif name == ir.PRINT:
            for line in print_lines(call, self, lambda v: np.broadcast_to(v, self.lanes.shape)[self.act]):
                print(line)
        elif name == ir.RNG_INIT:
            self.random(call)
        elif is_async_copy_call(name):
            self.async_copy(call)
        elif name not in _NO_OPS:
            raise Unsupported(f"the thread-level interpreter does not run {name}{self.describe()}")

    def pointer(self, arg, nbytes: int | None, what: str, within_row: bool = True):
        """(space, element offsets of the running threads, elements) of ``address_of(buf[...])``
        and the ``nbytes`` after it (None: one element)."""
        if not (isinstance(arg, ir.Call) and arg.name == "address_of" and isinstance(arg.args[0], ir.BufferLoad)):
            raise Unsupported(f"the thread-level interpreter takes addresses only as address_of(buffer[...]), not "
                              f"{arg}{self.describe()}")
        load = arg.args[0]
        size = storage_dtype(load.buffer.dtype).itemsize
        n = 1 if nbytes is None else 2 * nbytes if load.buffer.dtype.packed else nbytes // size  # FP4: two a byte
        if nbytes is not None and nbytes % size:
            raise KernelRuntimeError(f"{nbytes} bytes are no whole number of {load.buffer.name}'s elements"
                                     f"{self.describe()}")
        indices = [evaluate(i, self) for i in load.indices]
        sp, off = self.mem.offsets(load.buffer, indices, self.act, n, what, within_row)
        return sp, off, n

    def vector_copy(self, call, nbytes: int, zero: bool):
        act = self.act
        dst, d_off, dn = self.pointer(call.args[0], nbytes, "writes")
        ends = [(dst, d_off)]
        if not zero:
            src, s_off, sn = self.pointer(call.args[1], nbytes, "reads")
            ends.append((src, s_off))
        for sp, off in ends:
            self.aligned(sp, off, nbytes, act)
        if dst.buf.dtype.packed:  # FP4 values, one an element here, between packed tiles and tensors
            if not (zero or src.buf.dtype.packed):
                raise Unsupported(f"a vector copy between packed FP4 {dst.buf.name} and {src.buf.name}{self.describe()}")
            values = np.zeros((act.size, dn), dst.dtype) if zero else self.mem.read(src, s_off[:, None] + np.arange(sn), act)
            self.mem.write(dst, d_off[:, None] + np.arange(dn), act, values)
            return
        if zero:
            raw = np.zeros((act.size, nbytes), np.uint8)
        else:
            raw = np.ascontiguousarray(self.mem.read(src, s_off[:, None] + np.arange(sn), act)).view(np.uint8)
        self.mem.write(dst, d_off[:, None] + np.arange(dn), act, raw.reshape(act.size, nbytes).view(dst.dtype))

    def pair_store(self, call):
        """``tw::store_pair*(&out[i], lo, hi)`` (``rules.result_stores``): ``lo`` and ``hi`` rounded
        to ``out``'s type into elements ``i`` and ``i + 1`` with one store of both (for packed FP4
        one byte), aligned to its size as the GPU needs."""
        out = call.args[0].args[0].buffer
        nbytes = 1 if out.dtype.packed else 2 * storage_dtype(out.dtype).itemsize
        sp, off, _ = self.pointer(call.args[0], nbytes, "writes")
        act = self.act
        self.aligned(sp, off, nbytes, act)
        pair = [np.broadcast_to(np.asarray(evaluate(v, self)), self.lanes.shape)[act] for v in call.args[1:3]]
        values = np.stack([stored(v, out.dtype) for v in pair], axis=-1)
        self.mem.write(sp, off[:, None] + np.arange(2), act, values)

    def aligned(self, sp, off: np.ndarray, nbytes: int, act: np.ndarray):
        """A vector access of ``nbytes`` at each running thread's element ``off`` of ``sp`` is naturally
        aligned (a global tensor's start is: the launcher checks it); else the GPU's fault, here a
        ``KernelRuntimeError``."""
        if sp.buf.dtype.packed and (off % 2).any():  # two FP4 values a byte: an access starts at an even one
            k = int(np.flatnonzero(off % 2)[0])
            raise KernelRuntimeError(f"a {nbytes}-byte access of packed FP4 {sp.buf.name} at element {int(off[k])}, "
                                     f"half a byte in, by thread {int(act[k])}{self.describe()}")
        address = (sp.base if sp.kind == "shared" else 0) + (off // 2 if sp.buf.dtype.packed else off * sp.itemsize)
        if sp.kind != "local" and (address % nbytes).any():
            k = int(np.flatnonzero(address % nbytes)[0])
            raise KernelRuntimeError(f"a {nbytes}-byte vector access of {sp.buf.name} at element {int(off[k])} "
                                     f"(byte {int(address[k])}) is not {nbytes}-byte aligned, by thread "
                                     f"{int(act[k])}{self.describe()}")

    def atomic(self, call, returning: bool = False) -> np.ndarray | None:
        """The update, by the running threads one after another in thread order; with
        ``returning``, each one's element before its own update (what ``atomicAdd`` returns)."""
        lanes = ir.atomic_lanes(call.name)  # a vector atomic: its neighbours, one after another
        sp, off, _ = self.pointer(call.args[0], 4 * lanes if lanes > 1 else None, "updates")
        act = self.act
        op = _ATOMIC[ir.ATOMIC_ADD if lanes > 1 else call.name]
        if lanes > 1 and np.any(np.asarray(off) % lanes):
            raise KernelRuntimeError(f"{call.name} at an address that is not a multiple of {4 * lanes} bytes"
                                     f"{self.describe()}")
        prev, dtype = None, sp.buf.dtype
        for k, amount in enumerate(call.args[1:]):
            value = evaluate(amount, self)
            value = np.broadcast_to(np.asarray(value), self.lanes.shape)[act] if np.ndim(value) else \
                np.full(act.size, value)
            prev = self.mem.atomic(sp, np.asarray(off) + k, act, np.asarray(stored(loaded(value, dtype), dtype)), op,
                                   compute_dtype(dtype), returning)
        return prev

    def tma_store(self, call, adds: bool = False):
        """A bulk store (``tma_store(dst, src, bytes)``) or a tensor store through a descriptor
        (``tma_store(desc, src, c0, c1, ...)``, coordinates innermost first; what lies outside the
        tensor is not written), by each running thread (the elected one); ``adds``: a reduction
        (``tma_store_add``), each element added into its own atomically."""
        for issuer in self.act.tolist():
            saved = self.mask
            self.mask = self.lanes == issuer
            try:
                if isinstance(call.args[0], ir.Raw):
                    self._tensor_store(call, issuer, adds)
                else:
                    self._bulk_store(call, issuer, adds)
            finally:
                self.mask = saved

    def _bulk_store(self, call, issuer: int, adds: bool):
        nbytes = int(self.uniform(evaluate(call.args[2], self)))
        src, s_off, sn = self.pointer(call.args[1], nbytes, "TMA-stores from", within_row=False)
        dst, d_off, dn = self.pointer(call.args[0], nbytes, "TMA-stores to", within_row=False)
        ends = {src.buf.name: src.base + int(s_off[0]) * src.itemsize, dst.buf.name: int(d_off[0]) * dst.itemsize}
        for name, byte in ends.items():  # cp.async.bulk: 16-byte aligned addresses and size
            if byte % 16 or nbytes % 16:
                raise KernelRuntimeError(f"a bulk TMA store of {nbytes} bytes at byte {byte} of {name}: addresses "
                                         f"and size must be multiples of 16{self.describe()}")
        values = self.mem.tma_read(src, s_off[:, None] + np.arange(sn), issuer)
        raw = np.ascontiguousarray(values).view(np.uint8).reshape(1, nbytes)
        land(self.mem, dst, d_off[:, None] + np.arange(dn), issuer, raw.view(dst.dtype), adds)

    def _tensor_store(self, call, issuer: int, adds: bool):
        desc = self.descriptors.get(call.args[0].text)
        if desc is None:
            raise Unsupported(f"the thread-level interpreter has no TMA descriptor {call.args[0].text}{self.describe()}")
        tensor_store(self, desc, call, issuer, adds)


def land(mem, sp, cols: np.ndarray, issuer: int, values: np.ndarray, adds: bool):
    """A TMA store's elements ``cols`` (1 x n) of global ``sp`` written by ``issuer``, or each
    added atomically into its element (a reduction)."""
    if not adds:
        mem.write(sp, cols, np.array([issuer]), values)
        return
    flat = np.asarray(cols).ravel()
    mem.atomic(sp, flat, np.full(flat.size, issuer), np.asarray(values).ravel(), np.add, compute_dtype(sp.buf.dtype))


def _int(block, value) -> int:
    v = evaluate(value, block) if isinstance(value, ir.Expr) else value
    u = block.uniform(v)
    if u is None:
        raise Unsupported(f"a TMA store whose coordinates differ between threads{block.describe()}")
    return int(u)


def tensor_store(block, desc, call, issuer: int, adds: bool = False):
    mem = block.mem
    rank, box = desc.rank, [int(b) for b in desc.box_dims]
    if any(int(s) != 1 for s in desc.element_strides) or desc.interleave:
        raise Unsupported(f"the thread-level interpreter runs TMA stores of element stride 1, no interleave "
                          f"({desc.name}){block.describe()}")
    gsp = mem.spaces[desc.buffer]
    dims = [_int(block, d) for d in desc.global_dims]
    strides = [1] + [_int(block, s) // gsp.itemsize for s in desc.global_strides_bytes]
    have_dims, have_strides = list(reversed(gsp.shape))[:rank], list(reversed(gsp.strides))[:rank]
    if dims != [int(d) for d in have_dims] or any(s != h for s, h, d in zip(strides, have_strides, dims) if d > 1):
        raise KernelRuntimeError(f"the TMA descriptor {desc.name} describes {desc.buffer} as dimensions {dims} with "
                                 f"strides {strides} (innermost first), the tensor has {have_dims} and "
                                 f"{have_strides}{block.describe()}")
    coords = [_int(block, c) for c in call.args[2:]]
    if len(coords) != rank:
        raise KernelRuntimeError(f"a TMA store through {desc.name} (rank {rank}) with {len(coords)} coordinates"
                                 f"{block.describe()}")
    src = call.args[1]
    if not (isinstance(src, ir.Call) and src.name == "address_of" and isinstance(src.args[0], ir.BufferLoad)):
        raise Unsupported(f"a TMA store from {src}{block.describe()}")
    load = src.args[0]
    sp, off = mem.offsets(load.buffer, [evaluate(i, block) for i in load.indices], block.act, 1, "TMA-stores from")
    base = int(off[0])
    shape = list(reversed(box))  # outermost first, as the tile holds it
    grid = np.indices(shape).reshape(rank, -1)  # box element coordinates, outermost first
    # the box's dimensions of more than one element, outermost first (a unit one adds nothing:
    # a (1, rows, 1, cols) box of a (batch, seq, heads, dim) tensor is a rows x cols tile)
    wide = [d for d, n in enumerate(shape) if n > 1]
    if len(load.indices) == len(sp.shape) and len(sp.shape) >= len(wide):  # a window of the logical tile
        tile_strides = sp.strides[len(sp.strides) - len(wide):]
        cols = base + sum(grid[d] * s for d, s in zip(wide, tile_strides))
    else:  # a run from a flat offset
        cols = base + np.arange(grid.shape[1])
    if cols.min() < 0 or cols.max() >= sp.extent:
        raise KernelRuntimeError(f"a TMA store's box {box} reads past the end of {sp.buf.name}{block.describe()}")
    if sp.itemsize != gsp.itemsize:
        raise KernelRuntimeError(f"a TMA store from {sp.buf.name} ({sp.dtype}) to {desc.buffer} ({gsp.dtype})"
                                 f"{block.describe()}")
    values = mem.tma_read(sp, cols, issuer)
    g = [c + grid[rank - 1 - k] for k, c in enumerate(coords)]  # innermost first
    inside = np.all([(x >= 0) & (x < d) for x, d in zip(g, dims)], axis=0)
    if not inside.any():
        return
    goff = sum(x[inside] * s for x, s in zip(g, strides))
    raw = np.ascontiguousarray(values[inside]).view(np.uint8).view(gsp.dtype)
    land(mem, gsp, goff[None, :], issuer, raw[None, :], adds)
