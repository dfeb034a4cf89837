"""Hashes of the generated sources of many kernels, to show a compiler change leaves them alone.

A refactor, or a change meant for one kind of kernel, should leave every other kernel's CUDA
and launcher byte for byte as it was; then the last GPU run still covers them. This lowers (no
GPU needed) the bench's candidates at four shapes and both dtypes, the spec kernels, the
``transpose_A`` kernels and every example, under three pass configs each, and the benchmark cases of
every ported TileLang program (``examples/tilelang_programs``, as they compile), and writes one hash
of device + host source per kernel/config pair (the "from file.py:line" banner left out).

    PYTHONPATH=. python3 scripts/source_hashes.py before.json      # at the old commit
    PYTHONPATH=. python3 scripts/source_hashes.py after.json       # at the new one
    PYTHONPATH=. python3 scripts/source_hashes.py after.json --against before.json
    ... source_hashes.py after.json --tilelang-examples /path/to/tilelang/examples --against before.json

With ``--tilelang-examples DIR`` it also hashes the kernels built from TileLang's own example files in
``DIR`` (TileLang's ``examples`` folder), each case of ``experiments/tilelang_examples.py`` (those that
stop: the exception's type), so a change shows on them too (no GPU run covers most of them).

With ``--kernel-only`` the inlined headers are left out of each hash (the device source after
``// ---- kernel ----``, and the launcher): a header change shows only where it changes a kernel's
own code; with ``--device-only`` the launcher is left out too (for a change to the launcher
alone). With ``--against`` it prints the pairs whose sources differ (and those only one side has) and
exits 1 if any differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import re
import sys
from pathlib import Path

import tileworkbench as tw
from tileworkbench.bench.gemm import candidate_kernels, spec_kernels
from tileworkbench.examples import ALL_EXAMPLES, matmul

CONFIGS = {"default": {}, "no_ws": {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
           "no_persistent": {tw.PassConfigKey.TW_DISABLE_PERSISTENT: True}}
SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (1000, 1030, 770))


def jobs():
    """(name, builder, pass configs of its own, out_idx) for every kernel compared."""
    for shape in SHAPES:
        for dtype in ("float16", "bfloat16"):
            for c in candidate_kernels(*shape, dtype):
                yield f"{c.name} {'x'.join(map(str, shape))} {dtype}", c.build, c.pass_configs, [2]
    for shape in ((4096, 4096, 4096), (1000, 1030, 770)):
        for c in spec_kernels(*shape):
            yield f"{c.name} {'x'.join(map(str, shape))}", c.build, c.pass_configs, [2]
    for trans_b in (False, True):
        yield (f"matmul transpose_A trans_B={trans_b}",
               lambda t=trans_b: matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256,
                                        trans_B=t, trans_A=True), {}, [2])
    for name, build in ALL_EXAMPLES.items():
        yield f"example {name}", build, {}, None


def program_cases():
    """(name, compile) for each benchmark case of the ported TileLang programs."""
    from tileworkbench.examples.tilelang_programs import FAMILIES
    for family in FAMILIES:
        module = importlib.import_module(f"tileworkbench.examples.tilelang_programs.{family}")
        for name, case in module.CASES.items():
            yield f"program {family}.{name}", case["compile"]


class _Sources:
    """A compiled kernel's two sources, as ``source_hash`` reads an artifact's."""

    def __init__(self, kernel):
        self.device_source, self.host_source = kernel.get_kernel_source(), kernel.get_host_source()


def _case_hash(compiled, kernel_only: bool, device_only: bool) -> str:
    """One hash for a case: its kernel's, or a hash of each kernel's for a case that launches several."""
    parts = [source_hash(_Sources(k), kernel_only, device_only) for k in getattr(compiled, "kernels", (compiled,))]
    return parts[0] if len(parts) == 1 else joined(parts)


def joined(parts: list) -> str:
    """One entry for a case of several kernels: a hash of their hashes."""
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


def source_hash(artifact, kernel_only: bool = False, device_only: bool = False) -> str:
    device = artifact.device_source
    if kernel_only or device_only:
        device = device[device.index("// ---- kernel ----"):]
    text = device if device_only else device + artifact.host_source
    return hashlib.sha256(re.sub(r"from \S+\.py:\d+", "", text).encode()).hexdigest()[:16]


def hashes(kernel_only: bool = False, device_only: bool = False) -> dict:
    lower = importlib.import_module("tileworkbench.jit.lower").lower
    out = {}
    for name, build, own_configs, out_idx in jobs():
        for config_name, configs in CONFIGS.items():
            if own_configs and config_name != "default":
                continue  # kernels with configs of their own (the spec ones) run as the bench runs them
            try:
                out[f"{name} [{config_name}]"] = source_hash(
                    lower(build(), out_idx=out_idx, pass_configs={**own_configs, **configs}), kernel_only, device_only)
            except tw.CompileError as err:  # refused kernels count too: the refusal must not change
                out[f"{name} [{config_name}]"] = f"refused: {err.message[:80]}"
    for name, compile_case in program_cases():
        try:
            out[f"{name} [default]"] = _case_hash(compile_case(), kernel_only, device_only)
        except tw.CompileError as err:
            out[f"{name} [default]"] = f"refused: {err.message[:80]}"
    return out


def example_file_hashes(folder: str, kernel_only: bool, device_only: bool) -> dict:
    """Hashes of the kernels built from TileLang's example files in ``folder`` (the cases of
    ``experiments/tilelang_examples.py``; its stand-ins for torch and the like are installed)."""
    sys.path.insert(0, str(Path(__file__).parent / "experiments"))
    examples = importlib.import_module("tilelang_examples")
    lower = importlib.import_module("tileworkbench.jit.lower").lower
    examples._install(Path(folder))
    out = {}
    for n, (file, make) in enumerate(examples.CASES):
        key = f"tilelang file {n}: {file}"
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # some files print what they build
                built = make(examples._load(Path(folder) / file))
            if hasattr(built, "get_kernel_source"):
                out[key] = _case_hash(built, kernel_only, device_only)
            else:
                parts = [source_hash(lower(p, target="sm_90a"), kernel_only, device_only)
                         for p in getattr(built, "kernels", None) or [built]]
                out[key] = joined(parts)
        except Exception as exc:  # noqa: BLE001 - a file that stops counts too: how it stops must not change
            out[key] = f"stops: {type(exc).__name__}"
    return out


def main(argv) -> int:
    if not argv or argv[0].startswith("--"):
        print(__doc__)
        return 2
    current = hashes("--kernel-only" in argv, "--device-only" in argv)
    if "--tilelang-examples" in argv:
        current.update(example_file_hashes(argv[argv.index("--tilelang-examples") + 1], "--kernel-only" in argv,
                                           "--device-only" in argv))
    with open(argv[0], "w") as f:
        json.dump(current, f, indent=0, sort_keys=True)
    print(f"{len(current)} kernel/config pairs hashed into {argv[0]}")
    if "--against" not in argv:
        return 0
    with open(argv[argv.index("--against") + 1]) as f:
        old = json.load(f)
    changed = sorted(k for k in old.keys() & current.keys() if old[k] != current[k])
    only = sorted(old.keys() ^ current.keys())
    for k in changed:
        print(f"differs: {k}")
    for k in only:
        print(f"only in {'the old' if k in old else 'the new'} set: {k}")
    print(f"{len(old.keys() & current.keys()) - len(changed)} of {len(old.keys() & current.keys())} shared pairs "
          f"byte-identical")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
