"""The Trace: what a compile did, pass by pass and analysis by analysis, as one JSON document
(docs/trace-schema.md). A data model every layer may use: it imports nothing of the package."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

SCHEMA = "tileworkbench.trace"
SCHEMA_VERSION = 1


@dataclass
class PassSnapshot:
    index: int
    name: str
    phase: str
    ir_before: str
    ir_after: str
    changed: bool
    time_ms: float
    error: str | None


@dataclass
class AnalysisSnapshot:
    """One analysis of the analysis stage (``analysis.stage``): its name, time, the findings it
    added to the trace, and its error if it stopped the compile."""

    name: str
    time_ms: float
    findings: int
    error: str | None


@dataclass
class Trace:
    kernel: dict = field(default_factory=dict)
    passes: list = field(default_factory=list)
    sources: dict = field(default_factory=lambda: {"device": None, "host": None})
    smem: dict | None = None
    barriers: dict | None = None
    tma_descriptors: list = field(default_factory=list)
    resources: dict = field(default_factory=lambda: {"registers": None, "spills_bytes": None,
                                                     "smem_bytes": None, "threads": None, "grid": None,
                                                     "block_order": None})
    findings: list = field(default_factory=list)
    analyses: list = field(default_factory=list)  # AnalysisSnapshot, in the order they ran
    # tw.timeline: {"plan": TimelinePlan.to_json(), "measured": what kernel.timeline() read, or None}
    timeline: dict | None = None

    def pass_names(self) -> list[str]:
        return [p.name for p in self.passes]

    def ir_after(self, name: str) -> str:
        for p in self.passes:
            if p.name == name:
                return p.ir_after
        raise KeyError(f"no pass named {name!r}; passes: {', '.join(self.pass_names())}")

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "kernel": self.kernel,
            "passes": [asdict(p) for p in self.passes],
            "sources": self.sources,
            "smem": self.smem,
            "barriers": self.barriers,
            "tma_descriptors": self.tma_descriptors,
            "resources": self.resources,
            "findings": self.findings,
            "analyses": [asdict(a) for a in self.analyses],
            **({"timeline": self.timeline} if self.timeline is not None else {}),
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @staticmethod
    def from_dict(doc: dict) -> "Trace":
        if doc.get("schema") != SCHEMA or doc.get("version") != SCHEMA_VERSION:
            raise ValueError(f"not a {SCHEMA} v{SCHEMA_VERSION} document")
        return Trace(doc["kernel"], [PassSnapshot(**p) for p in doc["passes"]], doc["sources"], doc["smem"],
                     doc["barriers"], doc["tma_descriptors"], doc["resources"], doc["findings"],
                     [AnalysisSnapshot(**a) for a in doc.get("analyses", [])],  # traces before the stage had none
                     doc.get("timeline"))

    def summary(self) -> str:
        """One line a pass (index, name, phase, changed, time), then one an analysis."""
        rows = [f"{'#':>3}  {'pass':<30} {'phase':<9} {'changed':<8} {'ms':>7}"]
        for p in self.passes:
            mark = "yes" if p.changed else "-"
            err = f"  FAILED: {p.error.splitlines()[0]}" if p.error else ""
            rows.append(f"{p.index:>3}  {p.name:<30} {p.phase:<9} {mark:<8} {p.time_ms:>7.2f}{err}")
        for a in self.analyses:
            err = f"  FAILED: {a.error.splitlines()[0]}" if a.error else ""
            rows.append(f"{'':>3}  {a.name:<30} {'analysis':<9} {str(a.findings) + ' found':<8} {a.time_ms:>7.2f}{err}")
        return "\n".join(rows)
