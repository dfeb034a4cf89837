"""Kernel source lines for statements of the lowered IR.

A lowered statement carries the location of the user's line when the pass that made it passed
it on. Lowered barrier calls (``.arrive``, ``.wait``, the inits and the synchronous TMA
copy's calls) carry none today, so :class:`KernelLines` falls back to what is known for sure:
the barrier's own declaration (its allocation line, or the ``T.copy`` line of an automatic
barrier), else the one kernel line that mentions the barrier and the operation, else the line of
the enclosing statement.
"""

from __future__ import annotations

import re

from ..ir import nodes as ir

_OP_WORDS = {"arrive": "arrive", "wait": "wait"}


class KernelLines:
    def __init__(self, func: ir.PrimFunc):
        self.source = func.attrs.get("source_lines") or []
        # func.source_line is the ``def`` line; source_lines start at the first decorator.
        def_at = next((i for i, t in enumerate(self.source) if t.lstrip().startswith("def ")), 0)
        self.first = func.source_line - def_at
        self._cache: dict = {}

    def of(self, stmt, kind: str, barrier: ir.Buffer | None, enclosing: int | None) -> int | None:
        """The kernel line of ``stmt`` doing ``kind`` on ``barrier``."""
        if stmt.loc is not None:
            return stmt.loc.line
        if barrier is not None and barrier.loc is not None and (kind == "init" or barrier.attrs.get("auto")):
            return barrier.loc.line
        if barrier is not None:
            found = self.unique_mention(kind, barrier.name)
            if found is not None:
                return found
        return enclosing

    def unique_mention(self, kind: str, name: str) -> int | None:
        """The line that mentions ``name`` and the operation's word, when exactly one does."""
        key = (kind, name)
        if key not in self._cache:
            word = _OP_WORDS.get(kind)
            hits = []
            if word is not None:
                pattern = re.compile(rf"\b{re.escape(name)}\b")
                hits = [i for i, text in enumerate(self.source)
                        if word in text and pattern.search(text) and not text.lstrip().startswith("#")]
            self._cache[key] = self.first + hits[0] if len(hits) == 1 else None
        return self._cache[key]
