"""Experiment tool: the CUDA source TileLang 0.1.15 generates for one of our side-by-side programs
(``tileworkbench/examples/tilelang_programs/FAMILY.py``, case CASE), on a machine without a GPU or
torch, to read beside ours.

TileLang's lowering (TVM underneath) runs on the CPU; only its import wants torch, so the script
puts a stand-in ``torch`` module first on the path (attributes are mocks: nothing here may run a
tensor). The program's ``compile`` is intercepted where TileLang's JIT would compile for the GPU,
and the prim_func it built is lowered for sm_90a instead. Pass configs (``--config
tl.disable_warp_specialized=1``) apply to the lowering, over those the program's ``@jit`` gives.

    python3.12 scripts/experiments/tilelang_source_on_cpu.py FAMILY CASE SITE OUT.cu [--config k=v ...]

SITE is TileLang's unpacked site (``tar -xJf .tilelang/site.tar.xz -C SITE``); Python 3.12 (the
wheel's) with numpy, typing_extensions, ml_dtypes and cloudpickle. This is how TileLang's FP8
indexer was found to read its key scales unwritten (docs/experiments.md, "FP8 indexer").
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

STAND_IN_TORCH = '''
import sys, types
from unittest.mock import MagicMock

class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = MagicMock(name=f"torch.{name}")
        setattr(self, name, value)
        return value

sys.modules[__name__].__class__ = _Module
__version__ = "2.5.0"
class dtype: pass
class Tensor: pass
class device: pass
class Size(tuple): pass
'''


class _Captured(Exception):
    """Raised in place of TileLang's GPU compile, carrying the prim_func it was given."""

    def __init__(self, func, pass_configs):
        super().__init__("captured")
        self.func, self.pass_configs = func, dict(pass_configs or {})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family")
    ap.add_argument("case")
    ap.add_argument("site", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--config", action="append", default=[], help="pass config KEY=VALUE (1/0 for flags)")
    args = ap.parse_args()
    configs = {}
    for item in args.config:
        key, _, value = item.partition("=")
        configs[key] = {"1": True, "0": False}.get(value, value)

    stand_in = Path(tempfile.mkdtemp()) / "torch"
    stand_in.mkdir()
    (stand_in / "__init__.py").write_text(STAND_IN_TORCH)
    sys.path[:0] = [str(stand_in.parent), str(args.site), str(REPO)]

    from tileworkbench.bench.tilelang_programs import PROGRAMS, tilelang_source

    import tilelang
    from tilelang import tvm
    from tilelang.engine.lower import lower

    path = Path(tempfile.mkdtemp()) / f"{args.family}.py"
    path.write_text(tilelang_source((PROGRAMS / f"{args.family}.py").read_text(), args.family))
    spec = importlib.util.spec_from_file_location(args.family, path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)

    jit_module = sys.modules["tilelang.jit"]

    def capture(func=None, *_, pass_configs=None, **__):
        raise _Captured(func, pass_configs)

    jit_module.compile = capture
    try:
        program.CASES[args.case]["compile"]()
        raise SystemExit("the case compiled without reaching TileLang's compile: nothing captured")
    except _Captured as captured:
        func, configs = captured.func, {**captured.pass_configs, **configs}  # the program's own, then --config
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    with target, tilelang.transform.PassContext(config=configs):
        artifact = lower(func, target=target)
    args.out.write_text(artifact.kernel_source)
    print(f"wrote {args.out} ({len(artifact.kernel_source)} characters)")


if __name__ == "__main__":
    main()
