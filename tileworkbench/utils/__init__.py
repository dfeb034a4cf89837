"""``tileworkbench.utils``, as TileLang spells it: ``utils.tensor`` (input supplies and a tolerant
comparison of tensors), and the two of its names TileLang also offers here. TileLang's other
``tilelang.utils`` names raise an ImportError that names them (``not_here.missing_name``)."""

from ..not_here import module_getattr
from . import tensor
from .tensor import TensorSupplyType, torch_assert_close

__all__ = ["TensorSupplyType", "tensor", "torch_assert_close"]
__getattr__ = module_getattr(__name__, "utils")
