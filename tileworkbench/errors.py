"""User-facing errors.

Every mistake a user can make in a kernel surfaces as a :class:`CompileError` that names the
problem and points at the line of the user's kernel, with a caret under the column.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """Where a piece of IR came from in the user's Python source."""

    file: str
    line: int
    col: int = 0
    text: str = ""  # the source line itself, for the caret display

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class CompileError(ValueError):
    """A kernel that cannot be compiled, with the kernel line that caused it."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        lines = [f"{self.loc.file}:{self.loc.line}: {self.message}"]
        if self.loc.text:
            stripped = self.loc.text.rstrip()
            indent = len(stripped) - len(stripped.lstrip())
            lines.append("    " + stripped.strip())
            caret_col = max(self.loc.col - indent, 0)
            lines.append("    " + " " * caret_col + "^")
        return "\n".join(lines)

    def with_location(self, loc: SourceLocation | None) -> "CompileError":
        """The same error pinned to ``loc`` unless it already has a location."""
        if self.loc is not None or loc is None:
            return self
        err = type(self)(self.message, loc)
        err.__cause__ = self.__cause__
        return err

    def __reduce__(self):
        return (type(self), (self.message, self.loc))


class KernelRuntimeError(RuntimeError):
    """A kernel launch that failed or was called with arguments that do not match."""
