"""verify_draws: reject random draws (``T.rng_rand``, ``T.rng_rand_float``) where their order or
their number would not be the program's, with the kernel line.

Expects: the IR straight from the front end.
Guarantees: the same IR (this pass never changes it). In a kernel that draws, the first random
call in program order is a ``T.rng_init`` (a draw before it would read a generator no one
started); no statement holds two draws (C++ fixes no order between the operands of one expression,
so ``T.rng_rand() - T.rng_rand()`` could differ between the GPU and the interpreters); and no draw
stands in an index, a condition, a loop's bounds or a tile operation's arguments (the passes copy
those: a bounds guard evaluates an index again, a condition is tested per tile, a fill's value
per element). A draw in the value of a store, a name or a kernel variable, or in a side of
``T.if_then_else`` (which draws only where taken), is where it may stand; later passes neither
copy nor merge one (``ir.draws``; the simplifier keeps each as a term of its own).
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register

_WHERE = "draw it into a name first (x = T.rng_rand()) and use the name"


def _refuse(what: str, node) -> CompileError:
    return CompileError(f"a random draw {what}: {_WHERE}", node.loc)


def _check_statement(s: ir.Stmt):
    """The rules for one statement's own expressions (its nested bodies are checked as statements)."""
    if isinstance(s, ir.BufferStore):
        if any(ir.draws(i) for i in s.indices) or any(ir.draws(i) for ld in collect(s.value, ir.BufferLoad)
                                                      for i in ld.indices):
            raise _refuse("in an index (the guards around an access evaluate it again)", s)
        own = ir.draws(s.value)
    elif isinstance(s, (ir.LetStmt, ir.Assign)):
        own = ir.draws(s.value)
    elif isinstance(s, ir.Evaluate):
        own = ir.draws(s.call)
    elif isinstance(s, (ir.IfThenElse, ir.While)):
        if ir.draws(s.cond):
            raise _refuse("in the condition of an `if` or `while` (conditions are tested again, per tile)", s)
        return
    elif isinstance(s, ir.For):
        if ir.draws(s.start) or ir.draws(s.extent):
            raise _refuse("in a loop's bounds", s)
        return
    elif isinstance(s, ir.TILE_OPS):
        if ir.draws(s):
            raise _refuse("in the arguments of a tile operation (it is evaluated once per element)", s)
        return
    else:
        return
    if own > 1:
        raise CompileError(f"{own} random draws in one statement: the order C++ evaluates them in is not fixed; "
                           f"{_WHERE}, one a line", s.loc)


@register("verify_draws", "tile")
def verify_draws(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    calls = [c for c in collect(func.body, ir.Call) if c.name == ir.RNG_INIT or c.name in ir.RNG_DRAWS]
    if not calls:
        return func
    if calls[0].name != ir.RNG_INIT:
        first = next(s for s in collect(func.body, ir.Stmt) if not isinstance(s, ir.SeqStmt) and ir.draws(s)
                     and not any(ir.draws(b) for b in _bodies(s)))
        raise CompileError("a random draw before T.rng_init: start this thread's generator first "
                           "(T.rng_init(seed), or T.rng_init(seed, seq, off))", first.loc)
    for s in collect(func.body, ir.Stmt):
        _check_statement(s)
    return func


def _bodies(s: ir.Stmt) -> list:
    return [b for b in (getattr(s, name, None) for name in ("body", "then_body", "else_body")) if b is not None]
