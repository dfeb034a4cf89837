"""``tileworkbench.profiler``, as TileLang spells it: ``do_bench`` (timing any callable on the
GPU, ``backend/timing.py``) and the ``Profiler`` a kernel's ``get_profiler()`` gives
(``jit/profiler.py``)."""

from ..backend.timing import do_bench
from ..jit.profiler import Profiler, TensorSupplyType

__all__ = ["Profiler", "TensorSupplyType", "do_bench"]
