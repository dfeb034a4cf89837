"""Experiment tool: the CUDA source TileLang 0.1.15 generates for one of our side-by-side programs
(``tileworkbench/examples/tilelang_programs/FAMILY.py``, case CASE) or one of TileLang's example
files (a path, and an expression that compiles its kernel), on a machine without a GPU or torch,
to read beside ours.

TileLang's lowering (TVM underneath) runs on the CPU; only its import wants torch, so the script
answers ``import torch`` (and ``triton``, which examples' helpers import) with stand-in modules
whose attributes are mocks: nothing here may run a tensor. The program's ``compile`` is intercepted where TileLang's JIT would compile for the GPU,
and the prim_func it built is lowered for sm_90a instead. Pass configs (``--config
tl.disable_warp_specialized=1``) apply to the lowering, over those the program's ``@jit`` gives.

    python3.12 scripts/experiments/tilelang_source_on_cpu.py FAMILY CASE SITE OUT.cu [--config k=v ...]
    python3.12 scripts/experiments/tilelang_source_on_cpu.py FILE.py "f.compile(heads=128, ...)" SITE OUT.cu

SITE is TileLang's unpacked site (``tar -xJf .tilelang/site.tar.xz -C SITE``); Python 3.12 (the
wheel's) with numpy, typing_extensions, ml_dtypes and cloudpickle. This is how TileLang's FP8
indexer was found to read its key scales unwritten (docs/experiments.md, "FP8 indexer").
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import tempfile
import types
from pathlib import Path
from unittest.mock import MagicMock

REPO = Path(__file__).resolve().parents[2]

STAND_INS = ("torch", "triton", "einops")  # what TileLang and the examples import that the lowering never runs


class _StandIn(types.ModuleType):
    """A module whose every attribute is a mock (types stay types: ``isinstance`` checks work)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = MagicMock(name=f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of ``STAND_INS`` and their submodules give stand-in modules."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in STAND_INS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandIn(spec.name)
        module.__path__ = []
        if spec.name == "torch":
            give_torch_types(module)
        return module

    def exec_module(self, module):
        pass


def give_torch_types(module) -> None:
    """A stand-in ``torch`` with the version and the types TVM's FFI checks values against (they
    must be types, not mocks)."""
    module.__version__ = "2.5.0"
    for name in ("dtype", "Tensor", "device"):
        setattr(module, name, type(name, (), {}))
    module.Size = type("Size", (tuple,), {})


class Captured(Exception):
    """Raised in place of TileLang's GPU compile, carrying the prim_func it was given."""

    def __init__(self, func, pass_configs):
        super().__init__("captured")
        self.func, self.pass_configs = func, dict(pass_configs or {})


def intercept_compile() -> None:
    """TileLang's JIT compile raises ``Captured`` with its prim_func and pass configs instead of
    compiling for the GPU."""
    def capture(func=None, *_, pass_configs=None, **__):
        raise Captured(func, pass_configs)

    sys.modules["tilelang.jit"].compile = capture


def lower_for_sm90a(func, configs: dict) -> str:
    """TileLang's CUDA for ``func`` on sm_90a under ``configs``."""
    import tilelang
    from tilelang import tvm
    from tilelang.engine.lower import lower

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target, tilelang.transform.PassContext(config=configs):
        return lower(func, target=target).kernel_source


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program", help="a family of tileworkbench/examples/tilelang_programs, or a .py file")
    ap.add_argument("call", help="the family's case, or a Python expression in the file's namespace that compiles")
    ap.add_argument("site", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--config", action="append", default=[], help="pass config KEY=VALUE (1/0 for flags)")
    args = ap.parse_args()
    configs = {}
    for item in args.config:
        key, _, value = item.partition("=")
        configs[key] = {"1": True, "0": False}.get(value, value)

    sys.meta_path.insert(0, _StandIns())
    sys.path[:0] = [str(args.site), str(REPO)]

    from tileworkbench.bench.tilelang_programs import PROGRAMS, tilelang_source

    if args.program.endswith(".py"):
        path = Path(args.program).resolve()
        sys.path.insert(0, str(path.parent))  # the example's own helpers beside it
    else:
        path = Path(tempfile.mkdtemp()) / f"{args.program}.py"
        path.write_text(tilelang_source((PROGRAMS / f"{args.program}.py").read_text(), args.program))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    if args.program.endswith(".py"):
        def compile_it():
            return eval(args.call, vars(program))  # noqa: S307 - an expression the user typed
    else:
        compile_it = program.CASES[args.call]["compile"]

    intercept_compile()
    try:
        compile_it()
        raise SystemExit("the case compiled without reaching TileLang's compile: nothing captured")
    except Captured as captured:
        func, configs = captured.func, {**captured.pass_configs, **configs}  # the program's own, then --config
    source = lower_for_sm90a(func, configs)
    args.out.write_text(source)
    print(f"wrote {args.out} ({len(source)} characters)")


if __name__ == "__main__":
    main()
