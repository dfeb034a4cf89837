"""TileLang programs run unchanged: every ``import tilelang`` (and ``tilelang.x``) answered by
tileworkbench.

    python -m tileworkbench.as_tilelang script.py [arguments ...]

runs a TileLang script as ``__main__`` with ``tilelang`` resolving to ``tileworkbench`` and
``tilelang.x`` to ``tileworkbench.x`` (so ``import tilelang.language as T`` is our DSL, and a
module we refuse says why: ``from tilelang import tvm`` and a plain ``import tvm`` are an
``ImportError`` naming it, ``not_here``). ``with as_tilelang(): ...`` does the same for the code run inside it (a module
loaded with ``importlib``, an ``exec``): TileLang's own modules, where a process imported them
before, are set aside meanwhile and put back after, so one process can hold a program under both
compilers (``scripts/experiments/hand_ws_side_by_side.py``). A module keeps what it imported.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys

_NAME = "tilelang"
USAGE = "usage: python -m tileworkbench.as_tilelang script.py [arguments ...]"


def _is_tilelang(name: str) -> bool:
    return name == _NAME or name.startswith(_NAME + ".")


class TileLangAsTileworkbench(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A ``sys.meta_path`` finder: ``tilelang[.x]`` is ``tileworkbench[.x]`` (the module itself,
    already imported or imported now); ``import tvm``, which TileLang's package provides, is the
    ``ImportError`` that says tileworkbench has no TVM."""

    def find_spec(self, name, path=None, target=None):
        if _is_tilelang(name):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if name.split(".")[0] == "tvm":  # TileLang ships TVM as a package of its own: not here, and why
            # A spec without an origin, whose loading raises: `import tvm` says why, while a probe
            # (torch.compile's find_spec("tvm") among its skip rules) sees no files and goes on.
            return importlib.machinery.ModuleSpec(name, _NoTvm(), origin=None)
        return None

    def create_module(self, spec):
        return importlib.import_module("tileworkbench" + spec.name[len(_NAME):])

    def exec_module(self, module):
        pass  # it ran when tileworkbench imported it


class _NoTvm(importlib.abc.Loader):
    def create_module(self, spec):
        from .not_here import not_supported

        raise not_supported("tvm")

    def exec_module(self, module):
        pass


@contextlib.contextmanager
def as_tilelang():
    """``import tilelang...`` inside the block gives tileworkbench's modules (module doc)."""
    theirs = {k: v for k, v in sys.modules.items() if _is_tilelang(k)}
    for k in theirs:
        del sys.modules[k]
    finder = TileLangAsTileworkbench()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if _is_tilelang(k)]:
            del sys.modules[k]
        sys.modules.update(theirs)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        print("Runs a TileLang script with its tilelang imports answered by tileworkbench.")
        return 0 if argv else 2
    script = argv[0]
    if not os.path.isfile(script):
        print(f"tileworkbench.as_tilelang: no such script: {script}\n{USAGE}", file=sys.stderr)
        return 2
    saved_argv, saved_path = sys.argv, list(sys.path)
    # as under `python script.py`: the script sees its own name and arguments, and its folder's
    # modules (an example's utils.py) are importable
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with as_tilelang():
            runpy.run_path(script, run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


if __name__ == "__main__":
    sys.exit(main())
