"""The analysis stage: what ``jit`` runs after the passes and the code generators, by name, and
records in the trace as it records passes (``trace.analyses``: name, time, findings added).

``ANALYSES``, in order (each reads the lowered function and the trace, never the IR before it):

* ``smem_plan``: the shared-memory plan with each buffer's live range (``trace.smem``);
* ``barrier_simulation``: the mbarrier protocol, slot by slot over the pipeline's iterations
  (``trace.barriers``, ``trace.findings``), with the protocol checker riding along unless
  ``tw.barrier_check`` is ``"off"`` (:func:`.checker.checker_factory`);
* ``barrier_check``: the checker's verdict. A definite bug is a ``CompileError`` at the kernel
  line of the first one (with ``err.findings`` and ``err.trace``); each suspicious pattern a
  ``TileworkbenchWarning`` at its line. ``"warn"`` makes the errors warnings, ``"off"`` skips it.

Running the stage again on an artifact replaces what it put in the trace (idempotent).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Callable

from ..errors import CompileError, SourceLocation, TileworkbenchWarning, internal_errors
from ..trace import AnalysisSnapshot
from .checker import CHECKED_SOURCES, checker_factory, mode_of
from .diagnosis import location, message
from .simulation import simulate
from .smem import smem_plan


@dataclass(frozen=True)
class Analysis:
    name: str
    run: Callable  # run(artifact): fills the artifact's trace, or raises
    description: str


def _smem_plan(artifact):
    artifact.trace.smem = smem_plan(artifact)


def _barrier_simulation(artifact):
    trace = artifact.trace
    sim = simulate(artifact, observers=[checker_factory])
    kept = [f for f in trace.findings if f.get("source") not in CHECKED_SOURCES]
    trace.barriers = sim.to_json(finding_offset=len(kept))
    trace.findings = kept + sim.findings


def _barrier_check(artifact):
    if mode_of(artifact) == "off":
        return
    trace, func = artifact.trace, artifact.func
    findings = [f for f in trace.findings if f.get("source") in CHECKED_SOURCES]
    errors = [f for f in findings if f["severity"] == "error"]
    if not errors:  # with an error, the warnings are in the error's findings (and the trace)
        for f in findings:
            warnings.warn_explicit(TileworkbenchWarning(message(f)), TileworkbenchWarning, func.source_file,
                                   f.get("line") or func.source_line)
        return
    first = errors[0]
    more = f" (and {len(errors) - 1} more barrier-protocol error(s) in trace.findings)" if len(errors) > 1 else ""
    err = CompileError(message(first) + more + "; pass_configs={'tw.barrier_check': 'warn'} compiles it anyway",
                       location(func, first.get("line")))
    err.findings = errors + [f for f in findings if f["severity"] != "error"]  # errors first
    err.trace = trace
    raise err


ANALYSES = [
    Analysis("smem_plan", _smem_plan, "shared-memory plan and live ranges"),
    Analysis("barrier_simulation", _barrier_simulation, "mbarrier protocol simulation and checker"),
    Analysis("barrier_check", _barrier_check, "protocol bugs stop the compile, suspicious patterns warn"),
]


def run_analyses(artifact):
    """Run every analysis on a lowering artifact, in order, each recorded in
    ``artifact.trace.analyses`` (a failed one too, with its error, before it raises)."""
    trace, func = artifact.trace, artifact.func
    trace.analyses = []
    for analysis in ANALYSES:
        before, start = len(trace.findings), time.perf_counter()
        try:
            with internal_errors(f"the analysis {analysis.name}", SourceLocation(func.source_file, func.source_line)):
                analysis.run(artifact)
        except CompileError as err:
            trace.analyses.append(AnalysisSnapshot(analysis.name, (time.perf_counter() - start) * 1e3, 0,
                                                   str(err)))
            raise
        trace.analyses.append(AnalysisSnapshot(analysis.name, (time.perf_counter() - start) * 1e3,
                                               max(len(trace.findings) - before, 0), None))
    return artifact


def check(artifact) -> list:
    """The barrier-protocol findings of a lowered kernel (simulation and checker, as in mode
    ``"error"``), errors first, in program order; nothing is raised or recorded."""
    sim = simulate(artifact, observers=[lambda s, a: checker_factory(s, _ErrorMode(a))])
    return sorted(sim.findings, key=lambda f: f["severity"] != "error")


class _ErrorMode:
    """An artifact seen with ``tw.barrier_check`` = "error" (what :func:`check` reports)."""

    def __init__(self, artifact):
        self.func = getattr(artifact, "func", artifact)
        self.pass_configs = {}
