"""prefetch_gather_indices: a pipelined gather's row indices are loaded an iteration before its issue.

Phase: lower, last (thread-level code: the gather is per-thread unrolled loops of ``cp.async``).
Expects: steady-state loops of ``inject_software_pipeline`` (``For.pipeline.part == "steady"``)
whose issue of a later iteration is an ``if`` on that iteration (``k + 1 < n``) around unrolled
loops, each a thread's runs of a gather: scalar names bound from the loop variables, one of them
an expression of loads of global tensors (the row index: sparse MLA's ``Indices_at = Indices[...,
k * BI + i]``, under a bounds check where the row it indexes comes from the data), then the
``cp.async`` that reads it.
Guarantees: where the tensors it loads are never written by the kernel (no store, no address taken)
and the index reads nothing else the steady loop computes (only the two loop variables, names the
unrolled loop binds by arithmetic, and names bound outside the steady loop that it does not
re-assign), and where the kernel is not already short of registers
(``rules.registers.short_of_registers``: the array adds a register a run), the unrolled loop
reads the index from a thread array (``<name>_ahead``, one element
a run, registers) instead. The array is filled for the first steady iteration's issue before the
loop, and for iteration ``k + 1``'s issue in iteration ``k``, just before the loop's last gemm
(at its end where it has none), under the issue's own condition for ``k + 1``. Iteration ``k``
reads the array at its top, before the refill, so every issue reads the values its own load
would have read: the kernel computes what it did.
Why: the steady loop starts with the block barrier that frees the version the issue refills;
ptxas moves no load above it, so every iteration waited there for its index loads (an L2 round
trip) before the first ``cp.async`` could go. Loaded during the last gemm of the iteration before,
the indices are there when the issue runs, as in TileLang's schedule: DeepSeek v3.2's sparse MLA
forward went 7.83 -> 7.10 ms on the H100 (docs/experiments.md, session 40).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as ir
from ..ir.simplify import simplify
from ..ir.visitor import IRMutator, addressed_buffers, collect, reassigned_vars, substitute
from .manager import register
from .rules.registers import short_of_registers

_GEMM_CALLS = ("tw::wgmma_gemm_", "tw::gemm_ss")


def _is_gemm(stmt) -> bool:
    return (isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call)
            and stmt.call.name.startswith(_GEMM_CALLS))


def _guarded(cond, body: ir.Stmt, loc) -> ir.Stmt | None:
    """``if cond: body``, or ``body`` alone where ``cond`` is known true, nothing where false."""
    known = ir.const_int(cond)
    if known is not None:
        return body if known else None
    return ir.IfThenElse(cond, body, loc=loc)


def _read_only_globals(func: ir.PrimFunc) -> set:
    """Names of the global buffers nothing in the kernel stores to or takes the address of (by name:
    passes may leave a parameter's accesses on copies of its buffer)."""
    touched = {s.buffer.name for s in collect(func.body, ir.BufferStore)}
    touched |= {b.name for b in addressed_buffers(func.body)}  # a vector copy's or an atomic's target
    return {p.name for p in func.params if isinstance(p, ir.Buffer) and p.scope == "global"} - touched


@dataclasses.dataclass
class _Prefetch:
    """One unrolled run loop's index: the array it will read, and how to fill it."""

    run_loop: ir.For
    index: ir.LetStmt  # the index's binding in the run loop
    lets: list  # the run loop's arithmetic bindings the index reads, in order
    array: ir.Buffer

    def fill(self, step: ir.Var, iteration) -> ir.Stmt:
        """The run loop's index values for the issue in steady iteration ``iteration``."""
        var = ir.Var(self.run_loop.var.name, self.run_loop.var.dtype)
        names = {self.run_loop.var: var, step: iteration}
        body = [ir.LetStmt(x.var, simplify(substitute(x.value, names)), loc=x.loc) for x in self.lets]
        body.append(ir.BufferStore(self.array, (var,), simplify(substitute(self.index.value, names)),
                                   loc=self.index.loc))
        return dataclasses.replace(self.run_loop, var=var, body=ir.seq(body), annotations={})


def _prefetchable(run_loop, steady: ir.For, read_only: set, bound_in_steady: set) -> _Prefetch | None:
    if not isinstance(run_loop, ir.For) or run_loop.kind != "unrolled" or ir.const_int(run_loop.extent) is None:
        return None
    body = ir.statements(run_loop.body)
    lets = {x.var: x for x in body if isinstance(x, ir.LetStmt)}
    for x in body:
        loads = collect(x.value, ir.BufferLoad) if isinstance(x, ir.LetStmt) else []
        if not loads or any(load.buffer.name not in read_only for load in loads):
            continue
        needed, frontier = [], collect(x.value, ir.Var)
        while frontier:  # the arithmetic bindings the index reads, through one another
            v = frontier.pop()
            if v in lets and lets[v] is not x and lets[v] not in needed:
                needed.append(lets[v])
                frontier += collect(lets[v].value, ir.Var)
        if any(collect(y.value, (ir.BufferLoad, ir.Call, ir.Raw)) for y in needed) or collect(x.value, (ir.Call, ir.Raw)):
            continue
        free = {v for y in [x, *needed] for v in collect(y.value, ir.Var)} - {y.var for y in needed}
        if free & (bound_in_steady - {steady.var, run_loop.var}):
            continue
        order = [y for y in body if y in needed]
        array = ir.Buffer(f"{x.var.name}_ahead", (run_loop.extent,), x.var.dtype, "local", loc=x.loc)
        return _Prefetch(run_loop, x, order, array)
    return None


class _PrefetchIndices(IRMutator):
    def __init__(self, func: ir.PrimFunc):
        self.read_only = _read_only_globals(func)

    def visit_For(self, node: ir.For):
        node = self.generic_visit(node)
        if node.pipeline is None or node.pipeline.part != "steady":
            return node
        body = ir.statements(node.body)
        issue = next((s for s in body if isinstance(s, ir.IfThenElse) and s.else_body is None
                      and node.var in collect(s.cond, ir.Var)), None)
        if issue is None:
            return node
        bound = {x.var for x in collect(node.body, (ir.LetStmt, ir.For))} | reassigned_vars(node.body)
        prefetches = [p for s in ir.statements(issue.then_body)
                      if (p := _prefetchable(s, node, self.read_only, bound)) is not None]
        if not prefetches:
            return node
        by_loop = {id(p.run_loop): p for p in prefetches}
        new_then = ir.seq([self._reading_array(s, by_loop[id(s)]) if id(s) in by_loop else s
                           for s in ir.statements(issue.then_body)])
        next_step = node.var + 1
        refill = _guarded(simplify(substitute(issue.cond, {node.var: next_step})),
                          ir.seq([p.fill(node.var, next_step) for p in prefetches]), issue.loc)
        issue_at = next(i for i, s in enumerate(body) if s is issue)
        body[issue_at] = dataclasses.replace(issue, then_body=new_then)
        # before the last gemm after the issue (the issue reads the array first), else at the end
        last_gemm = max((i for i, s in enumerate(body) if i > issue_at and _is_gemm(s)), default=len(body))
        if refill is not None:
            body.insert(last_gemm, refill)
        first = simplify(substitute(issue.cond, {node.var: node.start}))
        before = [ir.Allocate(p.array, loc=p.index.loc) for p in prefetches]
        before.append(_guarded(first, ir.seq([p.fill(node.var, node.start) for p in prefetches]), issue.loc))
        return ir.seq([*before, dataclasses.replace(node, body=ir.seq(body))])

    @staticmethod
    def _reading_array(run_loop: ir.For, p: _Prefetch) -> ir.For:
        reads = ir.BufferLoad(p.array, (run_loop.var,), p.index.var.dtype)
        body = [ir.LetStmt(x.var, reads, loc=x.loc) if x is p.index else x for x in ir.statements(run_loop.body)]
        return dataclasses.replace(run_loop, body=ir.seq(body))


@register("prefetch_gather_indices", "lower")
def prefetch_gather_indices(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    if short_of_registers(func) or not any(f.pipeline is not None and f.pipeline.part == "steady"
                                           for f in collect(func.body, ir.For)):
        return func
    return func.with_body(_PrefetchIndices(func).visit(func.body))
