"""Analyses of a lowered kernel that the trace carries: the shared-memory plan and the
mbarrier protocol simulation. They read the lowered IR (``artifact.func``) only."""

from .attach import attach
from .barriers import Simulation, barrier_timeline, simulate
from .evaluate import Unknown, evaluate
from .smem import smem_plan

__all__ = ["Simulation", "Unknown", "attach", "barrier_timeline", "evaluate", "simulate", "smem_plan"]
