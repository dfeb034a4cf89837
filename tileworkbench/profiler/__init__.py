"""``tileworkbench.profiler``, as TileLang spells it: ``do_bench`` (timing any callable on the
GPU, ``backend/timing.py``) and the ``Profiler`` a kernel's ``get_profiler()`` gives
(``jit/profiler.py``), with the tensor supplies and comparison TileLang also offers here. TileLang's
other ``tilelang.profiler`` names raise an ImportError that names them."""

from ..backend.timing import do_bench
from ..jit.profiler import Profiler, TensorSupplyType
from ..not_here import module_getattr
from ..utils.tensor import get_tensor_supply, torch_assert_close

__all__ = ["Profiler", "TensorSupplyType", "do_bench", "get_tensor_supply", "torch_assert_close"]
__getattr__ = module_getattr(__name__, "profiler")
