"""The IR: expressions, buffers, statements (tile-level and thread-level) and the PrimFunc.

One small set of dataclasses serves every stage of the compiler. Tile operations (``Copy``,
``Gemm``, ``TmaCopy`` ...) are statements like any other; lowering passes replace them by loops
over ``BufferStore`` and by ``Evaluate(Call(...))`` of intrinsics from our CUDA headers.

Expressions overload the arithmetic operators (``+ - * // % /`` and friends), so index
expressions in the front end and in passes read like the Python the user wrote. Comparisons are
*not* overloaded (nodes keep Python identity semantics); use :func:`cmp`.

The IR is three modules: ``expr`` (expressions, buffers, regions, barrier slots), ``stmt``
(statements and tile operations) and ``func`` (``Launch``, ``PrimFunc``); this module gathers
them as the one namespace passes use (``from ..ir import nodes as ir``).
"""

from .. import dtypes  # noqa: F401 (ir.dtypes, re-exported)
from ..errors import SourceLocation  # noqa: F401 (re-exported)
from .expr import (  # noqa: F401
    BITWISE,
    BarrierRef,
    BinOp,
    Buffer,
    BufferLoad,
    COMPARISONS,
    Call,
    Cast,
    Const,
    Expr,
    LOGICAL,
    Not,
    Raw,
    Region,
    SCOPES,
    Select,
    Var,
    as_expr,
    binop,
    cast,
    cmp,
    const,
    conjuncts,
    const_int,
    describe,
    logical_and,
    result_dtype,
    within,
    zero,
)
from .func import KernelSequence, Launch, PrimFunc  # noqa: F401
from .stmt import (  # noqa: F401
    Allocate,
    Assign,
    BarrierArrive,
    BarrierWait,
    BaseOffset,
    BufferStore,
    Comment,
    Copy,
    Evaluate,
    Fill,
    For,
    Gemm,
    HW_BLOCK,
    HW_BLOCKS,
    IfThenElse,
    Im2Col,
    While,
    LetStmt,
    PipelineInfo,
    Reduce,
    Scan,
    SeqStmt,
    Stmt,
    SyncThreads,
    TILE_LOOP,
    PERSISTENT_WALK,
    ASYNC_COPY,
    SCRATCH,
    SHARED_VIEW,
    TILE_OPS,
    ATOMIC_ADD,
    ATOMIC_ADD_VECTORS,
    ATOMIC_UPDATES,
    atomic_lanes,
    REINTERPRET,
    SHUFFLES,
    RNG_INIT,
    COLUMN_BLOCKS,
    RNG_DRAWS,
    draws,
    PRINT,
    print_call,
    print_parts,
    TmaCopy,
    ThreadScope,
    ThreadCopy,
    TmaStoreWait,
    WarpSpecialize,
    ScopeRun,
    scope_runs,
    seq,
    statements,
    heads_and_bodies,
)
from .intrinsic_calls import (  # noqa: F401,E402
    CP_ASYNC_COMMIT,
    GRID_BARRIER_PARAM,
    GRID_SYNC,
    grid_sync,
    syncs_grid,
    cp_async_wait,
    cp_async_waited,
    max_registers_set,
    set_max_registers,
    wgmma_gemm_name,
    wgmma_gemm_shape,
    wgmma_wait,
    wgmma_waited,
)
