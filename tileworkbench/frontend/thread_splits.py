"""``if`` statements that give parts of the block to different threads: TileLang's ``if tx < C:``,
``if tx >= C:`` and chains such as ``if tx < 128: ... elif tx >= 128 and tx < 256: ... elif tx >=
256: ...`` (its hand-written warp-specialised kernels: two consumer warpgroups and a producer).

:func:`thread_branches` reads such a chain as the thread range each branch runs on; the caller
(``statements.Statements.visit_If``) builds each branch as an ``ir.ThreadScope`` of its threads
where one of them works together (tile operations, barriers, shared stores), else keeps the ``if``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..ir import nodes as ir
from ..ir.visitor import collect
from .branch_names import BranchNames


@dataclass(frozen=True)
class ThreadBranch:
    """One branch of a chain: the statements that threads ``[first, first + count)`` run."""

    first: int
    count: int
    statements: list
    cond: object = None  # its condition (None for the `else`)


def thread_range(cond, builder) -> tuple[int, int] | None:
    """``[lo, hi)``, the threads for which ``cond`` holds, where ``cond`` compares the thread index
    (or a name given it and not changed since) with constants (``tx < C``, ``tx >= C``, and
    ``and`` of such); None for any other condition."""
    if isinstance(cond, ir.BinOp) and cond.op == "and":
        a, b = thread_range(cond.a, builder), thread_range(cond.b, builder)
        if a is None or b is None:
            return None
        return max(a[0], b[0]), min(a[1], b[1])
    if not isinstance(cond, ir.BinOp) or cond.op not in ("<", ">=", "<=", ">"):
        return None
    bound = ir.const_int(cond.b)
    if bound is None or _thread_index(cond.a, builder) is None:
        return None
    threads = builder.launch.threads
    lo, hi = {"<": (0, bound), "<=": (0, bound + 1), ">=": (bound, threads), ">": (bound + 1, threads)}[cond.op]
    return max(lo, 0), min(hi, threads)


def _thread_index(index, builder):
    """The thread index ``index`` names, noting that a name given it decides the threads."""
    launch = builder.launch
    name = index
    if isinstance(index, ir.Var) and index is not launch.thread_var and index not in builder.reassigned:
        index = builder.let_values.get(index, index)
    if index is not launch.thread_var:
        return None
    if name is not index:  # `tx = T.get_thread_binding()`: tx may not change after this (a loop around)
        builder.decides_threads[name] = builder.loc
    return index


def thread_branches(node: ast.If, cond, evaluate, builder) -> list[ThreadBranch] | None:
    """The branches of the ``if`` ``node`` (its condition already evaluated: ``cond``) and of the
    ``elif`` chain after it, each on its threads, where every condition is a thread range of whole
    warps and each branch takes the first or the last of the threads no earlier branch took (an
    ``else`` takes the rest); else None. ``evaluate`` gives an ``elif``'s condition."""
    launch = builder.launch
    if builder.thread_scope is not None or len(launch.thread_dims) > 1 or launch.producer_threads:
        return None
    left = (0, launch.threads)  # the threads no branch so far took
    branches: list[ThreadBranch] = []
    while True:
        taken = _taken(thread_range(cond, builder), left)
        if taken is None or taken == (0, launch.threads):
            return None
        branches.append(ThreadBranch(taken[0], taken[1] - taken[0], node.body, cond))
        left = (taken[1], left[1]) if taken[0] == left[0] else (left[0], taken[0])
        rest = node.orelse
        if len(rest) == 1 and isinstance(rest[0], ast.If) and left[1] > left[0]:
            candidate = evaluate(rest[0].test)
            if thread_range(candidate, builder) is not None:  # an `elif` on the threads goes on
                node, cond = rest[0], candidate
                continue
        if rest:
            if left[1] == left[0]:
                return None  # an else no thread runs: leave it to the plain `if`
            branches.append(ThreadBranch(left[0], left[1] - left[0], rest))
        return branches


def _taken(span, left) -> tuple[int, int] | None:
    """The threads of ``span`` among ``left``, where they are whole warps at one end of ``left``;
    else None."""
    if span is None:
        return None
    lo, hi = max(span[0], left[0]), min(span[1], left[1])
    if lo >= hi or lo % 32 or hi % 32 or (lo != left[0] and hi != left[1]):
        return None
    return lo, hi


def emit_thread_branches(parser, node: ast.If, chain: list[ThreadBranch]) -> None:
    """Emit the branches of a chain (``parser``: the front end's ``Statements``), each built as
    code of its own threads: thread scopes, each its tile operations spread over its threads,
    where one of them works together; else the ``if`` as written."""
    names = BranchNames(parser.scope.names)
    bodies = []
    for i, branch in enumerate(chain):
        if i:
            names.start_branch()
        bodies.append(parser._branch(branch.statements, (branch.first, branch.count)))
    names.end_if(parser.loc(node).line if parser.loc(node) is not None else None)
    if not any(works_together(b) for b in bodies):
        rest = None
        for branch, body in reversed(list(zip(chain, bodies))):
            rest = body if branch.cond is None else ir.IfThenElse(branch.cond, body, rest)
        parser.builder.emit(rest)
        return
    # each branch a scope of its own, whose code tests tx against the scope's range
    for i, (branch, body) in enumerate(zip(chain, bodies)):
        var = ir.Var("tx_first" if i == 0 else "tx_rest" if len(chain) == 2 else f"tx_part{i}")
        parser.builder.emit(ir.ThreadScope(branch.first, branch.count, body, var, loc=parser.builder.loc))


def works_together(body: ir.Stmt) -> bool:
    """Whether the threads running ``body`` share work or memory in it: tile operations,
    ``T.Parallel`` loops, barriers (block barriers, and mbarrier arrivals and waits: a branch
    waiting on what another branch's threads arrive on runs beside it, not before it), or stores
    into shared memory (which other threads read)."""
    if collect(body, (*ir.TILE_OPS, ir.SyncThreads, ir.BarrierArrive, ir.BarrierWait)):
        return True
    return any(f.kind == "parallel" for f in collect(body, ir.For)) or \
        any(st.buffer.scope == "shared" for st in collect(body, ir.BufferStore))
