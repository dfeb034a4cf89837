"""``@T.macro``: a helper written in kernel code, inlined where a kernel calls it."""

from __future__ import annotations

from ..frontend.specs import MacroSpec


def macro(fn=None, **options):
    """``@T.macro`` (or ``@T.macro()``) on a function whose body is kernel code (``T.Parallel``
    loops, ``T.copy``, ``T.gemm`` ...): each call inside a kernel inlines that body there, its
    parameters bound to the call's values (buffers, fragments, numbers, loop variables). It
    returns nothing; results go into the buffers it is given."""
    if fn is None:
        return lambda f: MacroSpec(f)
    return MacroSpec(fn)
