"""inject_software_pipeline: turn ``T.Pipelined(n, num_stages=s)`` into a real software pipeline.

Expects: tile-level IR; pipelined loops whose bodies load shared tiles with ``T.tma_copy``
(user barriers) or with plain ``T.copy`` from global memory.
Guarantees, for every pipelined loop with ``s >= 2``:
  * the *producer* statements (TMA loads, the arrives on their barriers, global->shared copies)
    run ``s - 1`` iterations ahead: a prologue issues iterations ``k0 .. k0+s-2``, and iteration
    ``k`` of the steady state issues iteration ``k + s - 1`` (skipped in the last ``s - 1``
    iterations, the epilogue) before running the *consumer* statements of iteration ``k``;
  * every shared buffer the producers write gets ``s`` versions (a new leading dimension), used
    at slot ``(k - k0) % s``;
  * every barrier explicitly arrived in the loop gets ``s`` versions: slot ``((k - k0) % s) * N + i``,
    and each wait's parity ``p(k)`` becomes ``((k - k0) // s + p(k0)) % 2``;
  * each iteration starts with an async-proxy fence and a block barrier, so the version about to
    be refilled is no longer read by any thread (write-after-read across iterations);
  * global->shared ``T.copy`` producers (and ``T.im2col`` tiles, ``ir.Im2Col``) become ``cp.async`` with one commit group per
    iteration, and consumers wait for their group (``cp.async.wait_group s-1``) and sync.
  * a ``T.Parallel`` nest that only copies elements of a global tensor into a shared tile (a gather:
    sparse MLA's ``KV_shared[i, d] = KV[b, Indices[b, s, i_i * BI + i], g, d]``) is a producer too,
    where it can be issued ahead (``_issuable_gather``) and its tile is not used outside the loop; it is marked ``ir.ASYNC_COPY``, and
    ``partition_parallel_loops`` moves its runs with ``cp.async`` where they are whole 4-16 byte
    copies (else with plain loads and stores, which the same waits and barriers order).
A tile two pipelined loops fill has one allocation (the larger stage count); a loop that is not
pipelined but uses such a tile, overwriting all of it before reading it in every iteration, uses
version 0 of it; any other use of a versioned tile outside its loops is refused, as is a barrier
two pipelined loops arrive on.
Names the loop body binds (``LetStmt``) that producers' addresses read are computed again, under
new names, for the iteration each issue is for (``rules.loop_lets``); where one reads what cannot be read
ahead, the loop is not pipelined (a serial loop, its note says why).
Loops with ``num_stages <= 1`` become plain serial loops.

A body that is one ``if`` on a condition every iteration can evaluate ahead of time (the loop
variable, block indices, constants and loads of global tensors the kernel never writes:
block-sparse GEMM's ``if BlockMask[by, bx, k]:``) around global->shared copies and the work on
them is pipelined too: each copy keeps the condition (of the iteration it loads for) and so does
the work; an iteration whose condition is false still commits its (empty) ``cp.async`` group,
so the groups' count, which the waits read, stays that of the iterations.
"""

from __future__ import annotations

import dataclasses

from ..errors import CompileError, InternalCompilerError
from ..ir import nodes as ir
from ..ir.simplify import simplify
from ..ir.visitor import IRMutator, collect, reassigned_vars, substitute
from .manager import register
from .rules.fragments import parallel_nest
from .rules.loop_lets import lets_read_by, written_buffer_ids
from .rules.versions import OnVersion


def _is_global_to_shared_copy(s) -> bool:
    s = _guarded_copy(s)
    return (isinstance(s, (ir.Copy, ir.Im2Col)) and s.instruction in (None, "threads", "cp_async")
            and s.src.buffer.scope == "global" and s.dst.buffer.scope == "shared")


def _guarded_copy(s):
    """The copy of ``if cond: copy`` (what ``_split_condition`` makes), else ``s`` itself."""
    if isinstance(s, ir.IfThenElse) and s.else_body is None and isinstance(s.then_body, (ir.Copy, ir.Im2Col)):
        return s.then_body
    return s


def _evaluable_ahead(cond, loop: ir.For, written: set, outer: set) -> bool:
    """Whether ``cond`` can be evaluated for any iteration by substituting the loop variable:
    it reads only the loop variable, ``outer`` variables (block indices, parameters, enclosing
    loops) and global tensors the kernel never writes."""
    for load in collect(cond, ir.BufferLoad):
        if load.buffer.scope != "global" or id(load.buffer) in written:
            return False
    if collect(cond, (ir.Raw, ir.Call)):
        return False
    return all(v is loop.var or v in outer for v in collect(cond, ir.Var))


def _gather_store(s) -> ir.BufferStore | None:
    """The store of a ``T.Parallel`` nest whose body is one store of a shared tile's element from a
    global tensor's element of the same dtype, else None."""
    if not isinstance(s, ir.For) or s.kind != "parallel":
        return None
    _, body = parallel_nest(s)
    if not isinstance(body, ir.BufferStore) or body.buffer.scope != "shared" or \
            not isinstance(body.value, ir.BufferLoad):
        return None
    load = body.value
    return body if load.buffer.scope == "global" and load.buffer.dtype == body.buffer.dtype else None


def _mentions(node, buf: ir.Buffer) -> int:
    """How many loads, stores and regions under ``node`` name ``buf``."""
    return sum(1 for x in collect(node, (ir.BufferLoad, ir.BufferStore, ir.Region)) if x.buffer is buf)


def _issuable_gather(s, body: list, loop: ir.For, written: set, outer: set, kernel: ir.Stmt) -> bool:
    """Whether ``s``, a statement of a pipelined loop's ``body``, is a gather the pipeline may issue
    ``stages - 1`` iterations early: its addresses read only its own loop variables, the pipelined
    loop's, ``outer`` variables and global tensors the kernel never writes (its source among them),
    no other statement of the body writes its tile or reads it before it (which would read the
    last iteration's elements), and nothing of the ``kernel`` outside the loop uses the tile (its
    versions would be the loop's alone)."""
    store = _gather_store(s)
    if store is None or id(store.value.buffer) in written:
        return False
    if _mentions(kernel, store.buffer) != _mentions(loop.body, store.buffer):
        return False
    nest = {lp.var for lp in parallel_nest(s)[0]}
    addresses = [*store.indices, *store.value.indices]
    for index in addresses:
        if collect(index, (ir.Raw, ir.Call)) or any(
                load.buffer.scope != "global" or id(load.buffer) in written for load in collect(index, ir.BufferLoad)):
            return False
        if not all(v is loop.var or v in outer or v in nest for v in collect(index, ir.Var)):
            return False
    tile = store.buffer
    before = True
    for other in body:
        if other is s:
            before = False
            continue
        touched = collect(other, (ir.BufferLoad, ir.Region)) if before else []
        stores = collect(other, ir.BufferStore) + [c.dst for c in collect(other, (ir.Copy, ir.TmaCopy, ir.Fill))]
        if any(x.buffer is tile for x in [*touched, *stores]):
            return False
    return True


def _split_condition(body: list, loop: ir.For, written: set, outer: set) -> list:
    """``[if c: copies..., work...]`` -> ``[if c: copy, ..., if c: work]`` where that is safe to
    pipeline (see the module docstring); else ``body`` unchanged."""
    stmts = [x for x in body if not isinstance(x, ir.Comment)]
    if len(stmts) != 1 or not isinstance(stmts[0], ir.IfThenElse) or stmts[0].else_body is not None:
        return body
    branch = stmts[0]
    inner = [x for x in ir.statements(branch.then_body) if not isinstance(x, ir.Comment)]
    copies = [x for x in inner if _is_global_to_shared_copy(x)]
    work = [x for x in inner if not any(x is c for c in copies)]
    if not copies or not work or collect(branch.then_body, ir.TmaCopy) or \
            not _evaluable_ahead(branch.cond, loop, written, outer):
        return body
    if any(isinstance(x, (ir.LetStmt, ir.Assign)) for x in work) or inner[:len(copies)] != copies:
        return body  # copies first, then the work: the order the pipeline keeps
    return [ir.IfThenElse(branch.cond, c, loc=branch.loc) for c in copies] + \
        [ir.IfThenElse(branch.cond, ir.seq(work), loc=branch.loc)]


class _Versioner(OnVersion):
    """Rewrites one statement of the loop body for iteration ``k_expr``."""

    def __init__(self, loop: ir.For, stages: int, buffers: dict, barriers: dict, k_expr):
        super().__init__(buffers, simplify((loop.var - loop.start) % stages))
        self.loop, self.s, self.barriers, self.k_expr = loop, stages, barriers, k_expr

    def visit_BarrierRef(self, ref: ir.BarrierRef):
        new = self.barriers.get(ref.buffer)
        if new is None:
            return ref
        n = ref.buffer.shape[0]
        return ir.BarrierRef(new, simplify(self.slot * n + self.visit(ref.index)))

    def visit_BarrierWait(self, node: ir.BarrierWait):
        ref = self.visit(node.barrier)
        parity = node.parity
        if node.barrier.buffer in self.barriers:
            p0 = simplify(substitute(node.parity, {self.loop.var: self.loop.start}))
            parity = simplify(((self.loop.var - self.loop.start) // self.s + p0) % 2)
        return ir.BarrierWait(ref, parity, loc=node.loc)

    def run(self, stmt):
        return substitute(self.visit(stmt), {self.loop.var: self.k_expr})


class _Pipeline(IRMutator):
    def __init__(self, func: ir.PrimFunc):
        self.versioned: dict = {}  # old Buffer -> new Buffer (shared tiles and barriers)
        self.made: dict = {}  # old Buffer -> every versioned Buffer a loop made of it, in order
        self.records: list = []
        self.written = written_buffer_ids(func.body)
        # What a condition or a gather's address may read besides the loop variable: block indices,
        # scalar parameters, the variables of loops around it and scalars bound before it (never
        # assigned again).
        self.outer = set(func.launch.block_vars) | {p for p in func.params if isinstance(p, ir.Var)}
        self.reassigned = reassigned_vars(func.body)
        self.body = func.body

    def visit_LetStmt(self, node: ir.LetStmt):
        if node.var not in self.reassigned:
            self.outer.add(node.var)
        return self.generic_visit(node)

    def visit_For(self, node: ir.For):
        around = set(self.outer)
        self.outer.add(node.var)
        node = self.generic_visit(node)
        self.outer = around  # what the body bound is not bound before it
        if node.kind != "pipelined":
            return node
        stages = node.pipeline.stages
        if stages <= 1:
            return ir.For(node.var, node.extent, node.body, "serial", node.start,
                          pipeline=ir.PipelineInfo(stages), loc=node.loc)
        return self.pipeline(node, stages)

    def pipeline(self, loop: ir.For, s: int) -> ir.Stmt:
        if collect(loop.body, ir.ThreadScope):
            return self.versions_only(loop, s)
        body = _split_condition(ir.statements(loop.body), loop, self.written, self.outer)
        tma_loads = [x for x in body if isinstance(x, ir.TmaCopy) and x.is_load]
        thread_loads = [x for x in body if _is_global_to_shared_copy(x)]
        gathers = [x for x in body if _issuable_gather(x, body, loop, self.written, self.outer, self.body)]
        arrived = {id(a.barrier.buffer): a.barrier.buffer for a in collect(loop.body, ir.BarrierArrive)}
        load_barriers = {id(t.barrier.buffer) for t in tma_loads}
        producers = [x for x in body if x in tma_loads or x in thread_loads or x in gathers or
                     (isinstance(x, ir.BarrierArrive) and id(x.barrier.buffer) in load_barriers)]
        if not producers:
            return ir.For(loop.var, loop.extent, loop.body, "serial", loop.start,
                          pipeline=ir.PipelineInfo(s, note="nothing to pipeline"), loc=loop.loc)
        lets = lets_read_by(producers, body, loop, self.written)
        if lets is None:
            return ir.For(loop.var, loop.extent, loop.body, "serial", loop.start, loc=loop.loc,
                          pipeline=ir.PipelineInfo(s, note="a copy's address reads a name the loop computes "
                                                   "from what cannot be read ahead: not pipelined"))
        consumers = [x for x in body if not any(x is p for p in producers)]

        buffers = {}
        for old in [_guarded_copy(p).dst.buffer for p in tma_loads + thread_loads] + \
                [_gather_store(g).buffer for g in gathers]:
            if old not in buffers:
                buffers[old] = old.versioned(s)
        barriers = {}
        for old in arrived.values():
            counts = list(old.attrs["counts"]) * s
            barriers[old] = ir.Buffer(old.name, (ir.const(len(counts)),), old.dtype, "barrier",
                                      attrs={**old.attrs, "counts": counts, "versions": s}, loc=old.loc)
        self.remember(buffers, barriers, loop)
        if thread_loads or gathers:
            producers = [_as_cp_async(p) if any(p is t for t in thread_loads + gathers) else p for p in producers]
            thread_loads = thread_loads + gathers  # one commit group an iteration, and its wait

        def stage(stmts, k_expr):
            return ir.seq([_Versioner(loop, s, buffers, barriers, k_expr).run(x) for x in stmts])

        def issue(k_expr, role: str):
            # the producers of iteration k_expr, after the names they read computed for it (new
            # names: the consumers' own lets of those names stay where they are)
            fresh = {x.var: ir.Var(f"{x.var.name}_{role}", x.var.dtype) for x in lets}
            ahead_lets = [ir.LetStmt(fresh[x.var], substitute(x.value, fresh), loc=x.loc) for x in lets]
            return stage(ahead_lets + [substitute(p, fresh) for p in producers], k_expr)

        k, k0, n = loop.var, loop.start, loop.extent
        commit = [ir.Evaluate(ir.Call(ir.CP_ASYNC_COMMIT, ()))] if thread_loads else []
        pro_var = ir.Var(f"{k.name}_prologue")
        prologue = ir.For(pro_var, ir.const(s - 1), ir.seq([
            ir.IfThenElse(simplify(ir.cmp("<", pro_var, n)), issue(k0 + pro_var, "prologue")),
            *commit,
        ]), "unrolled", pipeline=ir.PipelineInfo(s, "prologue"), loc=loop.loc)
        ahead = simplify(k + (s - 1))
        steady = [
            ir.Comment(f"steady state: issue iteration {k.name} + {s - 1}, compute iteration {k.name}"),
            ir.Evaluate(ir.Call("tw::fence_proxy_async", ())),
            ir.SyncThreads(),
            ir.IfThenElse(simplify(ir.cmp("<", ahead, k0 + n)), issue(ahead, "ahead")),
            *commit,
        ]
        if thread_loads:
            # cp.async writes through the generic proxy; wgmma reads through the async proxy.
            steady += [ir.cp_async_wait(s - 1),
                       ir.Evaluate(ir.Call("tw::fence_proxy_async", ())), ir.SyncThreads()]
        steady.append(stage(consumers, k))
        self.records.append({
            "loop": k.name, "stages": s,
            "buffers": [b.name for b in buffers], "barriers": [b.name for b in barriers],
            "producers": len(producers), "mode": "tma" if tma_loads else "cp_async",
        })
        main = ir.For(k, n, ir.seq(steady), "serial", k0, pipeline=ir.PipelineInfo(s, "steady"), loc=loop.loc)
        return ir.seq([ir.Comment(f"prologue: iterations {k.name} = 0 .. {s - 2} in flight"), prologue, main])


    def remember(self, buffers: dict, barriers: dict, loop: ir.For):
        for old, new in {**buffers, **barriers}.items():
            self.versioned[old] = new
            self.made.setdefault(old, []).append((new, loop))

    def one_version_set_each(self, body: ir.Stmt) -> ir.Stmt:
        """A tile two pipelined loops fill (block-causal attention's backward refills ``do`` in its
        masked and its unmasked loop) is versioned by each: one allocation serves both, with the
        larger stage count (a loop uses versions ``0 .. s - 1`` of it), and every access names it;
        the loop whose versioned tile went unallocated had been printed without its swizzle. A
        barrier two pipelined loops arrive on is refused: its slots would enter the second loop at
        phases the first loop's trip count decides, which the second's parities cannot know."""
        replaced = {}
        for old, made in self.made.items():
            if len(made) == 1:
                continue
            if old.scope == "barrier":
                lines = ", ".join(str(loop.loc.line) for _, loop in made if loop.loc is not None)
                raise CompileError(f"barrier {old.name} is arrived on in {len(made)} pipelined loops"
                                   + (f" (lines {lines})" if lines else "")
                                   + ": each loop gives it one slot per stage and starts every slot at the same "
                                   "phase, which the loop before may have left unequal; give each loop a barrier "
                                   "of its own", old.loc)
            kept = max((new for new, _ in made), key=lambda b: b.attrs["versions"])
            self.versioned[old] = kept
            replaced.update({new: kept for new, _ in made if new is not kept})
        return substitute(body, buffer_map=replaced) if replaced else body

    def versions_only(self, loop: ir.For, s: int) -> ir.Stmt:
        """A loop warp-specialised by hand (``T.ws`` scopes): its roles already run at the same
        time, so it keeps its order; only the shared tiles TMA loads fill in it and the barriers it
        arrives on get ``s`` versions (and the waits their parities) so a producer can run up to
        ``s - 1`` iterations ahead of its consumers."""
        if collect(loop.body, (ir.Copy, ir.Im2Col)) and any(_is_global_to_shared_copy(c) for c in
                                                            collect(loop.body, (ir.Copy, ir.Im2Col))):
            raise CompileError(f"T.Pipelined(num_stages={s}) over `T.ws` scopes: the compiler pipelines "
                               "T.tma_copy loads on the program's own barriers there, not T.copy from global "
                               "memory; use T.tma_copy with a barrier, or num_stages=0", loop.loc)
        buffers = {}
        for load in collect(loop.body, ir.TmaCopy):
            if load.is_load and load.dst.buffer not in buffers:
                buffers[load.dst.buffer] = load.dst.buffer.versioned(s)
        barriers = {}
        for arrive in collect(loop.body, ir.BarrierArrive):
            old = arrive.barrier.buffer
            if old not in barriers:
                counts = list(old.attrs["counts"]) * s
                barriers[old] = ir.Buffer(old.name, (ir.const(len(counts)),), old.dtype, "barrier",
                                          attrs={**old.attrs, "counts": counts, "versions": s}, loc=old.loc)
        self.remember(buffers, barriers, loop)
        self.records.append({"loop": loop.var.name, "stages": s, "buffers": [b.name for b in buffers],
                             "barriers": [b.name for b in barriers], "producers": 0, "mode": "ws"})
        body = _Versioner(loop, s, buffers, barriers, loop.var).run(loop.body)
        return ir.For(loop.var, loop.extent, body, "serial", loop.start,
                      pipeline=ir.PipelineInfo(s, note="warp-specialised by hand: versions only"), loc=loop.loc)


def _as_cp_async(p):
    if isinstance(p, ir.For):  # a gather
        return dataclasses.replace(p, annotations={**p.annotations, ir.ASYNC_COPY: True})
    copy = _guarded_copy(p)
    new = dataclasses.replace(copy, instruction="cp_async")
    return new if copy is p else ir.IfThenElse(p.cond, new, loc=p.loc)


def _touches(stmt, buf: ir.Buffer) -> bool:
    return any(node.buffer is buf for node in collect(stmt, (ir.Region, ir.BufferLoad, ir.BufferStore)))


def _whole(region: ir.Region) -> bool:
    return all(ir.const_int(st) == 0 for st in region.starts) and \
        region.static_extents() is not None and region.static_extents() == region.buffer.static_shape()


def _overwritten_first(body: ir.Stmt, buf: ir.Buffer) -> bool:
    """Whether the first of ``body``'s statements that touches ``buf`` writes all of it (a copy or
    fill of the whole tile that does not read it): then each run of ``body`` reads only what it
    wrote itself, nothing another loop left in the tile."""
    for stmt in ir.statements(body):
        if _touches(stmt, buf):
            return isinstance(stmt, (ir.Copy, ir.Fill)) and stmt.dst.buffer is buf and _whole(stmt.dst) and \
                not (isinstance(stmt, ir.Copy) and stmt.src.buffer is buf)
    return False


class _OnFirstVersion(IRMutator):
    """A loop that is not pipelined, using a tile a pipelined loop versions, where each iteration
    first overwrites the whole tile (the plain loop beside a pipelined one over the same tiles:
    ``T.Pipelined(n, num_stages=1)`` next to ``num_stages=2``): its accesses go to version 0, as
    the tile's only allocation is the versioned one. What it reads it wrote in the same iteration,
    so no version the pipelined loop left matters; every other use outside a pipelined loop is
    still refused (the check after this)."""

    def __init__(self, versioned: dict):
        self.versioned = {old: new for old, new in versioned.items() if old.scope == "shared"}

    def visit_For(self, node: ir.For):
        if node.pipeline is not None and node.pipeline.stages > 1:  # the pipelined loops' own
            return node
        mine = {old: new for old, new in self.versioned.items() if _touches(node.body, old)}
        if mine and all(_overwritten_first(node.body, old) for old in mine):
            return OnVersion(mine, ir.const(0)).visit(node)
        return self.generic_visit(node)


class _ReplaceAllocations(IRMutator):
    def __init__(self, versioned):
        self.versioned = versioned

    def visit_Allocate(self, node):
        new = self.versioned.get(node.buffer)
        return node if new is None else ir.Allocate(new, loc=node.loc)


@register("inject_software_pipeline", "tile")
def inject_software_pipeline(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    pipe = _Pipeline(func)
    body = pipe.visit(func.body)
    if not pipe.versioned:
        return func.with_body(body)
    body = _ReplaceAllocations(pipe.versioned).visit(pipe.one_version_set_each(body))
    body = _OnFirstVersion(pipe.versioned).visit(body)
    stale = {id(b) for b in pipe.versioned}
    allocated = {id(a.buffer) for a in collect(body, ir.Allocate)}
    for node in collect(body, (ir.Region, ir.BufferLoad, ir.BufferStore, ir.BarrierRef)):
        if node.buffer.attrs.get("versions", 1) > 1 and node.buffer.scope in ("shared", "barrier") \
                and id(node.buffer) not in allocated:
            raise InternalCompilerError(f"inject_software_pipeline: the versioned tile {node.buffer.name} is used "
                                        "but never allocated")
        if id(node.buffer) in stale:
            raise CompileError(
                f"{node.buffer.name} is filled inside a pipelined loop (so it has one version per "
                "stage) and also used outside that loop; copy what you need into another buffer",
                node.buffer.loc)
    out = func.with_body(body)
    out.attrs["pipelines"] = pipe.records
    return out
