"""Names an ``if`` on a kernel value binds in its branches.

The front end builds both branches of such an ``if`` while the kernel is built, one after the
other; a Python name a branch binds (``found = 5`` where ``found`` held the Python value ``-1``, or
a name first bound inside the branch) would otherwise keep, after the ``if``, whatever the branch
built last gave it, whichever branch the threads take when the kernel runs: the generated code
wrote ``W[tx] = 5`` for every thread. So each branch starts from the names as they were before the
``if``, and a name either branch bound reads, after the ``if``, as a :class:`BranchOnly` that the
parser refuses with what to write instead (a kernel variable assigned in the branches). A kernel
variable's assignment (``x = T.int32(0)`` or ``T.alloc_var`` before the ``if``) binds no name, so
it is untouched. ``statements.Statements.visit_If`` uses :class:`BranchNames`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BranchOnly:
    """What a name holds after an ``if`` on a kernel value bound it in a branch."""

    name: str
    line: int | None

    def message(self) -> str:
        at = f" at line {self.line}" if self.line else ""
        return (f"{self.name} is bound inside the `if`{at}, whose condition is known only when the kernel runs: "
                f"after the `if` it has no one value. To carry a value out of the branches, make {self.name} a "
                f"kernel variable before the `if` ({self.name} = T.int32(0), T.float32(0), or T.alloc_var) and "
                "assign it in them")


class BranchNames:
    """The names of one scope around an ``if``'s branches: ``start_branch()`` before each branch
    (the names as before the ``if``), ``end_if(line)`` after the last."""

    def __init__(self, names: dict):
        self.names = names
        self.before = dict(names)
        self.bound: set = set()

    def start_branch(self):
        self._note()
        self.names.clear()
        self.names.update(self.before)

    def end_if(self, line: int | None):
        self._note()
        self.names.clear()
        self.names.update(self.before)
        for name in self.bound:
            self.names[name] = BranchOnly(name, line)

    def _note(self):
        self.bound |= {n for n, v in self.names.items() if n not in self.before or self.before[n] is not v}
