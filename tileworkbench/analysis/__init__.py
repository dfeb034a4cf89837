"""Analyses of a lowered kernel, the compile's last stage (``stage.run_analyses``, which ``jit``
runs after the code generators): the shared-memory plan and the mbarrier protocol simulation with
its checker. They read the lowered IR (``artifact.func``) only.

Rooms by concept: ``stage`` (the stage and its order), ``smem`` (the plan), ``simulation`` (the
simulator and its result), ``blocks`` (which blocks it walks), ``schedule`` (how it walks the program, the two roles of a
warp-specialised block interleaved), ``protocol`` (the mbarrier state rules), ``observer`` (what
rides along), ``checker`` with ``footprints``, ``accesses``, ``scan`` and ``diagnosis`` (the
protocol checker), and ``program``, ``evaluate``, ``lines`` (the statement numbering, expression
evaluation over the threads, kernel lines)."""

from .evaluate import Unknown, evaluate
from .simulation import Simulation, barrier_timeline, simulate
from .smem import smem_plan
from .stage import ANALYSES, check, run_analyses

__all__ = ["ANALYSES", "Simulation", "Unknown", "barrier_timeline", "check", "evaluate", "run_analyses", "simulate",
           "smem_plan"]
