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
Not in a kernel with ``T.ws`` or warp specialisation, where top-level order is not time order.
Kernels that fit keep the plans above, byte for byte.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register

SMEM_LIMIT = {"sm_90a": 232448, "sm_100a": 232448, "sm_80": 166912, "sm_89": 101376}


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


def _lifetimes(body, buffers) -> tuple[list, dict]:
    """The top-level statements and each shared buffer's (first, last) statement index."""
    stmts, uses = _top_level_uses(body)
    last = len(stmts) - 1
    stored = {id(b) for c in collect(body, ir.Call) if ir.is_tma_store_issue(c.name) for b in collect(c, ir.Buffer)}
    return stmts, {id(b): (0, last) if id(b) not in uses else
                   (min(uses[id(b)]), last if id(b) in stored else max(uses[id(b)])) for b in buffers}


def _lowest_clear_offset(size: int, align: int, taken: list) -> int:
    """The lowest ``align``-ed offset where ``size`` bytes overlap none of the ``taken`` spans."""
    for start in sorted([0] + [-(-end // align) * align for _, end in taken]):
        if all(start + size <= lo or start >= hi for lo, hi in taken):
            return start
    raise AssertionError("past the last span is always clear")


def _plan_by_lifetime(func: ir.PrimFunc, buffers) -> tuple[int, list, ir.Stmt] | None:
    """(bytes, plan, body with the barriers reuse needs) placing buffers by lifetime (module doc);
    None in a kernel with scopes or warp specialisation."""
    if _has_roles(func, func.body):
        return None
    shared = [b for b in buffers if b.scope == "shared"]
    stmts, life = _lifetimes(func.body, shared)
    spans: dict = {}  # id(buffer) -> (start, end) in bytes
    for buf in sorted(shared, key=lambda b: (-_size_of(b), -_align_of(b))):
        alive_with = [spans[id(o)] for o in shared if id(o) in spans and _overlap(life[id(o)], life[id(buf)])]
        start = _lowest_clear_offset(_size_of(buf), _align_of(buf), alive_with)
        spans[id(buf)] = (start, start + _size_of(buf))
    plan: list = []
    barrier_before: set = set()
    for buf in shared:
        sharing = [o for o in shared if o is not buf and _overlap(spans[id(o)], spans[id(buf)], exclusive=True)]
        _place([buf], spans[id(buf)][0], plan, shares_with=sharing)
        earlier = [life[id(o)][1] for o in sharing if life[id(o)][1] < life[id(buf)][0]]
        first = life[id(buf)][0]
        if earlier and not any(isinstance(s, ir.SyncThreads) and s.threads is None for s in stmts[max(earlier) + 1:first]):
            barrier_before.add(first)
    end = _place([b for b in buffers if b.scope == "barrier"], max((e for _, e in spans.values()), default=0), plan)
    fenced = []
    for i, s in enumerate(stmts):
        if i in barrier_before:
            fenced += [ir.Evaluate(ir.Call("tw::fence_proxy_async", ())), ir.SyncThreads()]
        fenced.append(s)
    return end, plan, ir.seq(fenced)


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
        raise CompileError(f"the kernel needs {offset} bytes of shared memory, more than the {limit} "
                           f"bytes of {ctx.target.arch} ({listing}); use smaller tiles or fewer stages",
                           _crossing_the_limit(buffers, limit) or
                           (ir.SourceLocation(func.source_file, func.source_line) if func.source_line else None))
    out = func.with_body(body)
    out.attrs["smem_bytes"] = offset
    out.attrs["smem_plan"] = plan
    out.attrs["smem_limit"] = limit
    return out
