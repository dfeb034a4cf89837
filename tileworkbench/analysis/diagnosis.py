"""How the protocol checker explains what it found: the words of its messages, the cause of
each deadlock the simulation found (``no_arrivals``, ``own_later_arrive``,
``arrive_count_unreachable``, ``tx_mismatch``, ``wrong_parity``, ``circular_wait`` (``T.ws``
scopes each waiting on another), or ``may_complete_later``, which is only a warning), and a finding as the text and the kernel line of a ``CompileError``."""

from __future__ import annotations

from ..errors import SourceLocation
from ..ir import nodes as ir
from .lines import KernelLines


def at(line) -> str:
    return f" at line {line}" if line is not None else ""


def frm(line) -> str:
    return f" from line {line}" if line is not None else ""


def iteration_of(iteration) -> str:
    return f" (iteration {iteration})" if iteration is not None else ""


def message(f: dict) -> str:
    """A finding as one line: code, barrier slot, iteration, what is wrong."""
    parts = []
    if f.get("barrier") is not None:
        parts.append(f"{f['barrier']}[{f['slot']}]" if f.get("slot") is not None else f["barrier"])
    if f.get("iteration") is not None:
        parts.append(f"iteration {f['iteration']}")
    where = ", ".join(parts)
    return f"barrier check ({f.get('code')}{', ' + where if where else ''}): {f['message']}"


def location(func: ir.PrimFunc, line: int | None) -> SourceLocation:
    """The kernel line of a finding, quoted, with the caret at its first character."""
    line = line if line is not None else func.source_line  # at least the kernel's def line
    lines = KernelLines(func)
    text = lines.source[line - lines.first] if 0 <= line - lines.first < len(lines.source) else ""
    return SourceLocation(func.source_file, line, len(text) - len(text.lstrip()), text)


class Diagnosis:
    """Deadlock causes; needs the checker's ``blocked``, ``arrivals`` and ``sim``."""

    def explain_deadlocks(self):
        """Give each deadlock the simulation found its cause (and make it a warning where
        threads outside the waiting ones arrive later: lockstep cannot order those)."""
        explained = set()
        for event, key, who, st in self.blocked:
            index = event.get("finding")
            if index is None or index in explained:
                continue
            explained.add(index)
            finding = self.sim.findings[index]
            cause, why = self.deadlock_cause(event, key, who, st)
            finding["cause"] = cause
            finding["message"] += f"; {why}"
            if cause == "may_complete_later":
                finding["severity"] = "warning"

    def deadlock_cause(self, event, key, who, st) -> tuple[str, str]:
        if event.get("circular"):
            return "circular_wait", (f"the threads of each of the {event['circular']} `T.ws` scopes running side by "
                                     "side here wait on a phase only another scope's threads can complete, after "
                                     "their own waits: a circular wait")
        later = [(e, w) for e, k, w in self.arrivals if k == key and e["seq"] > event["seq"]]
        others = [e for e, w in later if (w & ~who).any()]
        if others:
            sync = next((line for seq, line in self.block_syncs if event["seq"] < seq <= others[0]["seq"]), None)
            if sync is not None:
                return "block_barrier_first", (f"the arrivals it needs{at(others[0]['line'])} come after a block "
                                               f"barrier{at(sync)} that every thread must reach first, and the "
                                               "waiting threads reach it only after this wait: a deadlock")
            return "may_complete_later", (f"other threads arrive on it later in program order"
                                          f"{at(others[0]['line'])}; the lockstep simulation cannot tell "
                                          "whether they do so before this wait would need them")
        own = [e for e, w in later if (w & who).any() and e["iteration"] == event["iteration"]
               and e["stage"] == event["stage"]]
        arrived = st.count - st.pending
        if own:
            return "own_later_arrive", (f"the arrivals it needs include the arrive{at(own[0]['line'])}, "
                                        "which the waiting threads only reach after this wait")
        if st.pending == 0 and st.tx != 0:
            return "tx_mismatch", ("all arrivals are in but the transaction bytes do not add up: expect_tx "
                                   f"announced {abs(st.tx)} bytes {'more' if st.tx > 0 else 'fewer'} than the TMA "
                                   "loads deliver")
        if 0 < arrived < st.count:
            return "arrive_count_unreachable", (f"only {arrived} of the {st.count} arrivals its init count "
                                                "asks for are ever made before it: the count can never be reached")
        if arrived == 0 and st.phase > 0:
            return "wrong_parity", (f"phase {st.phase - 1} (parity {(st.phase - 1) % 2}) is the last to complete "
                                    f"and nothing starts phase {st.phase} before this wait: the parity is one phase "
                                    "off (in a loop, flip it every use: k % 2)")
        if arrived == 0:
            return "no_arrivals", (f"no thread arrives on {key[0]}[{key[1]}] before this wait (init count "
                                   f"{st.count}): T.tma_copy does not arrive, add T.barrier_arrive")
        return "unknown", "the protocol does not complete this phase"
