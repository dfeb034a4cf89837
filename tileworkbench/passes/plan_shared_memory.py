"""plan_shared_memory: place every shared buffer and barrier in the block's dynamic shared memory.

Expects: lowered IR whose shared buffers (with their pipeline versions) and barrier arrays are
declared by ``Allocate`` statements.
Guarantees: ``buffer.attrs["offset"]`` (bytes from the start of dynamic shared memory) and
``attrs["align"]`` on each of them; swizzled tiles aligned to 1024 bytes (the TMA swizzle pattern
is defined on address bits), other tiles to 128 (TMA destinations), barriers to 8;
``func.attrs["smem_bytes"]`` is the total and ``func.attrs["smem_plan"]`` the list of entries.
A plan over the device limit (227 KB on sm_90) is a ``CompileError`` listing the buffers.

Reuse: the pipeline's versioned tiles live only while their pipelined loop runs (the pipelining
passes reject any use outside it). A shared buffer first used by a top-level statement after
the last one that touches them (the epilogue's ``C_shared``, say) is placed over them instead
of after them, and a block barrier (with an async-proxy fence: wgmma and TMA used those bytes)
is put before its first use unless one is already there. Its plan entry names the buffers it
shares bytes with (``shares_with``). A buffer marked ``attrs["reuses_pipeline_tiles"]`` (the
warp-specialised epilogue tile) is placed over them too; the pass that made it put the barrier.

Scratch tiles (``ir.SCRATCH``: a reduction's, each used only by the statements after its
allocation, the first of them a block barrier) all go at one offset where the kernel would not
fit otherwise: any two uses of them are apart by the barrier that starts the later one, so sharing
bytes is safe (mHC's backward sums seven 32 KB tiles). Not in a kernel with ``T.ws`` or warp
specialisation, whose barriers are its scopes' only. Each entry names the others (``shares_with``).

Lifetimes, the last resort (TileLang's merging of shared allocations): where the kernel still would
not fit, each shared buffer lives from the first top-level statement that uses it to the last, and
buffers whose lives do not overlap are placed over each other (largest first, each at the lowest
offset clear of the buffers alive with it). Before the first use of a buffer that takes bytes
another used earlier, a block barrier with an async-proxy fence is put unless one stands between
the two. The source of a TMA store, which may still be read after its statement, lives to the end; a
buffer no statement uses, the whole kernel.
Not in a kernel with ``T.ws`` scopes, where top-level order is not time order; in one split at its
top level by ``warp_specialize`` (one ``WarpSpecialize``), the statements are the consumers' in
their order (``_Timeline``), the tiles the producer fills alive from the split to the consumers'
last use of them (it loads ahead; their last wait is for its last copy), and the barrier before
reused bytes the consumers' own (``bar.sync 1``: the producer never meets a block barrier). A
split ``warp_specialize`` sized by lifetime (``shares_bytes``) that does not fit here raises
``SplitDoesNotFit``: ``jit.lower`` compiles the kernel again without the split.
Kernels that fit keep the plans above, byte for byte.
"""

from __future__ import annotations

import dataclasses

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register

SMEM_LIMIT = {"sm_90a": 232448, "sm_100a": 232448, "sm_80": 166912, "sm_89": 101376}


class SplitDoesNotFit(CompileError):
    """A warp-specialised kernel whose split ``warp_specialize`` sized by lifetime does not fit as
    placed here: ``jit.lower`` compiles it again without the split."""


def smem_limit(arch: str) -> int:
    """Dynamic shared memory one block may use on ``arch`` (bytes)."""
    return SMEM_LIMIT.get(arch, 232448)


def _align_of(buf: ir.Buffer) -> int:
    if buf.scope == "barrier":
        return 8
    return max(1024 if buf.attrs.get("swizzle", 0) else 128, buf.attrs.get("align_for_views", 0))


def _size_of(buf: ir.Buffer) -> int:
    return buf.dtype.bytes_for(buf.numel)


def _top_level_uses(body) -> tuple[list, dict]:
    """The top-level statements and, per buffer, the indices of those that use it."""
    stmts = ir.statements(body)
    uses: dict = {}
    for i, s in enumerate(stmts):
        if isinstance(s, ir.Allocate):
            continue
        for buf in collect(s, ir.Buffer):
            uses.setdefault(id(buf), []).append(i)
    return stmts, uses


def _reuse_after_pipeline(body, buffers) -> tuple[list, list, ir.Stmt]:
    """(pipeline tiles, buffers placed over them, body with the barrier they need)."""
    stmts, uses = _top_level_uses(body)
    tiles = [b for b in buffers if b.scope == "shared" and b.attrs.get("versions", 1) > 1 and id(b) in uses]
    if not tiles:
        return [], [], body
    end = max(max(uses[id(b)]) for b in tiles)
    placed = [b for b in buffers if b.attrs.get("reuses_pipeline_tiles")]  # its pass put the barrier
    late = [b for b in buffers if b.scope == "shared" and b.attrs.get("versions", 1) == 1 and id(b) in uses
            and min(uses[id(b)]) > end and b not in placed]
    if not late:
        return tiles, placed, body
    first = min(min(uses[id(b)]) for b in late)
    if not any(isinstance(s, ir.SyncThreads) and s.threads is None for s in stmts[end + 1:first]):
        stmts = stmts[:first] + [ir.Evaluate(ir.Call("tw::fence_proxy_async", ())), ir.SyncThreads()] + stmts[first:]
    return tiles, placed + late, ir.seq(stmts)


def _place_at(buf: ir.Buffer, offset: int, align: int, plan: list, shares_with=None) -> None:
    """``buf`` at ``offset``, and its plan entry."""
    buf.attrs["offset"], buf.attrs["align"] = offset, align
    entry = {"name": buf.name, "kind": "barrier" if buf.scope == "barrier" else "buffer",
             "dtype": buf.dtype.name, "shape": list(buf.static_shape()),
             "versions": buf.attrs.get("versions", 1), "offset": offset, "size_bytes": _size_of(buf),
             "align": align, "swizzle": buf.attrs.get("swizzle", 0)}
    if shares_with:
        entry["shares_with"] = [b.name for b in shares_with]
    plan.append(entry)


def _place(buffers, start: int, plan: list, shares_with=None) -> int:
    offset = start
    for buf in sorted(buffers, key=lambda b: -_align_of(b)):  # stable: big alignments first, less padding
        align = _align_of(buf)
        offset = -(-offset // align) * align
        _place_at(buf, offset, align, plan, shares_with)
        offset += _size_of(buf)
    return offset


def _has_roles(func: ir.PrimFunc, body) -> bool:
    """Whether the kernel's threads play roles (``T.ws`` scopes, warp specialisation): its block
    barriers are then its scopes' only and its top-level order is not time order, so neither the
    scratch pool nor the lifetime plan is safe."""
    return bool(collect(body, (ir.ThreadScope, ir.WarpSpecialize))) or \
        bool((func.attrs.get("warp_specialized") or {}).get("applied"))


def _scratch_pool(func: ir.PrimFunc, body, buffers) -> list:
    """The scratch tiles that may share bytes (module doc): two or more, each allocated right before
    a block barrier, in a kernel without thread scopes or warp specialisation; else none."""
    scratch = [b for b in buffers if b.attrs.get(ir.SCRATCH)]
    if len(scratch) < 2 or _has_roles(func, body):
        return []
    barrier_next = set()
    for seq in collect(body, ir.SeqStmt):
        for stmt, after in zip(seq.stmts, seq.stmts[1:]):
            if isinstance(stmt, ir.Allocate) and isinstance(after, ir.SyncThreads) and after.threads is None:
                barrier_next.add(id(stmt.buffer))
    return scratch if all(id(b) in barrier_next for b in scratch) else []


def _lifetimes(body, buffers, producer=None) -> tuple[list, dict]:
    """The statements in time order (``_Timeline``) and each shared buffer's (first, last) index."""
    stmts, uses = _top_level_uses(body)
    last = len(stmts) - 1
    stored = {id(b) for c in collect(body, ir.Call) if ir.is_tma_store_issue(c.name) for b in collect(c, ir.Buffer)}
    life = {id(b): (0, last) if id(b) not in uses else
            (min(uses[id(b)]), last if id(b) in stored else max(uses[id(b)])) for b in buffers}
    if producer is not None:  # the producer fills its tiles from the split on, ahead of the consumers
        start, ids = producer
        life.update({key: (min(start, life[key][0]), life[key][1]) for key in ids if key in life})
    return stmts, life


SPLIT = "split"  # a barrier before the split statement itself (``_plan_by_lifetime``)


class _Timeline:
    """The kernel's statements in the order its threads run them: the top-level statements, or in
    a kernel warp-specialised at its top level (one ``WarpSpecialize``, no ``T.ws`` scope) those
    around the split with the consumers' statements in its place: the consumers run theirs in
    order, and the producer only fills the loaded tiles, from the split until the consumers have
    waited for the last of them (their last use). ``barrier(i)``: the block barrier that may stand
    before statement ``i`` (the consumers' own inside the split); ``body(stmts)``: the kernel with
    the statements (barriers added) put back."""

    def __init__(self, func: ir.PrimFunc):
        self.top = ir.statements(func.body)
        splits = [i for i, x in enumerate(self.top) if isinstance(x, ir.WarpSpecialize)]
        self.ws, self.at, self.consumer = None, None, []
        self.ok = not _has_roles(func, func.body)
        if not self.ok and len(splits) == 1 and len(collect(func.body, ir.WarpSpecialize)) == 1 \
                and not collect(func.body, ir.ThreadScope):
            self.at, self.ws = splits[0], self.top[splits[0]]
            self.consumer = ir.statements(self.ws.consumer)
            self.ok = True
        self.stmts = self.top if self.ws is None else (self.top[:self.at] + self.consumer + self.top[self.at + 1:])

    def inside(self, i: int) -> bool:
        return self.ws is not None and self.at <= i < self.at + len(self.consumer)

    def producer(self):
        """(the split's first index, the buffers the producer touches), or None."""
        if self.ws is None:
            return None
        return self.at, {id(b) for b in collect(self.ws.producer, ir.Buffer)}

    def crosses_split(self, earlier: int, later: int) -> bool:
        """Statement ``earlier`` runs before the split (every thread) and ``later`` inside it."""
        return self.ws is not None and earlier < self.at and self.inside(later)

    def is_barrier(self, i: int) -> bool:
        s = self.stmts[i]
        return isinstance(s, ir.SyncThreads) and (s.threads is None or self.inside(i))

    def barrier(self, i: int) -> ir.SyncThreads:
        return ir.SyncThreads(threads=self.ws.consumer_threads) if self.inside(i) else ir.SyncThreads()

    def body(self, stmts: list, starts: list) -> ir.Stmt:
        """``stmts`` (the timeline with barriers inserted) back in the kernel: ``starts`` are the
        new indices where the consumers' statements began and ended."""
        if self.ws is None:
            return ir.seq(stmts)
        lo, hi = starts
        split = dataclasses.replace(self.ws, consumer=ir.seq(stmts[lo:hi]))
        return ir.seq(stmts[:lo] + [split] + stmts[hi:])


def _lowest_clear_offset(size: int, align: int, taken: list) -> int:
    """The lowest ``align``-ed offset where ``size`` bytes overlap none of the ``taken`` spans."""
    for start in sorted([0] + [-(-end // align) * align for _, end in taken]):
        if all(start + size <= lo or start >= hi for lo, hi in taken):
            return start
    raise AssertionError("past the last span is always clear")


def pack_by_lifetime(items: list) -> dict:
    """Byte spans ``key -> (start, end)`` for ``items`` ``(key, size, align, (first, last))``:
    largest first, each at the lowest aligned offset clear of those placed whose statement ranges
    meet its own. (``warp_specialize`` sizes its split with it too.)"""
    spans: dict = {}
    for key, size, align, life in sorted(items, key=lambda x: (-x[1], -x[2])):
        alive_with = [spans[k] for k, _, _, other in items if k in spans and _overlap(other, life)]
        start = _lowest_clear_offset(size, align, alive_with)
        spans[key] = (start, start + size)
    return spans


def _plan_by_lifetime(func: ir.PrimFunc, buffers) -> tuple[int, list, ir.Stmt] | None:
    """(bytes, plan, body with the barriers reuse needs) placing buffers by lifetime (module doc);
    None in a kernel with scopes, or split in roles other than at its top level (``_Timeline``)."""
    timeline = _Timeline(func)
    if not timeline.ok:
        return None
    shared = [b for b in buffers if b.scope == "shared"]
    stmts, life = _lifetimes(ir.seq(timeline.stmts), shared, timeline.producer())
    spans = pack_by_lifetime([(id(b), _size_of(b), _align_of(b), life[id(b)]) for b in shared])
    plan: list = []
    barrier_before: set = set()
    for buf in shared:
        sharing = [o for o in shared if o is not buf and _overlap(spans[id(o)], spans[id(buf)], exclusive=True)]
        _place([buf], spans[id(buf)][0], plan, shares_with=sharing)
        earlier = [life[id(o)][1] for o in sharing if life[id(o)][1] < life[id(buf)][0]]
        first = life[id(buf)][0]
        if not earlier:
            continue
        # bytes every thread used before the split, taken inside it: the block's barrier before the
        # split (the consumers' own inside it would not wait for the producer's threads)
        crossing = timeline.crosses_split(max(earlier), first)
        if not any(timeline.is_barrier(i) for i in range(max(earlier) + 1, timeline.at if crossing else first)):
            barrier_before.add(SPLIT if crossing else first)
    end = _place([b for b in buffers if b.scope == "barrier"], max((e for _, e in spans.values()), default=0), plan)
    fenced, starts = [], []
    for i, s in enumerate(stmts):
        if timeline.ws is not None and i == timeline.at and SPLIT in barrier_before:
            fenced += [ir.Evaluate(ir.Call("tw::fence_proxy_async", ())), ir.SyncThreads()]
        if timeline.ws is not None and i in (timeline.at, timeline.at + len(timeline.consumer)):
            starts.append(len(fenced))
        if i in barrier_before:
            fenced += [ir.Evaluate(ir.Call("tw::fence_proxy_async", ())), timeline.barrier(i)]
        fenced.append(s)
    starts += [len(fenced)] * (2 - len(starts))
    return end, plan, timeline.body(fenced, starts)


def _overlap(a: tuple, b: tuple, exclusive: bool = False) -> bool:
    """Whether two closed statement ranges (or, ``exclusive``, two half-open byte spans) meet."""
    return a[0] < b[1] and b[0] < a[1] if exclusive else a[0] <= b[1] and b[0] <= a[1]


def _crossing_the_limit(buffers, limit: int):
    """Where the allocation was made whose bytes, added to those allocated before it (in the
    user's order: the buffer the user can shrink or drop), pass ``limit``; None if none has a
    location."""
    total = 0
    for buf in buffers:
        total += _size_of(buf)
        if total > limit:
            return buf.loc
    return None


def _sharing_views(buffers) -> list:
    """The ``T.view`` tiles that lie over their tile's bytes (``share_view_storage``)."""
    return [b for b in buffers if (tile := ir.tile_under(b)) is not None and any(tile is t for t in buffers)]


def _over_their_tiles(views, plan: list) -> bool:
    """Each view at its tile's offset (the tile placed for the stricter alignment of the two:
    ``_align_of``), where the tile's bytes are its own in ``plan``; False, leaving everything as it
    was, where a tile shares bytes with others (a reuse, the scratch pool, the lifetime plan, which
    know the tile's uses and not the view's)."""
    sharing = {name for e in plan for name in e.get("shares_with", ())} | {e["name"] for e in plan if e.get("shares_with")}
    if any(ir.tile_under(v).name in sharing for v in views):
        return False
    for view in views:
        tile = ir.tile_under(view)
        _place_at(view, tile.attrs["offset"], tile.attrs["align"], plan, shares_with=[tile])
    return True


@register("plan_shared_memory", "memory")
def plan_shared_memory(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    buffers = []
    for alloc in collect(func.body, ir.Allocate):
        if alloc.buffer.scope in ("shared", "barrier") and all(alloc.buffer is not b for b in buffers):
            buffers.append(alloc.buffer)
    views = _sharing_views(buffers)
    if views:  # views over their tiles' bytes where the plan leaves those bytes to the tiles alone
        for view in views:
            tile = ir.tile_under(view)
            tile.attrs["align_for_views"] = max(tile.attrs.get("align_for_views", 0), _align_of(view))
        planned = _plan(func, ctx, [b for b in buffers if all(b is not v for v in views)], views)
        if planned is not None:
            return planned
        for view in views:  # the plan as it was: each tile aligned for itself alone
            ir.tile_under(view).attrs.pop("align_for_views", None)
    return _plan(func, ctx, buffers, [])


def _plan(func: ir.PrimFunc, ctx, buffers: list, views: list) -> "ir.PrimFunc | None":
    tiles, late, body = _reuse_after_pipeline(func.body, buffers)
    plan: list = []
    end_tiles = _place(tiles, 0, plan)
    end_late = _place(late, 0, plan, shares_with=tiles)
    placed = {id(b) for b in tiles + late}
    offset = _place([b for b in buffers if id(b) not in placed], max(end_tiles, end_late), plan)
    limit = smem_limit(ctx.target.arch)
    pool = _scratch_pool(func, body, [b for b in buffers if id(b) not in placed]) if offset > limit else []
    if pool:  # the scratch tiles over each other, after everything else
        plan = []
        _place(tiles, 0, plan)
        _place(late, 0, plan, shares_with=tiles)
        start = _place([b for b in buffers if id(b) not in placed and b not in pool], max(end_tiles, end_late), plan)
        offset = max(_place([b], start, plan, shares_with=[o for o in pool if o is not b]) for b in pool)
    if offset > limit and (by_lifetime := _plan_by_lifetime(func, buffers)) and by_lifetime[0] <= limit:
        offset, plan, body = by_lifetime
    if views and not _over_their_tiles(views, plan):
        return None
    if offset > limit:
        listing = ", ".join(f"{p['name']} {p['size_bytes']} B" for p in plan)
        if (func.attrs.get("warp_specialized") or {}).get("shares_bytes"):
            raise SplitDoesNotFit(f"the warp-specialised kernel needs {offset} bytes of shared memory ({listing})")
        raise CompileError(f"the kernel needs {offset} bytes of shared memory, more than the {limit} "
                           f"bytes of {ctx.target.arch} ({listing}); use smaller tiles or fewer stages",
                           _crossing_the_limit(buffers, limit) or
                           (ir.SourceLocation(func.source_file, func.source_line) if func.source_line else None))
    out = func.with_body(body)
    out.attrs["smem_bytes"] = offset
    out.attrs["smem_plan"] = plan
    out.attrs["smem_limit"] = limit
    return out
