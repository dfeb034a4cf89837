"""User-facing errors.

Every mistake a user can make in a kernel surfaces as a :class:`CompileError` that names the
problem and points at the line of the user's kernel, with a caret under the column. Mistakes
made outside the front end's walk of a kernel (an annotation Python evaluates when it runs the
``def``, a bad argument to ``compile``) point at the user's line that made them:
:func:`caller_location`. A failure of the compiler itself is an :class:`InternalCompilerError`,
which says so plainly (the robustness suite shows no user input reaches it).
"""

from __future__ import annotations

import contextlib
import linecache
import os
import sys
from dataclasses import dataclass

DEBUG_ENV = "TILEWORKBENCH_DEBUG"  # set to 1 to see the raw tracebacks of internal errors
TOO_DEEP = ("this kernel's expressions are nested too deeply to compile; give parts of the expression "
            "names of their own (x = a + b) and combine those")


# Display names of source files that are not files to the user: a notebook cell's code lives in
# /tmp/ipykernel_NNNN/NNNN.py, which the user knows as "In [3]" (the %%tilekernel magic registers it).
_SOURCE_LABELS: dict[str, str] = {}


def label_source(file: str, label: str) -> None:
    """Show ``file`` as ``label`` in errors, generated comments and reports (``In [3]``)."""
    _SOURCE_LABELS[file] = label


def _label(file: str) -> str | None:
    return _SOURCE_LABELS.get(file) or _ipython_cell(file)


def _ipython_cell(file: str) -> str | None:
    """``In [N]`` for a plain cell of the IPython session this process runs, if any: IPython keeps
    the number its own tracebacks show for each cell's file (nothing is imported for this)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    numbers = getattr(getattr(shell, "compile", None), "_filename_map", None)
    number = numbers.get(file) if isinstance(numbers, dict) else None
    return f"In [{number}]" if number is not None else None


def labelled(file: str) -> bool:
    return _label(file) is not None


def where(file: str, line) -> str:
    """``file:line``, or ``In [3], line 10`` for a labelled notebook cell."""
    label = _label(file)
    return f"{label}, line {line}" if label else f"{file}:{line}"


@dataclass(frozen=True)
class SourceLocation:
    """Where a piece of IR came from in the user's Python source."""

    file: str
    line: int
    col: int = 0
    text: str = ""  # the source line itself, for the caret display

    def __str__(self) -> str:
        return where(self.file, self.line)


class CompileError(ValueError):
    """A kernel that cannot be compiled, with the kernel line that caused it."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        self.message = message
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        if self.loc is None:
            return self.message
        lines = [f"{where(self.loc.file, self.loc.line)}: {self.message}"]
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


class InternalCompilerError(CompileError):
    """The compiler failed on a kernel it should have lowered or rejected: a bug of ours, not the
    user's. The message says so, names the stage and keeps the user's line where one is known."""

    def __init__(self, message: str, loc: SourceLocation | None = None):
        if not message.startswith("internal error"):
            message = (f"internal error in tileworkbench ({message}); this is a compiler bug, please report it "
                       f"with the kernel (TILEWORKBENCH_DEBUG=1 shows the traceback)")
        super().__init__(message, loc)


class KernelRuntimeError(RuntimeError):
    """A kernel launch that failed or was called with arguments that do not match."""


class NoDeviceError(RuntimeError):
    """A question only a CUDA device answers, asked on a machine without one (``carver.arch.driver
    .get_num_sms()``): the caller's situation, not a compiler failure, also where a kernel's body
    asks it while it is built."""


class TileworkbenchWarning(UserWarning):
    """Something suspicious tileworkbench found in a kernel; compilation goes on. The message
    names the problem and the warning points at the kernel line."""


@contextlib.contextmanager
def internal_errors(stage: str, loc: SourceLocation | None = None):
    """Inside, an exception that is not one of ours is a compiler bug: it leaves as an
    :class:`InternalCompilerError` naming ``stage`` (``TILEWORKBENCH_DEBUG=1`` lets it through as
    it is). Running out of Python's recursion limit means the kernel is too deep: a CompileError."""
    try:
        yield
    except (CompileError, KernelRuntimeError):
        raise
    except RecursionError:
        raise CompileError(TOO_DEEP, loc) from None
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        raise InternalCompilerError(f"{stage} failed with {type(exc).__name__}: {exc}", loc) from exc


# ---- where the user is -----------------------------------------------------------------------

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_USER_CODE_IN_PACKAGE = (os.path.join(_PACKAGE, "examples"),)  # kernels written like a user's


def _is_package_frame(frame) -> bool:
    """The frame runs tileworkbench's own code (by file, or by module for code Python generates,
    such as a dataclass's ``__init__``); the examples count as user code."""
    filename = frame.f_code.co_filename
    if filename.startswith("<"):
        module = frame.f_globals.get("__name__", "")
        return module.startswith("tileworkbench.") and not module.startswith("tileworkbench.examples")
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE + os.sep) and not path.startswith(_USER_CODE_IN_PACKAGE)


def _column(frame) -> int:
    """The column of the expression the frame is running (Python 3.11+ keeps one per instruction)."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return 0
    for index, (line, _end_line, col, _end_col) in enumerate(positions()):
        if index == frame.f_lasti // 2:
            return col if line == frame.f_lineno and col is not None else 0
    return 0


def caller_location() -> SourceLocation | None:
    """The innermost frame outside tileworkbench (the user's line that called into it), or None."""
    frame = sys._getframe(1)
    while frame is not None and _is_package_frame(frame):
        frame = frame.f_back
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    text = linecache.getline(filename, frame.f_lineno, frame.f_globals).rstrip("\n")
    return SourceLocation(filename, frame.f_lineno, _column(frame), text)


def user_error(message: str) -> CompileError:
    """A CompileError at the user's line that called into tileworkbench (for API misuse)."""
    return CompileError(message, caller_location())


def lab_dependency(module: str, feature: str):
    """``import module`` for a workbench feature, or an ImportError saying it is part of the
    notebook stack that ``pip install 'tileworkbench[lab]'`` brings (the compiler and runtime
    need none of it)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{feature} needs {module.split('.')[0]}, part of tileworkbench's notebook stack: "
                          "pip install 'tileworkbench[lab]' (JupyterLab, ipywidgets, pandas, matplotlib)") from None

