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


def main_with(tmp_path, signature: str, statements: str, threads: int = 128):
    """Import a file defining ``@T.prim_func def main(<signature>)``, one block of ``threads``,
    whose kernel body is ``statements`` (its later lines indented by 8 spaces, for the body), and
    return ``main``: what the refusal tests build."""
    source = f'''import tileworkbench.language as T


@T.prim_func
def main({signature}):
    with T.Kernel(1, threads={threads}):
        {statements}
'''
    return import_kernel_file(tmp_path, source).main


def lower_main_with(tmp_path, signature: str, statements: str, threads: int = 128):
    """``main_with``'s kernel lowered for sm_90a (where a refusal comes from a pass)."""
    import tileworkbench as tw

    return tw.lower(main_with(tmp_path, signature, statements, threads), target="sm_90a")
