"""Print tileworkbench/language/tilelang_names.py: the names TileLang's ``tilelang.language``
offers (its ``__all__`` and public module attributes), so that asking ours for one we lack says
so (``language/unsupported.py``) instead of claiming TileLang has no such name.

    PYTHONPATH=<TileLang's unpacked site> python3.12 scripts/tilelang_names.py > tileworkbench/language/tilelang_names.py

Run where TileLang imports (the unpacked 0.1.15 site of docs/tilelang.md; it imports torch first,
and where there is none a stand-in module of a few classes, ``Tensor``, ``dtype``, ``device``,
``Size``, ``Generator``, ``Stream``, and a ``version`` namespace, is enough to read the names).
"""

import textwrap

import tilelang
import tilelang.language as T

# public names, and CUDA's intrinsics as TileLang spells them (``T.__exp``), not Python's dunders
names = sorted(n for n in set(getattr(T, "__all__", ())) | set(dir(T))
               if not n.startswith("_") or (n.startswith("__") and not n.endswith("__")))
body = textwrap.fill(", ".join(repr(n) for n in names), width=108, initial_indent="    ", subsequent_indent="    ")
print(f'''"""TileLang {tilelang.__version__}'s ``tilelang.language`` names ({len(names)}), written by
scripts/tilelang_names.py: what ``language/unsupported.py`` tells apart from names TileLang has not
either."""

VERSION = {tilelang.__version__!r}
NAMES = frozenset({{
{body}
}})''')
