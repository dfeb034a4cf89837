"""The pass manager: runs the ordered pass list and records a snapshot after every pass.

A pass is a function ``PrimFunc -> PrimFunc`` registered with :func:`register`, which gives it
a name and a phase. ``run_pipeline`` prints the IR after each pass into the :class:`Trace`, so the
trace is the step-through record the workbench shows.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

from ..errors import CompileError, InternalCompilerError, SourceLocation, internal_errors
from ..ir import nodes as ir
from ..ir.printer import print_ir
from ..ir import verify
from ..target import Target
from ..trace import PassSnapshot, Trace

PHASES = ("frontend", "tile", "lower", "memory", "codegen")
VERIFY_ENV = "TILEWORKBENCH_VERIFY_IR"  # 1: the IR verifier runs after every pass (the tests set it)
VERIFY_CONFIG = "tw.verify_ir"  # target.PassConfigKey.TW_VERIFY_IR


@dataclass
class PassInfo:
    name: str
    phase: str
    fn: Callable
    doc: str


REGISTRY: dict[str, PassInfo] = {}


def register(name: str, phase: str):
    """Decorator: make ``fn(func, ctx) -> func`` a named pass of the given phase."""
    assert phase in PHASES, phase

    def wrap(fn):
        REGISTRY[name] = PassInfo(name, phase, fn, sys.modules[fn.__module__].__doc__ or "")
        return fn

    return wrap


@dataclass
class LowerContext:
    """What every pass may read: the target and the pass configs in force."""

    target: Target
    configs: dict

    def flag(self, key) -> bool:
        return bool(self.configs.get(getattr(key, "value", key), False))


def run_pipeline(func: ir.PrimFunc, names: list[str], ctx: LowerContext, trace: Trace) -> ir.PrimFunc:
    """Run the passes ``names`` in order, a snapshot of each in ``trace``; on an empty trace the
    first snapshot is the function as parsed (a second call continues where the first ended)."""
    before = print_ir(func) if not trace.passes else trace.passes[-1].ir_after
    if not trace.passes:
        trace.passes.append(PassSnapshot(0, "frontend", "frontend", "", before, True, 0.0, None))
    checking = verifying(ctx)
    forms = _verified(func, "the front end" if len(trace.passes) == 1 else "the pipeline") if checking else None
    for name in names:
        info = REGISTRY[name]
        start = time.perf_counter()
        try:
            with internal_errors(f"pass {name}", SourceLocation(func.source_file, func.source_line)):
                func = info.fn(func, ctx)
        except CompileError as err:
            elapsed = (time.perf_counter() - start) * 1e3
            trace.passes.append(PassSnapshot(len(trace.passes), name, info.phase, before, before, False,
                                             elapsed, str(err)))
            raise
        elapsed = (time.perf_counter() - start) * 1e3
        if checking:
            forms = _verified(func, f"pass {name}", forms)
        after = print_ir(func)
        trace.passes.append(PassSnapshot(len(trace.passes), name, info.phase, before, after,
                                         after != before, elapsed, None))
        before = after
    if names and not checking:
        # Without the check after every pass, the IR a run of passes leaves is checked once (about
        # a millisecond): a name used where it is not bound or a tile used where it is not
        # allocated would be printed as it is and could compile into a wrong kernel (session 41's
        # three miscompiles each left such a name); an internal error is what it is.
        _verified(func, f"the passes up to {names[-1]}")
    return func


def verifying(ctx: LowerContext) -> bool:
    return bool(os.environ.get(VERIFY_ENV) not in (None, "", "0") or ctx.configs.get(VERIFY_CONFIG))


def _verified(func: ir.PrimFunc, who: str, before: "verify.Forms | None" = None) -> "verify.Forms":
    """The IR's forms, after ``ir.verify`` found nothing wrong with what ``who`` left."""
    problems, forms = verify.check(func)
    if before is not None:
        problems += verify.regressions(before, forms)
    if problems:
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        raise InternalCompilerError(f"{who} left invalid IR: {shown}",
                                    SourceLocation(func.source_file, func.source_line))
    return forms
