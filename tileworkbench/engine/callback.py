"""``tilelang.engine.callback`` in part: the registration of a function that edits the generated
CUDA before it is compiled. Programs import it and often leave it unused (TileLang's GDN examples
keep ``# @register_cuda_postproc_callback`` commented out); tileworkbench's code generation has no
such hook, so registering one is refused with an error that says so, never accepted and ignored
(the edit would silently not happen)."""

from __future__ import annotations

from ..errors import CompileError
from ..not_here import backend_part

_WHY = ("tileworkbench has no hook into its code generation: the CUDA it compiles is the generated source "
        "(kernel.get_kernel_source()); pass configs (tileworkbench.PassConfigKey) choose among its forms")


def register_cuda_postproc_callback(func=None, override: bool = True):
    """Refused (module doc): a ``CompileError`` whether used as ``@register_cuda_postproc_callback``
    or called with a function."""
    raise CompileError(f"register_cuda_postproc_callback is not supported: {_WHY}")


__getattr__ = backend_part(__name__)
