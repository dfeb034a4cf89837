"""tileworkbench: write, understand and tune GPU tile kernels.

A TileLang-compatible DSL (``import tileworkbench.language as T``), a compiler core in Python
(AST -> IR -> passes -> CUDA C++ for sm_90a), CuPy/NVRTC to run it, and a notebook workbench
that shows every step.
"""

import sys

from .version import __version__  # noqa: E402
from .errors import CompileError, KernelRuntimeError, SourceLocation, TileworkbenchWarning  # noqa: E402
from .target import PassConfigKey, PassContext, Target  # noqa: E402
from .jit.lower import Artifact, lower  # noqa: E402
from .jit.kernel import Kernel, compile  # noqa: E402,A004
from .jit import cache as _cache  # noqa: E402
from .jit.decorator import JitFunction, jit  # noqa: E402
from .jit.profiler import TensorSupplyType  # noqa: E402
from . import language  # noqa: E402
from . import autotuner, carver, cuda, layout, profiler, transform, utils  # noqa: E402
from .layout import Layout  # noqa: E402
from .autotuner.decorator import autotune  # noqa: E402


from .math import cdiv, next_power_of_2  # noqa: E402
from .profiler import Profiler  # noqa: E402
from .not_here import NOT_HERE, NotHereFinder, not_supported  # noqa: E402

JITKernel = Kernel  # TileLang's name for a compiled kernel (what compile() and jit(...).compile() return)

if not any(isinstance(f, NotHereFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, NotHereFinder())  # import tileworkbench.<TileLang module we lack>: says why


def disable_cache():
    """TileLang's ``tilelang.disable_cache()``: ``compile`` (and ``@jit``'s compiles) neither read nor
    write the compile caches, in this process or on disk, until ``enable_cache()``."""
    _cache.set_enabled(False)


def enable_cache():
    """TileLang's ``tilelang.enable_cache()``: the compile caches are used again (the default)."""
    _cache.set_enabled(True)


def is_cache_enabled() -> bool:
    """TileLang's ``tilelang.is_cache_enabled()``: whether ``compile`` uses its caches (the disk cache
    also needs ``TILEWORKBENCH_DISABLE_CACHE`` unset)."""
    return _cache.memory_enabled()


def set_log_level(level):
    """TileLang's ``tilelang.set_log_level(level)``: the level of the ``tileworkbench`` logger. The
    compiler itself reports through exceptions and ``warnings``, not the log."""
    import logging

    logging.getLogger("tileworkbench").setLevel(level)


# TileLang names that are TVM's, other targets' or its tools': asked for, they say so instead of missing.
def __getattr__(name):
    if name in NOT_HERE:
        raise not_supported(name)
    raise AttributeError(f"module 'tileworkbench' has no attribute {name!r}")


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt extension (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "tileworkbench"}]


def load_ipython_extension(ipython):
    """``%load_ext tileworkbench``: registers the ``%%tilekernel`` cell magic."""
    from .notebook.magic import register_magics

    register_magics(ipython)


__all__ = ["CompileError", "KernelRuntimeError", "SourceLocation", "TileworkbenchWarning", "PassConfigKey",
           "PassContext", "Target",
           "Artifact", "lower", "Kernel", "JITKernel", "compile", "jit", "JitFunction", "autotune", "autotuner",
           "cdiv", "next_power_of_2", "disable_cache", "enable_cache", "is_cache_enabled", "set_log_level",
           "profiler", "Profiler", "utils", "layout", "Layout", "cuda", "carver", "TensorSupplyType", "language", "transform", "__version__"]
