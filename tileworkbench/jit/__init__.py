"""jit: lower() to an Artifact, compile() to a Kernel, the Profiler and the compile caches.

As TileLang's ``tilelang.jit`` it also offers ``jit``, ``compile`` and ``JITKernel`` (looked up when
asked for: the package's modules import each other); TileLang's other ``tilelang.jit`` names raise
an ImportError that names them (``not_here.missing_name``)."""

import importlib as _importlib

from ..not_here import module_getattr as _module_getattr

_REEXPORTS = {"jit": ("decorator", "jit"), "compile": ("kernel", "compile"), "JITKernel": ("kernel", "Kernel")}
_missing = _module_getattr(__name__, "jit")


def __getattr__(name):
    if name in _REEXPORTS:
        module, attribute = _REEXPORTS[name]
        return getattr(_importlib.import_module(f"{__name__}.{module}"), attribute)
    return _missing(name)
