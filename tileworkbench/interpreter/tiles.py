"""The tile operations of the tile-level IR on the CPU, whole tiles at a time: copies (a global
tensor's outside read as zero, stores into it clipped to it; ``cp.async`` copies held back until a
``cp_async_wait`` completes their group), TMA loads and stores, fills, a gemm as a matmul in the
accumulator's type, reductions, scans. :class:`TileOps` is that part of ``machine.Runner``."""

from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError
from ..ir import nodes as ir
from ..passes.rules.copies import moves_by_cp_async
from ..passes.rules.reductions import accumulator
from .values import Unsupported, converted, evaluate, loaded, stored, tf32_rounded, tf32_truncated, uniform, unpack_int4


def shaped(values: np.ndarray, extents, name: str) -> np.ndarray:
    """``values`` in the shape ``extents``: the same elements with unit dimensions dropped or added."""
    if tuple(values.shape) == tuple(extents):
        return values
    if values.size != int(np.prod(extents)):
        raise KernelRuntimeError(f"a tile operation moves {values.size} elements into {int(np.prod(extents))} of {name}")
    return values.reshape(extents)


class TileOps:
    """Needs the runner's block ``b``."""

    def later(self, dst: ir.Region, values):
        """A cp.async copy of ``values`` into ``dst``: held back until a ``cp_async_wait``
        completes its commit group (``machine.Runner.s_Evaluate``)."""
        extents = [int(ir.const_int(e)) for e in dst.extents]
        index, part = self.b.write_index(dst, extents)
        self.b.pending.append((self.b.array(dst.buffer), index,
                               stored(shaped(values, extents, dst.buffer.name), dst.buffer.dtype)[part]))

    def s_Fill(self, s):
        starts, extents = self.b.region(s.dst)
        value = uniform(evaluate(s.value, self.b))
        if isinstance(value, np.ndarray) and value.ndim:  # a thread-local value the threads hold apart
            self.fill_per_thread(s.dst, starts, extents, value)
        else:
            self.b.write(s.dst, np.full(extents, value, dtype=np.float64))
        return
        yield

    def fill_per_thread(self, dst: ir.Region, starts: list, extents: list, value: np.ndarray):
        """``T.fill(dst, v)`` where the running threads' ``v`` differ: each thread's own copy of a
        thread-local buffer takes its own value; which thread's value lands in an element of a
        tile the threads share depends on how the fill is split among them, which the tile level
        does not decide."""
        if dst.buffer.scope != "local":
            raise Unsupported(f"the CPU interpreter fills {dst.buffer.name} ({dst.buffer.scope}) with one value "
                              "for every thread; the running threads' values differ here")
        window = (self.b.active,) + tuple(slice(a, a + n) for a, n in zip(starts, extents))
        per_thread = np.broadcast_to(value.reshape((-1,) + (1,) * len(extents)), (value.size, *extents))
        self.b.array(dst.buffer)[window] = converted(per_thread, dst.buffer.dtype)

    def s_Copy(self, s):
        values = self.b.read(s.src)
        if s.instruction == "cp_async" and moves_by_cp_async(s.src.buffer, s.dst.buffer):
            # lands when a cp_async_wait completes its group (any other copy asking for cp.async is
            # a plain one in the generated code, as here)
            self.later(s.dst, loaded(values, s.src.buffer.dtype))
            return
        if s.reduce == "add":  # a TMA reduction: each element added into its own, inside the tensor
            held = loaded(self.b.read(s.dst), s.dst.buffer.dtype)
            total = held + np.reshape(loaded(values, s.src.buffer.dtype), held.shape)
            self.b.write(s.dst, total, "the TMA reduction", keep=self.b.inside(s.dst))
            return
        # Between two global tensors the threads copy an element only where both ends lie inside
        # (a tile's zeros stand in for what lies outside a tensor; a tensor keeps what it held).
        keep = self.b.inside(s.src) if s.src.buffer.scope == s.dst.buffer.scope == "global" else None
        self.b.write(s.dst, loaded(values, s.src.buffer.dtype), keep=keep)
        return
        yield

    def s_Im2Col(self, s):
        """The image's patch tile (``ir.Im2Col.pixel`` gives each element's pixel and whether it is
        inside), zero elsewhere; cp.async tiles land at their group's wait, as copies do."""
        block_m, block_k = (int(ir.const_int(d)) for d in s.dst.buffer.shape[-2:])
        i, j = ir.Var("im2col_i"), ir.Var("im2col_j")
        (n, h, w, c), inside = s.pixel(i, j)
        rows, cols = np.meshgrid(np.arange(block_m), np.arange(block_k), indexing="ij")
        saved = {v: self.b.vars.get(v) for v in (i, j)}
        self.b.vars[i], self.b.vars[j] = rows, cols
        try:
            index = [np.asarray(evaluate(e, self.b), np.int64) for e in (n, h, w, c)]
            keep = np.asarray(evaluate(inside, self.b), bool)
        finally:
            for v, old in saved.items():
                self.b.vars.pop(v) if old is None else self.b.vars.__setitem__(v, old)
        image = self.b.array(s.src.buffer)
        safe = [np.where(keep, x, 0) for x in index]
        tile = np.where(keep, loaded(image[tuple(safe)], s.src.buffer.dtype), 0.0)
        if s.instruction == "cp_async":
            self.later(s.dst, tile)
            return
        self.b.write(s.dst, tile)
        return
        yield

    def s_TmaCopy(self, s):
        values = self.b.read(s.src)
        self.b.write(s.dst, loaded(values, s.src.buffer.dtype), "the TMA load" if s.is_load else "the TMA store")
        if s.is_load and s.barrier is not None:  # landed once the barrier's current phase completes
            slot, index = self.b.slot(s.barrier)
            starts, extents = self.b.region(s.dst)
            self.b.land(s.dst.buffer, starts, [a + n - 1 for a, n in zip(starts, extents)],
                        (s.barrier.buffer.name, index), slot.completed + 1, s.loc.line if s.loc is not None else None)
        return
        yield

    def s_Gemm(self, s):
        a = _matrix(loaded(self.b.read(s.a), s.a.buffer.dtype))
        bm = _matrix(loaded(self.b.read(s.b), s.b.buffer.dtype))
        if s.a.buffer.dtype.name == "int4x2":  # bytes of int4 values, both operands K-major
            a, bm = unpack_int4(a), unpack_int4(bm)
        a = a.T if s.trans_a else a
        bm = bm.T if s.trans_b else bm
        if s.a.buffer.dtype.name == "float32":  # tensor cores multiply float32 tiles in TF32:
            # wgmma (a plan) drops the low mantissa bits, tw::gemm_ss_tf32 (mma.sync) rounds them
            to_tf32 = tf32_truncated if s.plan is not None else tf32_rounded
            a, bm = to_tf32(a), to_tf32(bm)
        acc = {"float64": np.float64, "int32": np.int64}.get(s.c.buffer.dtype.name, np.float32)  # int8: exact sums
        c = _matrix(loaded(self.b.read(s.c), s.c.buffer.dtype)).astype(acc)
        product = a.astype(acc) @ bm.astype(acc)
        clears = s.clear_accum if isinstance(s.clear_accum, bool) else bool(np.all(evaluate(s.clear_accum, self.b)))
        self.b.write(s.c, product if clears else c + product)
        return
        yield

    def s_Reduce(self, s):
        if s.kind in _BITWISE or s.src.dtype.name == "uint64":  # the integers themselves, in the accumulator's type
            src = np.asarray(self.b.array(s.src)).astype(np.dtype(accumulator(s.src.dtype).name))
        else:
            src = loaded(self.b.array(s.src), s.src.dtype)
        fn = {"sum": np.sum, "max": np.max, "min": np.min, "abssum": lambda x, axis: np.sum(np.abs(x), axis=axis),
              "absmax": lambda x, axis: np.max(np.abs(x), axis=axis),
              **{k: op.reduce for k, op in _BITWISE.items()}}[s.kind]
        dst = self.b.array(s.dst)
        # a per-thread destination (a local array: the threads' axis first) gets the result in every thread
        shape = dst.shape[1:] if s.dst.scope == "local" else dst.shape
        axis = s.dim
        if s.segment is not None:  # runs of `segment` along the dimension, each reduced on its own
            src = src.reshape(src.shape[:axis] + (src.shape[axis] // s.segment, s.segment) + src.shape[axis + 1:])
            axis += 1
        out = np.broadcast_to(fn(src, axis=axis).reshape(shape), dst.shape)
        if not s.clear:
            old = loaded(dst, s.dst.dtype).reshape(dst.shape)
            if s.kind in _BITWISE or s.src.dtype.name == "uint64":
                old = np.asarray(dst).astype(out.dtype).reshape(dst.shape)
            out = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum,
                   "min": np.minimum, **_BITWISE}[s.kind](old, out)
        dst[...] = stored(out, s.dst.dtype)
        return
        yield

    def s_Scan(self, s):
        """Running sums (maxima) in the type the generated code keeps them in."""
        _, extents = self.b.region(s.src)
        acc = np.dtype(accumulator(s.src.buffer.dtype).name)
        values = shaped(loaded(self.b.read(s.src), s.src.buffer.dtype), extents, s.src.buffer.name).astype(acc)
        values = np.flip(values, s.dim) if s.reverse else values
        with np.errstate(over="ignore"):  # int32 sums wrap as the generated code's do
            out = np.cumsum(values, axis=s.dim, dtype=acc) if s.kind == "sum" else np.maximum.accumulate(values, axis=s.dim)
        self.b.write(s.dst, np.flip(out, s.dim) if s.reverse else out, what="a scan")
        return
        yield


_BITWISE = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}


def _matrix(x: np.ndarray) -> np.ndarray:
    dims = [n for n in x.shape if n != 1]
    return x.reshape(dims if len(dims) == 2 else (x.shape[-2], x.shape[-1]))
