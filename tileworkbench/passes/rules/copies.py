"""How ``lower_tile_ops`` lowers ``T.copy`` and where its fills' loops come from: the loop nest
over a copy's (or fill's) extents, the largest value of an extent known only at run time with the
``i < n`` guard it needs, a fragment's whole shape as the frame of a copy or fill of it, vector
copies where alignment allows, ``cp.async`` where asked for, and the bounds checks against a
global tensor's shape (out-of-bounds loads fill zeros, out-of-bounds stores are skipped)."""

from __future__ import annotations

from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.simplify import interval, is_multiple_of, simplify
from .calls import address_of, call, needs_alignment
from .reductions import loop_nest


def global_bounds(region: ir.Region, idx, ranges: dict | None = None) -> ir.Expr | None:
    """Condition that ``idx`` lies inside a global buffer (None for other scopes): below each
    extent, and, given the ``ranges`` known where the copy runs, at or above 0 along each dimension
    whose start they do not prove non-negative (a row read from an index table, ``X[Idx[k], :]``,
    may be negative: the copy reads zeros there rather than the memory before the tensor)."""
    if region.buffer.scope != "global":
        return None
    upper = ir.within(idx, region.buffer.shape)
    if ranges is None:
        return upper
    lower = [ir.cmp(">=", i, ir.const(0, i.dtype)) for start, i in zip(region.starts, idx)
             if _may_be_negative(start, ranges)]
    return ir.logical_and(*lower, upper)


def _may_be_negative(e: ir.Expr, ranges: dict) -> bool:
    low = interval(simplify(e, ranges), ranges)[0]
    return low is None or low < 0


def extent_bounds(regions, dims, ranges, what: str, loc) -> tuple[list[int], list]:
    """For the non-unit dimensions ``dims`` of the first region: each extent's largest value and,
    where it is known only at run time, the extent itself (else None); checks that each region's
    slice stays inside a buffer that is not global: a slice of run-time extent must provably stay
    inside, one of fixed extent must not provably leave it (``s[bx]`` as the source of a
    1000-element copy out of a 1-element tile: the threads would read past the tile)."""
    first = regions[0]
    bounds, dynamic = [], []
    for d in dims:
        extent = first.extents[d]
        n = ir.const_int(extent)
        if n is None:
            n = interval(simplify(extent, ranges), ranges)[1]
            if n is None:
                raise CompileError(f"{what}: the extent {extent} has no upper bound known when the kernel is "
                                   f"compiled (it may depend on a kernel parameter); slice a tile of fixed size "
                                   f"and guard the elements you use", loc)
        bounds.append(max(n, 0))
        dynamic.append(extent if ir.const_int(extent) is None else None)
    for region in regions:
        buf = region.buffer
        if buf.scope == "global":
            continue
        fixed = all(ir.const_int(e) is not None for e in region.extents)
        for d, (start, extent, size) in enumerate(zip(region.starts, region.extents, buf.shape)):
            last = interval(simplify(start + extent, ranges), ranges)[1]
            if fixed and (last is None or ir.const_int(size) is None):
                continue  # nothing proves it leaves the buffer
            if last is None or ir.const_int(size) is None or last > ir.const_int(size):
                raise CompileError(f"{what}: the slice of {buf.name} along dimension {d} can reach element "
                                   f"{last if last is not None else '(unknown)'}, past its {size}", loc)
    return bounds, dynamic


def fragment_frame(region: ir.Region, what: str, loc) -> list[int] | None:
    """For a copy or fill of a fragment: the loop dimensions, every one of the fragment's (its
    unit ones too, so the loop nest has the fragment's shape, which partition_parallel_loops maps
    through its layout); None for other buffers. Part of a fragment is refused: each thread holds
    fixed elements of the whole."""
    if region.buffer.scope != "fragment":
        return None
    if not region.is_full:
        raise CompileError(f"{what} of part of fragment {region.buffer.name} is not supported (each thread holds "
                           f"fixed elements of the whole fragment); copy or fill the whole fragment", loc)
    return list(range(region.buffer.ndim))


def fragment_slice(part: ir.Region, other: ir.Region) -> int:
    """How many leading indices ``part`` fixes where it is one slice ``F[k, ...]`` of a fragment
    (extent 1 along them, the whole of the others) and ``other`` a whole fragment of the slice's
    shape (GQA decoding's ``T.copy(lse_local[k, :], lse_local_split)``); else 0."""
    if part.buffer.scope != "fragment" or other.buffer.scope != "fragment" or not other.is_full:
        return 0
    shape, extents = part.buffer.static_shape(), [ir.const_int(e) for e in part.extents]
    lead = len(shape) - len(other.buffer.shape)
    if lead <= 0 or any(e != 1 for e in extents[:lead]) or tuple(extents[lead:]) != tuple(shape[lead:]):
        return 0
    if any(ir.const_int(s) != 0 for s in part.starts[lead:]):
        return 0
    return lead if tuple(shape[lead:]) == tuple(other.buffer.static_shape()) else 0


def partial_fragment_copy(node: ir.Copy, ranges: dict | None = None) -> ir.Stmt | None:
    """A copy to or from part of a fragment (``T.copy(acc_o[:valid_H, :], O_shared)``, its slice of
    constant bounds): a ``T.Parallel`` loop over the whole fragment, so that
    ``partition_parallel_loops`` gives each thread its own elements, copying those inside the slice
    to or from their places on the other side (a load from outside a global tensor fills zeros, a
    store there does nothing, as a whole copy's); None where no fragment side is partial."""
    src, dst = node.src, node.dst
    part = next((r for r in (dst, src) if r.buffer.scope == "fragment" and not r.is_full), None)
    if part is None:
        return None
    other = src if part is dst else dst
    lead = fragment_slice(part, other)
    if lead:  # T.copy(lse_local[k, :], lse_split): the slice's elements, each thread its own (rules.fragments)
        def element(loop_vars):
            part_idx = tuple(part.starts[:lead]) + tuple(loop_vars)
            s_idx, d_idx = (part_idx, loop_vars) if part is src else (loop_vars, part_idx)
            return ir.BufferStore(dst.buffer, d_idx, ir.cast(ir.BufferLoad(src.buffer, s_idx, src.buffer.dtype),
                                                             dst.buffer.dtype))

        return loop_nest(other.buffer.static_shape(), element, loc=node.loc)
    starts, extents = [ir.const_int(s) for s in part.starts], [ir.const_int(e) for e in part.extents]
    if None in starts or None in extents:
        raise CompileError(f"T.copy of part of fragment {part.buffer.name}: the slice's bounds must be known when "
                           "the kernel is compiled (each thread holds fixed elements of the whole fragment)", node.loc)
    if other.buffer.scope in ("fragment", "local"):
        raise CompileError(f"T.copy between part of fragment {part.buffer.name} and the {other.buffer.scope} buffer "
                           f"{other.buffer.name} is not supported; copy through a shared tile", node.loc)
    shape = part.buffer.static_shape()
    loop_vars = [ir.Var(f"i{d}") for d in range(len(shape))]
    pairs = part.paired_dims(other)
    other_idx = list(other.starts)
    for fd, od in pairs.items():
        other_idx[od] = other.starts[od] + (loop_vars[fd] - starts[fd])
    in_slice = ir.logical_and(*[ir.logical_and(ir.cmp(">=", v, ir.const(s)), ir.cmp("<", v, ir.const(s + e)))
                               for v, s, e, n in zip(loop_vars, starts, extents, shape) if (s, e) != (0, n)])
    s_idx, d_idx = (tuple(loop_vars), tuple(other_idx)) if part is src else (tuple(other_idx), tuple(loop_vars))
    body = ir.BufferStore(dst.buffer, d_idx, ir.cast(ir.BufferLoad(src.buffer, s_idx, src.buffer.dtype), dst.buffer.dtype))
    inside_tensor = global_bounds(other, other_idx, ranges)
    if inside_tensor is not None:
        zero = None
        if other is src:  # an element of the slice whose source lies outside the tensor: zero, as a tile's
            zero = ir.BufferStore(dst.buffer, d_idx, ir.zero(dst.buffer.dtype))
        body = ir.IfThenElse(inside_tensor, body, zero)
    body = ir.IfThenElse(in_slice, body)
    for var, n in reversed(list(zip(loop_vars, shape))):
        body = ir.For(var, ir.const(n), body, "parallel", loc=node.loc)
    return body


class CopyLowering:
    def __init__(self, node: ir.Copy, ranges: dict):
        self.node, self.ranges = node, ranges
        self.src, self.dst = node.src, node.dst
        self.sdims, self.ddims = self.src.non_unit_dims(), self.dst.non_unit_dims()
        # A fragment side sets the loop nest: all its dimensions. Its non-unit ones pair up with
        # the other side's in order (the front end checked that their extents agree).
        frame_dims = fragment_frame(self.dst, "T.copy", node.loc)
        if frame_dims is not None:
            self.sdims = self.paired(self.dst, frame_dims, self.sdims)
            self.ddims = frame_dims
        elif (frame_dims := fragment_frame(self.src, "T.copy", node.loc)) is not None:
            self.ddims = self.paired(self.src, frame_dims, self.ddims)
            self.sdims = frame_dims
        # Unit dimensions dropped, the two sides' extents are the same expressions (the front end
        # checks it), so the destination's serve both.
        frame = self.dst if frame_dims is None or self.ddims is frame_dims else self.src
        dims = self.ddims if frame is self.dst else self.sdims
        self.extents, self.dynamic = extent_bounds([frame, self.src if frame is self.dst else self.dst], dims,
                                                    ranges, "T.copy", node.loc)

    @staticmethod
    def paired(fragment: ir.Region, frame_dims: list, other_dims: list) -> list:
        """The other side's dimension for each loop of a fragment's frame: its non-unit dimensions
        in order for the fragment's non-unit ones, None (index stays the start) for unit ones."""
        others = iter(other_dims)
        return [next(others) if ir.const_int(fragment.extents[d]) != 1 else None for d in frame_dims]

    def indices(self, region, dims, loop_idx):
        idx = list(region.starts)
        for d, i in zip(dims, loop_idx):
            if d is not None:
                idx[d] = region.starts[d] + i
        return tuple(idx)

    def vector_width(self) -> int:
        src, dst = self.src.buffer, self.dst.buffer
        if src.dtype != dst.dtype or (src.dtype.storage_bits < 8 and not src.dtype.packed):
            return 1
        if any(b.scope in ("fragment", "local") for b in (src, dst)) or not self.extents or any(e is not None for e in self.dynamic):
            return 1
        # packed FP4 (two values a byte) moves in whole bytes: runs of 32 values (16 bytes) down to 2 (1)
        widths = (32, 16, 8, 4, 2) if src.dtype.packed else \
            tuple(n // (src.dtype.storage_bits // 8) for n in (16, 8, 4, 2))
        for v in widths:
            if v > 1 and self.extents[-1] % v == 0 and all(
                    self.vector_ok(r, dims, v) for r, dims in ((self.src, self.sdims), (self.dst, self.ddims))):
                return v
        return 1

    @staticmethod
    def vector_ok(region: ir.Region, dims, v) -> bool:
        buf = region.buffer
        strides = buf.effective_strides()
        if not dims or dims[-1] != buf.ndim - 1 or ir.const_int(strides[-1]) != 1:
            return False
        if not is_multiple_of(region.starts[-1], v):
            return False
        # strides and a global row's length that are multiples of v: constants, or sizes a kernel is
        # compiled for as multiples (T.dynamic's aligned form: k_div8 * 8)
        if any(not is_multiple_of(s, v) for s in strides[:-1]):
            return False
        if buf.scope == "global" and not is_multiple_of(buf.shape[-1], v):
            return False
        if buf.scope == "global":
            needs_alignment(buf, v * buf.dtype.storage_bits // 8)
        return True

    def lower(self) -> ir.Stmt:
        src, dst = self.src.buffer, self.dst.buffer
        per_thread = "local" in (src.scope, dst.scope)
        v = 1 if per_thread else self.vector_width()
        if dst.packed_in_memory and v == 1 and src.scope != "fragment":
            # a thread writes a packed tile in whole bytes only: from a tile of its own kind in runs of
            # even length (here), or from a fragment in pairs of neighbours (partition_parallel_loops)
            raise CompileError(f"a copy into packed FP4 {dst.name} by threads moves whole bytes (two values): from "
                               f"{'packed FP4' if src.dtype == dst.dtype else src.dtype.name} {src.name} its region "
                               "must start and span an even number of values along the last dimension, each known "
                               "to be even when the kernel is compiled (or copy by TMA)", self.node.loc)
        loop_vars = [ir.Var(f"i{n}") for n in range(len(self.extents))]
        scaled = list(loop_vars)
        if v > 1:
            scaled[-1] = loop_vars[-1] * v
        s_idx = self.indices(self.src, self.sdims, scaled)
        d_idx = self.indices(self.dst, self.ddims, scaled)
        guard = ir.logical_and(global_bounds(self.src, s_idx, self.ranges), global_bounds(self.dst, d_idx, self.ranges))
        body = self.element(s_idx, d_idx, v, guard)
        within = within_extents(loop_vars, self.dynamic)  # past a run-time extent nothing is written
        if within is not None:
            body = ir.IfThenElse(within, body)
        extents = list(self.extents)
        if v > 1:
            extents[-1] //= v
        # a per-thread array holds all of its elements in every thread: one copied into a fragment is
        # read by each thread for the fragment's elements it holds (a loop over the fragment)
        kind = "serial" if per_thread and dst.scope != "fragment" else "parallel"
        for var, ext in reversed(list(zip(loop_vars, extents))):
            body = ir.For(var, ir.const(ext), body, kind, annotations={"vector": v} if v > 1 else {},
                          loc=self.node.loc)
        return body

    def element(self, s_idx, d_idx, v, guard) -> ir.Stmt:
        src, dst = self.src.buffer, self.dst.buffer
        nbytes = v * src.dtype.storage_bits // 8
        load_from_global = src.scope == "global"
        if self.node.instruction == "cp_async" and moves_by_cp_async(src, dst) and nbytes in (4, 8, 16):
            return call(f"tw::cp_async<{nbytes}>", address_of(dst, d_idx), address_of(src, s_idx),
                        guard if guard is not None else ir.const(True))
        if v > 1:
            body = call(f"tw::copy_vec<{nbytes}>", address_of(dst, d_idx), address_of(src, s_idx))
            zero = call(f"tw::zero_vec<{nbytes}>", address_of(dst, d_idx))
        else:
            body = ir.BufferStore(dst, d_idx, ir.cast(ir.BufferLoad(src, s_idx, src.dtype), dst.dtype))
            zero = ir.BufferStore(dst, d_idx, ir.zero(dst.dtype))
        if guard is None:
            return body
        # An out-of-bounds load still defines the tile (zeros); a store out of bounds does nothing.
        fill_zero = zero if load_from_global and dst.scope != "global" else None
        return ir.IfThenElse(guard, body, fill_zero)


def moves_by_cp_async(src: ir.Buffer, dst: ir.Buffer) -> bool:
    """Whether a copy asking for ``cp_async`` can be one: cp.async moves bytes from global to shared
    memory, so only between buffers of one element type (a copy that converts, float32 into float16,
    goes element by element). The CPU interpreter holds back the same copies until their wait."""
    return src.scope == "global" and dst.scope == "shared" and src.dtype == dst.dtype


def within_extents(loop_vars, dynamic) -> ir.Expr | None:
    """``i < n`` for each loop over an extent ``n`` known only at run time (None where none is)."""
    return ir.logical_and(*[ir.cmp("<", v, e) for v, e in zip(loop_vars, dynamic) if e is not None])


def lower_im2col(node: ir.Im2Col) -> ir.Stmt:
    """``T.im2col``'s tile in 16-byte chunks of one pixel's channels, spread over the threads like a
    copy's: ``cp.async`` (zero-filled where the pixel is padding or past the last one) in a
    software pipeline, else a vector copy or a zero chunk. The image must be 16-byte aligned (the
    launcher checks ``align_bytes``)."""
    chunk = node.chunk
    block_m, block_k = (ir.const_int(e) for e in node.dst.extents[-2:])
    i, q = ir.Var("i"), ir.Var("q")
    src_idx, inside = node.pixel(i, q * chunk)
    starts = node.dst.starts
    dst_idx = (*starts[:-2], starts[-2] + i, starts[-1] + q * chunk)
    src, dst = node.src.buffer, node.dst.buffer
    needs_alignment(src, 16)
    if node.instruction == "cp_async":
        body = call("tw::cp_async<16>", address_of(dst, dst_idx), address_of(src, src_idx), inside)
    else:
        body = ir.IfThenElse(inside, call("tw::copy_vec<16>", address_of(dst, dst_idx), address_of(src, src_idx)),
                             call("tw::zero_vec<16>", address_of(dst, dst_idx)))
    vector = {"vector": chunk}
    inner = ir.For(q, ir.const(block_k // chunk), body, "parallel", annotations=dict(vector), loc=node.loc)
    return ir.For(i, ir.const(block_m), inner, "parallel", annotations=dict(vector), loc=node.loc)

