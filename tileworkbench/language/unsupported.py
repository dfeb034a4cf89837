"""TileLang names this DSL does not (yet) have: asking for one is a ``CompileError`` that names it
and says why, at the kernel line, never a bare ``AttributeError`` (docs/tilelang.md keeps the list)."""

from __future__ import annotations

_NOT_YET = "not supported yet"
_TVM = "a TVM construct; tileworkbench has no TVM underneath"

UNSUPPORTED = {
    "atomic_addx2": _NOT_YET + " (T.atomic_add is supported)",
    "reduce_absmax_all": _NOT_YET,
    "cumsum": _NOT_YET,
    "comm_reducer": _TVM,
    "attr": _TVM,
    "call_extern": _TVM,
    "call_intrin": _TVM,
    "tvm_thread_allreduce": _TVM + " (T.reduce_* reduces fragments in registers)",
    "import_source": _TVM,
}


def unsupported(name: str):
    """The error for ``T.<name>``: a CompileError for TileLang's names we lack, else AttributeError."""
    from ..frontend.builder import error

    if name in UNSUPPORTED:
        return error(f"T.{name} is not supported by tileworkbench: {UNSUPPORTED[name]}")
    return AttributeError(f"tileworkbench.language has no attribute {name!r} (nor does TileLang's, as far as "
                          "tileworkbench knows; docs/tilelang.md lists what is supported)")
