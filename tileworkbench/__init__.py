"""tileworkbench: write, understand and tune GPU tile kernels.

A TileLang-compatible DSL (``import tileworkbench.language as T``), a compiler core in Python
(AST -> IR -> passes -> CUDA C++ for sm_90a), CuPy/NVRTC to run it, and a notebook workbench
that shows every step.
"""

from .version import __version__  # noqa: E402
from .errors import CompileError, KernelRuntimeError, SourceLocation, TileworkbenchWarning  # noqa: E402
from .target import PassConfigKey, PassContext, Target  # noqa: E402
from .jit.lower import Artifact, lower  # noqa: E402
from .jit.kernel import Kernel, compile  # noqa: E402,A004
from .jit.decorator import JitFunction, jit  # noqa: E402
from .jit.profiler import TensorSupplyType  # noqa: E402
from . import language  # noqa: E402
from . import autotuner, layout, profiler, utils  # noqa: E402
from .autotuner.decorator import autotune  # noqa: E402


def cdiv(a, b):
    """``ceil(a / b)`` of two integers (TileLang's ``tilelang.cdiv``, for sizes outside kernels)."""
    return -(-a // b)


# TileLang names that are TVM's, or other targets': asked for, they say so instead of missing.
_NOT_HERE = {
    "tvm": "tileworkbench has no TVM underneath: it compiles its own IR to CUDA. Write kernels with "
           "tileworkbench.language (T.*); TVM's own APIs (tvm.tir, tvm.IRModule, ...) are not available",
    "tir": "tileworkbench has no TVM TIR; kernels are written with tileworkbench.language (T.*)",
}


def __getattr__(name):
    if name in _NOT_HERE:
        raise ImportError(f"tileworkbench.{name} is not supported: {_NOT_HERE[name]}")
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
           "Artifact", "lower", "Kernel", "compile", "jit", "JitFunction", "autotune", "autotuner", "cdiv",
           "profiler", "utils", "layout", "TensorSupplyType", "language", "__version__"]
