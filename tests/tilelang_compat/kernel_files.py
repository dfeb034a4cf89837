"""Kernels written to a file and imported, for tests of what the front end says while it builds
one (a kernel's source must be a file: errors point at its lines)."""

from __future__ import annotations

import importlib.util


def import_kernel_file(tmp_path, source: str, name: str = "kernel_file"):
    """Import ``source`` as a module (building the kernels it defines) and return it."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
