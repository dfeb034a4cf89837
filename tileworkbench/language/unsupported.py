"""TileLang names this DSL does not (yet) have: asking for one is a ``CompileError`` that names it
and says why, at the kernel line, never a bare ``AttributeError`` (docs/tilelang.md keeps the list).
Which names TileLang has is ``tilelang_names.NAMES`` (its 0.1.15 ``tilelang.language``); a reason
is written here for some, and follows from the spelling for the others."""

from __future__ import annotations

import dis
import re

from ..errors import CompileError
from ..tilelang_names import NAMES, VERSION

_NOT_YET = "not supported yet"
_TVM = "a TVM construct; tileworkbench has no TVM underneath"

UNSUPPORTED = {
    "reduce_absmax_all": _NOT_YET,
    "comm_reducer": _TVM,
    "attr": _TVM,
    "call_intrin": _TVM,
    "tvm_thread_allreduce": _TVM + " (T.reduce_* reduces fragments in registers)",
}


class UnsupportedName(CompileError, AttributeError):
    """A TileLang name tileworkbench does not have: a CompileError at the kernel line, which
    ``hasattr`` and ``getattr(T, name, default)`` still read as a missing attribute."""


# Families of TileLang's names, by how they are spelt, with why they are not here
_TVM_PREFIXES = ("tvm_", "TVM", "call_", "llvm_", "anylist_", "q_multiply_shift", "sblock", "func_")
_BLACKWELL = ("tcgen05", "tmem", "clc_", "2sm", "umma", "blockscaled")
_VECTOR = re.compile(r"^(u?int\d+|bfloat16|tfloat32|float\d+(_\w+)?)x\d+$")


def _reason(name: str) -> str:
    """Why TileLang's ``T.<name>`` is not in tileworkbench (the hand-written reasons first)."""
    if name in UNSUPPORTED:
        return UNSUPPORTED[name]
    if name.startswith(_TVM_PREFIXES):
        return _TVM
    if any(part in name for part in _BLACKWELL):
        return "a Blackwell (sm_100) construct; tileworkbench targets Hopper (sm_90a)"
    if _VECTOR.match(name):
        return "vector dtypes (a dtype with lanes) are " + _NOT_YET
    return _NOT_YET


def unsupported(name: str):
    """The error for ``T.<name>``: for a name TileLang has (``tilelang_names.NAMES``, or a reason
    written here) an ``UnsupportedName`` that says why we lack it, at the kernel line; else an
    AttributeError that says neither has it."""
    from ..frontend.builder import error

    if name in UNSUPPORTED or name in NAMES:
        whose = f"TileLang {VERSION} has it" if name in NAMES else "a TileLang name"
        return error(f"T.{name} is not supported by tileworkbench: {_reason(name)} "
                     f"({whose}; docs/tilelang.md lists what tileworkbench supports)", UnsupportedName)
    return AttributeError(f"tileworkbench.language has no attribute {name!r}, and TileLang {VERSION}'s "
                          "tilelang.language has none either; docs/tilelang.md lists what is supported")


_IMPORT_FROM = dis.opmap["IMPORT_FROM"]


def when_imported(exc: Exception, name: str, caller) -> Exception:
    """``exc`` as an ``ImportError`` with its words where ``caller`` (the frame asking for ``name``)
    is running ``from tileworkbench.language import <name>``: Python turns an AttributeError raised
    there into "cannot import name" and drops the reason; ``exc`` itself otherwise."""
    code = caller.f_code.co_code
    if 0 <= caller.f_lasti < len(code) and code[caller.f_lasti] == _IMPORT_FROM:
        return ImportError(f"cannot import name {name!r} from 'tileworkbench.language': {exc}", name=name)
    return exc
