"""How a kernel's calls are launched, in words (``Kernel.launch_path``): the C launch path
(``backend/fastcall.c``, and how it reads tensors, for which sizes of a ``T.dynamic`` kernel) or
the Python launcher, and why (``python -m tileworkbench.bench launch`` times both)."""

from __future__ import annotations

from ..backend import fastcall
from . import sized_launch


def launch_path(kernel) -> str:
    """``Kernel.launch_path``: how a call of ``kernel`` (a ``jit.kernel.Kernel``) is launched, and why."""
    if kernel._fast is not None:
        reader = {"dlpack": "through DLPack's C exchange API", "attributes": "by their attributes"}
        sizes = next((key for key, launcher in kernel._sized.items() if launcher is kernel._fast), None)
        sized = f", for the sizes {sizes}" if sizes is not None else ""
        return (f"C launch path{sized}: torch tensors read {reader.get(kernel._fast.tensor_reader, '?')}, "
                "anything else through the Python launcher")
    if kernel._launch is None:
        return "not loaded on a GPU: calls will load it first"
    if kernel._sizes:
        why = ("C launchers per set of sizes are on: a set of sizes gets one at its second call"
               if sized_launch.enabled() else f"T.dynamic sizes: C launchers per set of sizes are off "
               f"({sized_launch.ENV}=0 turned them off)")
        return f"Python launcher ({why})"
    if kernel.record.get("fast_plan") is None:
        return ("Python launcher (no fixed plan for the C path: a debug record, a timeline buffer, "
                "or parameters it does not take)")
    return f"Python launcher ({fastcall.why_not() or 'the C path is not available for this kernel here'})"
