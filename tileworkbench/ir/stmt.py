"""The IR's statements: control flow, declarations, stores and calls, and the tile operations
users write (``Copy``, ``Gemm``, ``TmaCopy`` ...), which lowering passes replace by loops over
``BufferStore`` and ``Evaluate(Call(...))`` of intrinsics from our CUDA headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .. import dtypes
from .expr import BarrierRef, Buffer, Call, Expr, Raw, Region, SourceLocation, Var, cmp, const, const_int, logical_and

# --------------------------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------------------------


@dataclass(eq=False, repr=False)
class Stmt:
    def __str__(self) -> str:
        from .printer import stmt_text

        return stmt_text(self)


def _loc():
    return field(default=None, kw_only=True)


@dataclass(eq=False, repr=False)
class SeqStmt(Stmt):
    stmts: list
    loc: SourceLocation | None = _loc()


@dataclass(frozen=True)
class PipelineInfo:
    """What a ``T.Pipelined`` loop is, as passes hand it on (``For.pipeline``).

    ``stages`` is the user's ``num_stages``. ``part`` says which loop this is: ``"loop"`` (the loop
    as written, or one left as a plain loop: fewer than two stages, or nothing to pipeline, with a
    ``note`` saying why), ``"prologue"`` (the loop that issues the first ``stages - 1`` iterations),
    ``"steady"`` (the software-pipelined main loop) or ``"producer"`` / ``"consumer"`` (a
    warp-specialised role loop, each side's main loop)."""

    stages: int
    part: str = "loop"
    note: str | None = None

    ROLES = ("producer", "consumer")

    @property
    def steady(self) -> bool:
        """The loop runs the pipeline's stages (the main loop, or a role's)."""
        return self.part == "steady" or self.part in self.ROLES

    @property
    def role(self) -> str | None:
        return self.part if self.part in self.ROLES else None

    def printed(self) -> str:
        """How the IR printer writes it (as the annotations it replaced were written)."""
        if self.part == "prologue":
            return ", stage='prologue'"
        text = f", num_stages={self.stages}"
        if self.steady:
            text += ", pipelined=True"
        if self.role:
            text += f", ws_role={self.role!r}"
        if self.note:
            text += f", note={self.note!r}"
        return text


@dataclass(eq=False, repr=False)
class For(Stmt):
    """``for var in range(start, start + extent)``. ``kind``: serial, parallel, pipelined,
    unrolled. ``pipeline``: what a ``T.Pipelined`` loop is (None for other loops).
    ``annotations``: the lowering hints documented in docs/ir-attrs.md."""

    var: Var
    extent: Expr
    body: Stmt
    kind: str = "serial"
    start: Expr = field(default_factory=lambda: const(0))
    annotations: dict = field(default_factory=dict)
    pipeline: PipelineInfo | None = None
    form: Any = None  # the codegen phase's ir.records.LoopForm: the bound it runs to, a do-while or not
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class While(Stmt):
    """``while cond: body``: a serial loop whose trip count shows only as it runs (stream-K's run
    of iterations across tiles); ``cond`` is evaluated before each iteration. Passes treat it as a
    serial loop with no known range and no iteration variable."""

    cond: Expr
    body: Stmt
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class IfThenElse(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class LetStmt(Stmt):
    """Declare a scalar: ``var = value`` for the rest of the enclosing block."""

    var: Var
    value: Expr
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class Assign(Stmt):
    """Re-assign a scalar declared earlier with ``LetStmt(mutable=True)``."""

    var: Var
    value: Expr
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class BufferStore(Stmt):
    """``buffer[indices] = value``; ``flat`` as for ``BufferLoad``."""

    buffer: Buffer
    indices: tuple
    value: Expr
    flat: bool = False
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class BaseOffset(Stmt):
    """Codegen phase: a loop of result stores indexes from a base declared before it. ``target``
    is a ``Buffer`` (a pointer into the global tensor ``buffer`` at element ``offset``) or a
    ``Var`` (the element offset into the shared tile ``buffer``, whose swizzle applies to the
    sum); the stores add only their loop's part."""

    target: Any
    buffer: Buffer
    offset: Expr
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class Evaluate(Stmt):
    """A call evaluated for its effect (an intrinsic of our CUDA headers)."""

    call: Expr
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class Allocate(Stmt):
    """Declares ``buffer`` (shared, fragment, local or barrier) for the rest of the kernel."""

    buffer: Buffer
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class Comment(Stmt):
    text: str
    loc: SourceLocation | None = _loc()


# ---- tile operations (what the user writes; lowered away by passes) -----------------------


@dataclass(eq=False, repr=False)
class Copy(Stmt):
    """``T.copy(src, dst)``; ``instruction`` None (auto), "threads" (disable_tma), "sync", "cp_async", "tma"."""

    src: Region
    dst: Region
    instruction: str | None = None
    loc: SourceLocation | None = _loc()
    reduce: str | None = None  # "add": a TMA reduction into the destination


@dataclass(eq=False, repr=False)
class TmaCopy(Stmt):
    """``T.tma_copy``: a load (global->shared, with ``barrier``) or a store (shared->global)."""

    src: Region
    dst: Region
    barrier: BarrierRef | None = None
    leader_scope_threads: int | None = None
    loc: SourceLocation | None = _loc()

    @property
    def is_load(self) -> bool:
        return self.src.buffer.scope == "global"


@dataclass(eq=False, repr=False)
class Im2Col(Stmt):
    """``T.im2col`` where its tile moves in 16-byte chunks (``language.im2col``): fills ``dst``
    (block_M x block_K, shared) with rows ``nhw_step * block_M + i`` and columns
    ``c_step * block_K + j`` of the NHWC image ``src``'s patch matrix, zero in the padding and past
    the last pixel or tap. ``instruction``: None (threads' loads) or "cp_async" (software pipelines)."""

    src: Region  # the whole image
    dst: Region  # the whole tile
    nhw_step: Expr
    c_step: Expr
    kernel: int
    stride: int
    dilation: int
    pad: int
    instruction: str | None = None
    loc: SourceLocation | None = _loc()

    @property
    def chunk(self) -> int:
        """Elements per 16-byte move."""
        return 16 * 8 // self.src.buffer.dtype.storage_bits

    def output_size(self) -> tuple[int, int]:
        """The convolution's output height and width (OH, OW)."""
        _, H, W, _ = (const_int(d) for d in self.src.buffer.shape)
        K, S, D, P = self.kernel, self.stride, self.dilation, self.pad
        return (H + 2 * P - D * (K - 1) - 1) // S + 1, (W + 2 * P - D * (K - 1) - 1) // S + 1

    def pixel(self, i, j) -> tuple[tuple, Expr]:
        """The image indices of patch element ``(i, j)`` and the condition that it is inside."""
        N, H, W, C = (const_int(d) for d in self.src.buffer.shape)
        block_m, block_k = (const_int(d) for d in self.dst.buffer.shape[-2:])
        K, S, D, P = self.kernel, self.stride, self.dilation, self.pad
        OH, OW = self.output_size()
        m, k = self.nhw_step * block_m + i, self.c_step * block_k + j
        n, oh, ow = m // (OH * OW), m // OW % OH, m % OW
        kh, kw, c = k // (C * K), k // C % K, k % C
        h, w = oh * S + kh * D - P, ow * S + kw * D - P
        zero = const(0)
        # past the last filter tap (K * K * C not a multiple of block_K) the tile holds zeros too
        inside = logical_and(cmp("<", n, const(N)), cmp("<", k, const(K * K * C)), cmp(">=", h, zero),
                             cmp("<", h, const(H)), cmp(">=", w, zero), cmp("<", w, const(W)))
        return (n, h, w, c), inside


@dataclass(eq=False, repr=False)
class Fill(Stmt):
    dst: Region
    value: Expr
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class Gemm(Stmt):
    """``C += A @ B`` (with optional transposes) on a block tile."""

    a: Region
    b: Region
    c: Region
    trans_a: bool = False
    trans_b: bool = False
    clear_accum: bool | Expr = False  # an expression: cleared where it holds (clear_accum=(j == 0))
    # wgmma groups each thread may leave running when the gemm returns (warp specialisation's
    # consumer releases a stage one iteration later and waits for the last group itself); None:
    # its own group too, which the program waits for (``T.wgmma_gemm``, ``T.wait_wgmma``).
    in_flight: int | None = 0
    # The tensor-core path ``choose_shared_layouts`` chose for this gemm: a
    # ``passes.gemm_rules.WgmmaPlan``, or None for mma.sync (and before that pass runs).
    plan: Any = None
    loc: SourceLocation | None = _loc()

    @property
    def always_clears(self) -> bool:
        return self.clear_accum is True

    @property
    def may_clear(self) -> bool:
        return self.clear_accum is not False


@dataclass(eq=False, repr=False)
class Reduce(Stmt):
    """``T.reduce_<kind>(src, dst, dim)``: reduce ``src`` along ``dim`` into ``dst``. With a
    ``segment``, each run of that many consecutive elements along ``dim`` is reduced on its own:
    ``dst`` has ``src``'s shape with ``src.shape[dim] // segment`` there (a reduction of a fragment
    view, ``frontend.fragment_views``); without, ``dst`` has the other dimensions."""

    kind: str
    src: Buffer
    dst: Buffer
    dim: int
    clear: bool = True
    segment: int | None = None
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class Scan(Stmt):
    """``T.cumsum`` / ``T.cummax``: ``dst`` along ``dim`` holds the running sum (max) of ``src``
    along ``dim``, each element counting itself and those before it (after it with ``reverse``).
    ``src`` and ``dst`` have the same extents and may be the same region."""

    kind: str  # "sum" or "max"
    src: Region
    dst: Region
    dim: int
    reverse: bool = False
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class BarrierArrive(Stmt):
    """Each thread running it arrives on ``barrier``; with ``after_copies``, once the
    ``ThreadCopy`` copies it issued before have landed (``cp.async.mbarrier.arrive.noinc``:
    TileLang's ``T.cp_async_barrier_noinc``), an arrival the barrier's count includes."""

    barrier: BarrierRef
    loc: SourceLocation | None = _loc()
    after_copies: bool = False


@dataclass(eq=False, repr=False)
class ThreadCopy(Stmt):
    """``T.ptx_cp_async(T.access_ptr(dst[...], "w"), T.access_ptr(src[...], "r"), n)``: each thread
    running it copies its own ``n`` consecutive elements of global memory (``src``, one row's run)
    into shared memory (``dst``) with ``cp.async`` (4, 8 or 16 bytes); where the indices differ
    between threads, each its own. Not a tile operation: nothing is spread over the threads. The
    copies land for the program's mbarrier (``BarrierArrive(after_copies=True)``)."""

    dst: Region
    src: Region
    predicate: Expr | None = None  # where false, the elements are zeros (cp.async's source size 0)
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class BarrierWait(Stmt):
    barrier: BarrierRef
    parity: Expr
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class TmaStoreWait(Stmt):
    read: bool = False
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class SyncThreads(Stmt):
    """A block barrier. ``threads`` None: every thread of the block (``__syncthreads``); else only
    the ``threads`` threads of a warp-specialised kernel's consumers or of a ``T.ws`` scope (the
    named barrier ``barrier``)."""

    threads: int | None = None
    barrier: int = 1  # the named barrier when ``threads`` is set (a ``T.ws`` scope's own, else 1)
    loc: SourceLocation | None = _loc()


@dataclass(eq=False, repr=False)
class WarpSpecialize(Stmt):
    """Warp specialisation: the block's threads ``[0, consumer_threads)`` run ``consumer``, the
    ``producer_threads`` after them run ``producer``, at the same time. The two sides talk only
    through mbarriers; a block barrier inside ``consumer`` must be ``SyncThreads(threads=...)``."""

    producer: Stmt
    consumer: Stmt
    consumer_threads: int
    producer_threads: int
    loc: SourceLocation | None = _loc()

    @property
    def producer_range(self) -> tuple[int, int]:
        """First and last thread index of the producer side."""
        return (self.consumer_threads, self.consumer_threads + self.producer_threads - 1)

    @property
    def consumer_range(self) -> tuple[int, int]:
        return (0, self.consumer_threads - 1)


@dataclass(eq=False, repr=False)
class ThreadScope(Stmt):
    """``with T.ws(...)``: only the block's threads ``[first, first + count)`` run ``body`` (whole
    warpgroups; TileLang's warp specialisation written by the user; or whole warps, an
    ``if tx < C:`` whose branch works together, and its ``else``: ``frontend.statements``). Inside, the tile operations
    are spread over those ``count`` threads, whose index within the scope is ``var``
    (``tx - first``); a block barrier inside is a named barrier of those threads. The scopes talk
    to each other through the user's mbarriers."""

    first: int
    count: int
    body: Stmt
    var: Var
    loc: SourceLocation | None = _loc()

    @property
    def warpgroups(self) -> tuple[int, ...]:
        return tuple(range(self.first // 128, (self.first + self.count) // 128))

    @property
    def of_warpgroups(self) -> bool:
        """Whole warpgroups (``with T.ws(...)``), not the warps of an ``if tx < C:``."""
        return self.first % 128 == 0 and self.count % 128 == 0

    @property
    def spelling(self) -> str:
        """How the program wrote the scope: ``T.ws(groups)`` for whole warpgroups, else the thread
        range an ``if tx < C:`` (or its ``else``) gave."""
        if self.of_warpgroups:
            return f"T.ws({', '.join(map(str, self.warpgroups))})"
        return f"threads {self.first}..{self.first + self.count - 1}"

    @property
    def thread_range(self) -> tuple[int, int]:
        """First and last block thread index of the scope."""
        return (self.first, self.first + self.count - 1)


TILE_OPS = (Copy, TmaCopy, Im2Col, Fill, Gemm, Reduce, Scan)

# The calls ``T.atomic_*`` make, ``Evaluate(Call(name, (address_of(buf[idx]), value)))``: updates of
# one element that many threads may make at once. Adds commute with one another; the others are
# ordered like writes.
ATOMIC_ADD = "atomicAdd"
# Float32 adds of n neighbours along a global tensor's last dimension with one vector atomic (sm_90's
# red.global.add.v2/v4.f32), ``(address_of(buf[idx]), v0, ..., v(n-1))``: each element's add is
# atomic, as n element atomics would be; the address is a multiple of n elements (4 n bytes).
ATOMIC_ADD_VECTORS = {2: "tw::atomic_add_x2", 4: "tw::atomic_add_x4"}
ATOMIC_UPDATES = (ATOMIC_ADD, "atomicMax", "atomicMin", "tw::atomic_max", "tw::atomic_min",
                  *ATOMIC_ADD_VECTORS.values())


def atomic_lanes(name: str) -> int:
    """How many neighbouring elements an atomic call ``name`` updates (its values after the address)."""
    return next((n for n, vector in ATOMIC_ADD_VECTORS.items() if vector == name), 1)

# Buffer.attrs key: a shared tile ``T.gemm`` read in column blocks (``Q_shared[:, :512]``), the
# gemm's location as its value; passes/split_column_blocks.py makes one tile a block.
COLUMN_BLOCKS = "column_blocks"

# A thread's random numbers (``T.rng_init``, ``T.rng_rand``, ``T.rng_rand_float``): calls of the one
# generator a kernel that draws declares per thread (``tw_rng``, tw/random.h). ``RNG_INIT`` is a
# statement; each of ``RNG_DRAWS`` (name -> the value's dtype name) steps the generator, so no pass may
# copy, merge, drop or reorder one (``draws``; passes/verify_draws.py says where draws may stand).
RNG_INIT = "tw_rng.init"
RNG_DRAWS = {"tw_rng.rand": "uint32", "tw_rng.uniform": "float32", "tw_rng.uniform_double": "float64",
             "tw_rng.normal_value": "float32", "tw_rng.normal_double_value": "float64"}


def draws(node) -> int:
    """How many random draws ``node`` (an expression or a statement) holds."""
    from .visitor import collect
    return sum(1 for c in collect(node, Call) if c.name in RNG_DRAWS)


# T.reinterpret(value, dtype) is Call(REINTERPRET, (value,), dtype): the bits of value as dtype (the
# same width); the CUDA renderer spells it out for the types held as float32.
REINTERPRET = "tw::reinterpret"
# The thread's index read again (``%tid.x`` through an ``asm volatile``, tw/common.h), which NVVM
# neither lifts out of a loop nor merges with another read: passes/reread_thread_index.py.
THREAD_INDEX = "tw::thread_index"
# ``T.print``: ``Evaluate(print_call(...))``; ``print_parts`` reads one back.
PRINT = "tw::print"
# Warp shuffles (``T.shfl_sync`` and kin): Call(name, (mask, value, lane or delta, width)), the
# value another lane holds, moved unchanged.
SHFL_SYNC, SHFL_XOR_SYNC, SHFL_DOWN_SYNC, SHFL_UP_SYNC = (
    "__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync")
SHUFFLES = (SHFL_SYNC, SHFL_XOR_SYNC, SHFL_DOWN_SYNC, SHFL_UP_SYNC)


def print_call(label: str, where: Sequence[Expr], value: Expr | None = None, indices: Sequence[Expr] = ()) -> Call:
    """A ``T.print`` call: ``label``; ``where`` the block indices and the thread index it prints as
    its place; ``value`` (None: the label alone) and, for a buffer's element, its ``indices``."""
    counts = (const(len(where)), const(len(indices)))
    return Call(PRINT, (Raw(label), *counts, *where, *((value,) if value is not None else ()), *indices),
                value.dtype if value is not None else dtypes.int32)


def print_parts(call: Call) -> tuple:
    """(label, where, value or None, indices) of a ``print_call``."""
    label, n_where, n_indices, *rest = call.args
    n_where, n_indices = const_int(n_where), const_int(n_indices)
    where, rest = rest[:n_where], rest[n_where:]
    value = rest[0] if len(rest) > n_indices else None
    return label.text, tuple(where), value, tuple(rest[len(rest) - n_indices:] if n_indices else ())

# The annotation of a persistent kernel's tile loop (its value: how many tiles the grid has).
TILE_LOOP = "persistent_tiles"
# The annotation of a user's ``T.Persistent`` loop over waves (its value: the walk, an
# ``ir.records.PersistentWalk``), which ``unwrap_persistent_walk`` may turn into a grid.
PERSISTENT_WALK = "persistent_walk"
# The annotation of a ``T.Parallel`` nest a software pipeline issues ahead of its consumers (a gather
# into a shared tile, ``inject_software_pipeline``): its element copies may go as ``cp.async``.
ASYNC_COPY = "async_copy"
# The attribute of a shared scratch tile a tile operation's lowering allocates for itself (a
# reduction's): its Allocate is followed at once by a block barrier, and it is used only by the
# statements after it in that sequence, so ``plan_shared_memory`` may place such tiles over each other.
SCRATCH = "scratch"
# The attribute of a shared tile ``T.view`` made of another (its value: an ``ir.records.SharedView``):
# TileLang's view shares the other's bytes; here it is checked as a tile of its own
# (``verify_shared_views``: no value passes between the names) and lies over the other's bytes
# where ``share_view_storage`` finds the sync pass can order the two names' accesses.
SHARED_VIEW = "shared_view"


def tile_under(buf: Buffer) -> Buffer | None:
    """The tile whose bytes ``buf`` lies over: ``buf`` a ``T.view`` that ``share_view_storage``
    laid over its tile (``SharedView.shares_bytes``); None for any other buffer."""
    view = buf.attrs.get(SHARED_VIEW)
    return view.source if view is not None and view.shares_bytes else None


# The hardware block index and block count a persistent kernel's tile loop reads (its grid is
# one-dimensional), signed like every index they meet. The simplifier knows their ranges and the
# barrier simulation binds their texts like variables.
HW_BLOCK = Raw("(int)blockIdx.x")
HW_BLOCKS = Raw("(int)gridDim.x")


@dataclass(frozen=True)
class ScopeRun:
    """``T.ws`` scopes on different threads that follow one another: ``sides`` holds, per thread
    range ``(first, count)``, its scopes in program order. On the GPU each range's threads go on
    without waiting for the others' (only the program's mbarriers order them), so a loader scope
    may run ahead of the scope written before it."""

    sides: tuple  # ((first, count), (ThreadScope, ...)), ...


def scope_runs(stmts) -> list:
    """``stmts`` as a block runs them: each a statement, or a :class:`ScopeRun` where scopes of
    different threads follow one another (comments between them dropped)."""
    out: list = []
    scopes: list[ThreadScope] = []

    def flush():
        sides: dict = {}
        for sc in scopes:
            sides.setdefault((sc.first, sc.count), []).append(sc)
        if len(sides) > 1:
            out.append(ScopeRun(tuple((k, tuple(v)) for k, v in sides.items())))
        else:
            out.extend(scopes)
        scopes.clear()

    for stmt in stmts:
        if isinstance(stmt, Comment) and scopes:
            continue
        if not (isinstance(stmt, ThreadScope) and all(_same_or_apart(stmt, sc) for sc in scopes)):
            flush()
        if isinstance(stmt, ThreadScope):
            scopes.append(stmt)
        else:
            out.append(stmt)
    flush()
    return out


def _same_or_apart(a: ThreadScope, b: ThreadScope) -> bool:
    same = (a.first, a.count) == (b.first, b.count)
    return same or a.first + a.count <= b.first or b.first + b.count <= a.first


def statements(stmt: Stmt) -> list:
    """A sequence's statements, or the one statement (a body as a list)."""
    return list(stmt.stmts) if isinstance(stmt, SeqStmt) else [stmt]


def heads_and_bodies(stmt: Stmt) -> tuple[list, list]:
    """What a loop, branch or ``T.ws`` scope evaluates to decide whether its body runs (a loop's
    start and extent, a condition), and its bodies; ([], []) for any other statement."""
    if isinstance(stmt, For):
        return [stmt.start, stmt.extent], [stmt.body]
    if isinstance(stmt, While):
        return [stmt.cond], [stmt.body]
    if isinstance(stmt, IfThenElse):
        return [stmt.cond], [b for b in (stmt.then_body, stmt.else_body) if b is not None]
    if isinstance(stmt, ThreadScope):
        return [], [stmt.body]
    return [], []


def seq(stmts: Sequence[Stmt | None]) -> Stmt:
    """A sequence, flattened, with empty parts dropped (a single statement stays itself)."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(flat)
