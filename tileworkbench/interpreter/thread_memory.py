"""The memory of one thread block at the thread level.

Global tensors are the caller's numpy arrays (through a flat view in storage order, as the lowered
IR's ``.flat`` accesses index them); shared memory is one byte arena laid out as
``plan_shared_memory`` placed the buffers (``attrs["offset"]``), so buffers that share bytes share
them here too (0xff bytes, NaN, until written), a packed FP4 tile two values a byte (a nibble
read alone; written by whole bytes only, as threads write them on the GPU); a thread-local buffer is an array of the block's
threads x its elements, NaN again at each declaration. Accesses come as element offsets over the
running lanes (``act``, thread indices), each bounds-checked per dimension where the access has one
index a dimension (and a vector access of a global tensor inside its row), inside the buffer where
it is one flat offset: an out-of-bounds access of a running thread is a ``KernelRuntimeError``.
Every access goes through the race checks of ``thread_races``.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .thread_races import RaceRecords, SharedRecords
from .values import Unsupported, storage_dtype


def _strides(shape) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= int(n)
    return list(reversed(out))


class Space:
    """Where a buffer's elements live: ``kind`` global, shared or local; ``shape`` and ``strides``
    (elements) of its indices; ``extent``: elements its flat offsets may reach."""

    def __init__(self, buf: ir.Buffer, kind: str, shape, strides, extent: int, base: int = 0, array=None):
        self.buf, self.kind, self.shape, self.strides, self.extent = buf, kind, list(shape), strides, extent
        self.base, self.array = base, array  # shared: byte offset in the arena; else the elements
        self.dtype = storage_dtype(buf.dtype)
        self.itemsize = self.dtype.itemsize


class BlockMemory(RaceRecords):
    """The memory a block's threads address (module doc). ``where`` is the runner: its ``line``
    and ``describe()`` (the block) go into messages."""

    def __init__(self, func: ir.PrimFunc, arrays: dict, threads: int, where):
        self.threads, self.where = threads, where
        self.spaces: dict = {}
        self.global_writers: dict = {}  # tensor name -> block number of each element's last writer
        self.global_atomic: dict = {}
        self.block = 0
        for p in func.params:
            if isinstance(p, ir.Buffer):
                self.spaces[p.name] = self._global(p, arrays[p.name])
        end, self.shared_at = 0, {}
        shared = [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.scope == "shared"]
        for buf in shared:
            size = _shared_bytes(buf)
            at = buf.attrs.get("offset")
            self.shared_at[buf.name] = (at, size)
            if at is not None:
                end = max(end, at + size)
        for buf in shared:  # a shared buffer no plan placed: bytes of its own, after the others
            at, size = self.shared_at[buf.name]
            if at is None:
                self.shared_at[buf.name] = (end, size)
                end += size
        self.arena = np.empty(end, np.uint8)
        self.records = SharedRecords(end)

    def _global(self, p: ir.Buffer, arr: np.ndarray) -> Space:
        strides = [s // arr.itemsize for s in arr.strides]
        extent = 1 + sum((n - 1) * s for n, s in zip(arr.shape, strides)) if arr.size else 0
        if any(s < 0 for s in strides) or any(s * arr.itemsize != b for s, b in zip(strides, arr.strides)):
            raise KernelRuntimeError(f"argument {p.name}: the thread-level interpreter takes arrays of positive "
                                     "element strides")
        flat = np.lib.stride_tricks.as_strided(arr, shape=(extent,), strides=(arr.itemsize,)) if arr.size else \
            arr.reshape(-1)
        return Space(p, "global", arr.shape, strides, extent, array=flat)

    def new_block(self, number: int):
        """A fresh block: shared memory reads as NaN (0xff bytes) until written, no records."""
        self.block = number
        self.arena.fill(0xFF)
        self.records = SharedRecords(self.arena.size)
        for name in [n for n, s in self.spaces.items() if s.kind == "local"]:
            del self.spaces[name]

    # ---- declarations ------------------------------------------------------------------------
    def allocate(self, buf: ir.Buffer):
        shape = buf.static_shape()
        if buf.scope == "global" and buf.attrs.get("view_of") is not None:
            base = self.spaces[buf.attrs["view_of"].name]
            self.spaces[buf.name] = Space(buf, "global", shape, _strides(shape), base.extent, array=base.array)
        elif buf.scope == "shared":
            at, size = self.shared_at[buf.name]
            self.spaces[buf.name] = Space(buf, "shared", shape, _strides(shape), int(np.prod(shape)), base=at)
        elif buf.scope == "local":  # each thread's own, unset (NaN) at each declaration
            numel = int(np.prod(shape))
            dtype = storage_dtype(buf.dtype)
            fill = np.nan if dtype.kind == "f" or buf.dtype.is_float else 0
            self.spaces[buf.name] = Space(buf, "local", shape, _strides(shape), numel,
                                          array=np.full((self.threads, numel), fill, dtype))
        else:
            raise Unsupported(f"the thread-level interpreter does not run {buf.scope} buffers ({buf.name}){self._at()}")

    def space(self, buf: ir.Buffer) -> Space:
        found = self.spaces.get(buf.name)
        if found is None:
            raise KernelRuntimeError(f"internal: {buf.name} is used before it is declared{self._at()}")
        return found

    # ---- addresses ---------------------------------------------------------------------------
    def offsets(self, buf: ir.Buffer, indices, act: np.ndarray, n: int, what: str, within_row: bool = True):
        """(space, element offsets of the running lanes ``act``) of ``buf[indices]`` and the ``n``
        elements after it, bounds-checked: one index a dimension, each inside it (and, ``within_row``,
        a run of ``n`` inside the last dimension of a global tensor); a flat offset inside the buffer."""
        sp = self.space(buf)
        idx = [i[act] if isinstance(i, np.ndarray) and i.ndim else int(i) for i in indices]
        if len(idx) == 1 and len(sp.shape) != 1:  # a flat offset (the codegen phase's)
            off = np.asarray(idx[0], np.int64)
            self._check(sp, off, n, sp.extent, f"its {sp.extent} elements (a flat offset)", act, what)
            if sp.kind == "global" and within_row and n > 1 and sp.strides[-1] == 1 and sp.shape:
                row = np.asarray(off % max(int(sp.shape[-1]), 1))
                self._check(sp, row, n, int(sp.shape[-1]), f"its rows of {sp.shape[-1]}", act, what)
        else:
            if len(idx) != len(sp.shape):
                raise KernelRuntimeError(f"internal: {buf.name} has {len(sp.shape)} dimensions, indexed with "
                                         f"{len(idx)}{self._at()}")
            off = np.int64(0)
            for d, (i, size, stride) in enumerate(zip(idx, sp.shape, sp.strides)):
                run = n if d == len(idx) - 1 and within_row and sp.kind == "global" else 1
                self._check(sp, np.asarray(i), run, int(size), f"dimension {d} (size {size})", act, what)
                off = off + np.asarray(i, np.int64) * stride
            if n > 1:
                self._check(sp, off, n, sp.extent, f"its {sp.extent} elements", act, what)
        return sp, np.broadcast_to(np.asarray(off, np.int64), act.shape)

    def _check(self, sp: Space, i: np.ndarray, n: int, size: int, dim: str, act, what: str):
        """Indices ``i`` (of the lanes ``act``), each with the ``n`` after it, inside ``[0, size)``."""
        if not i.size:
            return
        bad = (i < 0) | (i + n > size)
        if bad.any():
            k = int(np.flatnonzero(np.broadcast_to(bad, act.shape))[0])
            value = int(np.broadcast_to(i, act.shape)[k])
            at = f"index {value}" if n == 1 else f"elements {value}..{value + n - 1}"
            raise KernelRuntimeError(f"the kernel {what} {sp.buf.name} out of bounds: {at} of {dim}, by "
                                     f"thread {int(act[k])}{self._at()}")

    def _at(self) -> str:
        return self.where.describe()

    # ---- element runs --------------------------------------------------------------------------
    def read(self, sp: Space, cols: np.ndarray, act: np.ndarray) -> np.ndarray:
        """The elements ``cols`` (lanes x n offsets) of each running lane ``act`` (storage type)."""
        if sp.kind == "local":
            return sp.array[act[:, None], cols]
        if sp.kind == "global":
            self._global_read(sp, cols, act)
            return sp.array[cols]
        if sp.buf.packed_in_memory:  # two FP4 codes a byte, the even element's in the low nibble
            pos = sp.base + cols // 2
            self._shared_read(sp, pos, act)
            return ((self.arena[pos] >> (4 * (cols % 2))) & 0xF).astype(np.uint8).view(sp.dtype)
        pos = self._bytes(sp, cols)
        self._shared_read(sp, pos, act)
        return self.arena[pos].reshape(cols.shape + (sp.itemsize,)).view(sp.dtype).reshape(cols.shape)

    def write(self, sp: Space, cols: np.ndarray, act: np.ndarray, values: np.ndarray):
        """Store ``values`` (lanes x n, storage type) at the elements ``cols`` of each running lane."""
        values = np.ascontiguousarray(np.broadcast_to(np.asarray(values, sp.dtype), cols.shape))
        if sp.kind == "local":
            sp.array[act[:, None], cols] = values
            return
        if sp.kind == "global":
            self._global_write(sp, cols, act, values)
            sp.array[cols] = values
            return
        if sp.buf.packed_in_memory:
            pos, raw = self._packed_bytes(sp, cols, act, values)
        else:
            pos = self._bytes(sp, cols)
            raw = values.view(np.uint8).reshape(pos.shape)
        self._shared_write(sp, pos, act, raw)
        self.arena[pos] = raw

    def _packed_bytes(self, sp: Space, cols: np.ndarray, act: np.ndarray, values: np.ndarray):
        """(arena byte positions, bytes) of a write of FP4 ``values`` at the elements ``cols`` of a
        packed tile: each lane's elements must make whole bytes (an even element and the next), as
        a thread writes them on the GPU; one alone is half a byte, a ``KernelRuntimeError``."""
        even, odd = cols[:, 0::2], cols[:, 1::2]
        bad = np.ones(len(cols), bool) if cols.shape[1] % 2 else ((even % 2 != 0) | (odd != even + 1)).any(axis=1)
        if bad.any():
            lane = int(np.flatnonzero(bad)[0])
            raise KernelRuntimeError(f"thread {int(act[lane])} writes half a byte of packed FP4 {sp.buf.name} "
                                     f"(elements {cols[lane].tolist()}){self._at()}")
        codes = values.view(np.uint8) & 0xF
        return sp.base + even // 2, (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)

    def _bytes(self, sp: Space, cols: np.ndarray) -> np.ndarray:
        """Arena byte positions (lanes x n*itemsize) of elements ``cols`` (lanes x n)."""
        first = sp.base + cols * sp.itemsize
        return (first[:, :, None] + np.arange(sp.itemsize)).reshape(len(cols), -1)

    # ---- atomics -----------------------------------------------------------------------------
    def atomic(self, sp: Space, off: np.ndarray, act: np.ndarray, values: np.ndarray, op, compute,
               returning: bool = False) -> np.ndarray | None:
        """``op`` (a numpy ufunc) of each lane's value into its element, one lane after another,
        each result rounded to the buffer's type (as the hardware's atomics do); with
        ``returning``, each lane's element before its update."""
        cols = off[:, None]
        if sp.kind == "local":
            raise KernelRuntimeError(f"an atomic update of the thread-local {sp.buf.name}{self._at()}")
        if sp.kind == "shared":
            pos = self._bytes(sp, cols)
            self._shared_write(sp, pos, act, None, atomic=True)
            view = self.arena[sp.base:sp.base + sp.extent * sp.itemsize].view(sp.dtype)
        else:
            self._global_write(sp, cols, act, None, atomic=True)
            view = sp.array
        if not returning and (sp.dtype in (np.float32, np.float64) or sp.dtype.kind in "iu"):
            op.at(view, off, values.astype(sp.dtype))  # integers wrap as they do
            return None
        prev = np.empty(off.size, compute)
        for k, (o, v) in enumerate(zip(off.tolist(), values.tolist())):  # 16-bit floats: rounded each time
            prev[k] = view[o]
            view[o] = np.asarray(op(compute.type(view[o]), compute.type(v))).astype(sp.dtype)
        return prev


def _shared_bytes(buf: ir.Buffer) -> int:
    """Bytes of a shared tile: packed FP4 holds two values a byte."""
    numel = int(np.prod(buf.static_shape()))
    return -(-numel // 2) if buf.packed_in_memory else numel * storage_dtype(buf.dtype).itemsize
