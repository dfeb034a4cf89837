"""Fill a lowering artifact's trace with the analyses (``trace.smem``, ``trace.barriers``).

``jit`` sits below ``analysis`` and cannot call it, so the layers above (the notebook magic,
the CLI) call :func:`attach` on the artifact that ``tileworkbench.lower`` returns.
"""

from __future__ import annotations

from . import barriers as _barriers
from .smem import smem_plan


def attach(artifact):
    """Set ``artifact.trace.smem`` and ``artifact.trace.barriers`` and append the simulation's
    findings to ``artifact.trace.findings``. Idempotent: findings from an earlier call are
    replaced, not duplicated. Returns the artifact."""
    trace = artifact.trace
    trace.smem = smem_plan(artifact)
    sim = _barriers.simulate(artifact)
    kept = [f for f in trace.findings if f.get("source") != _barriers.SOURCE]
    trace.barriers = sim.to_json(finding_offset=len(kept))
    trace.findings = kept + sim.findings
    return artifact
