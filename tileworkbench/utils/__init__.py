"""``tileworkbench.utils``, as TileLang spells it: ``utils.tensor`` (input supplies and a tolerant
comparison of tensors)."""

from . import tensor

__all__ = ["tensor"]
