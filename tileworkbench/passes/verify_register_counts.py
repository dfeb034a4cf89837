"""verify_register_counts: reject a register hand-over written by the program (``T.set_max_nreg``)
that could not run, with the kernel line.

Expects: the IR straight from the front end.
Guarantees: the same IR (this pass never changes it). Each ``setmaxnreg`` stands directly in a
thread scope of whole warpgroups (the front end sees to that, ``language.kernel.set_max_nreg``),
outside any loop or branch of it, at most one a scope: every warp of the warpgroup runs it once.
Each count suits its direction: ``.inc`` to at least, ``.dec`` to at most, the registers a thread
starts with (``rules.warp_specialization.launch_registers``). And the counts the block's
warpgroups end with (the starting count where a warpgroup sets none) add up to no more than the
block holds: ``setmaxnreg.inc`` waits until registers a ``.dec`` gave back are free, so a block
asking for more than it holds would hang on the GPU (as our own split did at 120 registers for
512 consumer threads, 2026-12-06).
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import collect
from .manager import register
from .rules.warp_specialization import launch_registers

WARPGROUP = 128


def _set_in(stmt) -> tuple[int, bool] | None:
    if isinstance(stmt, ir.Evaluate) and isinstance(stmt.call, ir.Call):
        return ir.max_registers_set(stmt.call.name)
    return None


@register("verify_register_counts", "tile")
def verify_register_counts(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    sets = [s for s in collect(func.body, ir.Evaluate) if _set_in(s) is not None]
    if not sets:
        return func
    threads = func.launch.threads
    start = launch_registers(threads)
    placed: set = set()
    ends: dict[int, tuple[int, ir.Stmt]] = {}  # warpgroup -> (count it ends with, the setmaxnreg)
    for scope in collect(func.body, ir.ThreadScope):
        own = [s for s in ir.statements(scope.body) if _set_in(s) is not None]
        if len(own) > 1:
            raise CompileError("T.set_max_nreg stands twice in one scope: set each warpgroup's registers once",
                               own[1].loc)
        for s in own:
            count, increase = _set_in(s)
            if increase and count < start or not increase and count > start:
                want = "at least" if increase else "at most"
                raise CompileError(
                    f"T.set_max_nreg({count}, {int(increase)}): each of this block's {threads} threads starts "
                    f"with {start} registers, and setmaxnreg.{'inc' if increase else 'dec'} goes to {want} "
                    f"that many", s.loc)
            placed.add(id(s))
            for group in range(scope.first // WARPGROUP, (scope.first + scope.count) // WARPGROUP):
                ends[group] = (count, s)
    stray = next((s for s in sets if id(s) not in placed), None)
    if stray is not None:
        raise CompileError("T.set_max_nreg inside a loop or a branch: every warp of a warpgroup runs "
                           "setmaxnreg together, once; put it first in the warpgroup's scope", stray.loc)
    used = sum(ends.get(g, (start, None))[0] for g in range(threads // WARPGROUP)) * WARPGROUP
    if used > start * threads:
        counts = ", ".join(f"warpgroup {g}: {ends.get(g, (start, None))[0]}" for g in range(threads // WARPGROUP))
        raise CompileError(
            f"T.set_max_nreg asks for more registers than the block holds ({counts}: {used} in all, where its "
            f"{threads} threads hold {start} each, {start * threads}); setmaxnreg.inc would wait for ever. "
            "Give the warpgroups less, or the producer's back", max(ends.values(), key=lambda e: e[0])[1].loc)
    return func
