"""Print tileworkbench/tilelang_names.py: the names TileLang's ``tilelang.language`` offers
(its ``__all__`` and public module attributes), and those of the other modules a TileLang program
imports from, so that asking ours for one we lack says so (``language/unsupported.py``,
``not_here.missing_name``) instead of claiming TileLang has no such name.

    PYTHONPATH=<TileLang's unpacked site> python3.12 scripts/tilelang_names.py > tileworkbench/tilelang_names.py

Run where TileLang imports (the unpacked 0.1.15 site of docs/tilelang.md; it imports torch first,
and where there is none a stand-in module of a few classes, ``Tensor``, ``dtype``, ``device``,
``Size``, ``Generator``, ``Stream``, and a ``version`` namespace, is enough to read the names).
"""

import importlib
import inspect
import textwrap

import tilelang
import tilelang.language as T

# The modules besides tilelang.language whose names programs import (tilelang.X -> tileworkbench.X)
MODULES = ("utils", "utils.tensor", "profiler", "autotuner", "jit", "layout", "transform")


def _frozenset(names) -> str:
    body = textwrap.fill(", ".join(repr(n) for n in sorted(names)), width=104, initial_indent="        ",
                         subsequent_indent="        ")
    return "frozenset({\n" + body + "\n    })"


def _own(module, name) -> bool:
    """Whether ``module.name`` is TileLang's (not a standard-library or typing name it imported)."""
    value = getattr(module, name)
    if inspect.ismodule(value):
        return value.__name__.startswith("tilelang")
    owner = getattr(value, "__module__", None)
    return owner is None or owner.startswith(("tilelang", "tvm"))


# public names, and CUDA's intrinsics as TileLang spells them (``T.__exp``), not Python's dunders
names = sorted(n for n in set(getattr(T, "__all__", ())) | set(dir(T))
               if not n.startswith("_") or (n.startswith("__") and not n.endswith("__")))
modules = {}
for short in MODULES:
    module = importlib.import_module(f"tilelang.{short}")
    modules[short] = {n for n in set(dir(module)) | set(getattr(module, "__all__", ()))
                      if not n.startswith("_") and hasattr(module, n) and _own(module, n)}
body = textwrap.fill(", ".join(repr(n) for n in names), width=108, initial_indent="    ", subsequent_indent="    ")
module_lines = "\n".join(f"    {short!r}: {_frozenset(found)}," for short, found in modules.items())
print(f'''"""TileLang {tilelang.__version__}'s ``tilelang.language`` names ({len(names)}), and those of the modules a
program imports from (``MODULES``: ``tilelang.utils`` ... by their names under ``tilelang``), written
by scripts/tilelang_names.py: what ``language/unsupported.py`` and ``not_here.missing_name`` tell
apart from names TileLang has not either."""

VERSION = {tilelang.__version__!r}
NAMES = frozenset({{
{body}
}})
MODULES = {{
{module_lines}
}}''')
