"""``set_autotune_inputs``: TileLang's way to give the autotuner the tensors to time each config on
(a varlen kernel's real sequence lengths, say) instead of random ones:

    with set_autotune_inputs(q, k, v, cu_seqlens):     # or set_autotune_inputs([q, k, v, ...])
        kernel = flashattn(batch, heads, ...)           # an @autotune'd builder: timed on those

The tensors are the kernel's inputs (its ``out_idx`` outputs are allocated), innermost ``with`` first."""

from __future__ import annotations

import threading

_local = threading.local()


class AutotuneInputs:
    """The context ``set_autotune_inputs`` returns: inside it, ``captured_inputs()`` is its tensors."""

    __slots__ = ("tensors",)

    def __init__(self, tensors: list):
        self.tensors = tensors

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def set_autotune_inputs(*tensors) -> AutotuneInputs:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return AutotuneInputs(list(tensors))


def captured_inputs() -> list | None:
    """The tensors of the innermost ``set_autotune_inputs`` around this call, or None."""
    stack = _stack()
    return list(stack[-1].tensors) if stack else None
