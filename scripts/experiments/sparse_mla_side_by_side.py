"""Experiment: DeepSeek v3.2's sparse MLA forward, TileLang's own example file run under TileLang
0.1.15 and, unchanged, under tileworkbench, in one process on the same inputs.

The file (``examples/deepseek_v32/sparse_mla_fwd.py`` of TileLang's repository, its ``utils.py``
beside it, in ``FOLDER``) is loaded twice: once with TileLang as ``tilelang``, once with
tileworkbench in its place. Inputs as the file's own test builds them (B 1, S 4096, SKV 4096,
H 128, top-k 2048, bfloat16, indices past each query's position out of range); both outputs
checked against the file's torch reference with its own ``assert_tensors_similar``; then both
timed in 3 alternating rounds of ``profiler.do_bench`` (median ms, L2 flushed).

    PYTHONPATH=.:/path/to/tilelang-site python3 scripts/experiments/sparse_mla_side_by_side.py FOLDER
"""

from __future__ import annotations

import importlib
import importlib.util
import statistics
import sys
from pathlib import Path

ROUNDS = 3


def load(path: Path, name: str, package, language):
    """The file loaded with ``package`` as ``tilelang``; the modules named tilelang before are put
    back after (TileLang imports its own submodules lazily, at its first compile)."""
    before = {k: sys.modules.get(k) for k in ("tilelang", "tilelang.language")}
    sys.modules["tilelang"], sys.modules["tilelang.language"] = package, language
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in before.items():
            if v is not None:
                sys.modules[k] = v
    return module


def inputs(torch, S=4096, SKV=4096, H=128, DQK=576, topk=2048):
    torch.random.manual_seed(0)
    q = torch.randn((1, S, H, DQK), dtype=torch.bfloat16, device="cuda")
    kv = torch.randn((1, SKV, 1, DQK), dtype=torch.bfloat16, device="cuda")
    indices = torch.full((1, S, 1, topk), SKV, dtype=torch.int32, device="cuda")
    for t in range(S):
        chosen = torch.randperm(max(1, t))[:topk]
        indices[0, t, 0, :len(chosen)] = chosen
    return q, kv, indices


def main(folder: str) -> int:
    import torch

    path = Path(folder) / "sparse_mla_fwd.py"
    sys.path.insert(0, str(path.parent))
    real = importlib.import_module("tilelang")  # TileLang first: its submodules stay importable
    theirs = load(path, "sparse_mla_tilelang", real, importlib.import_module("tilelang.language"))
    import tileworkbench
    import tileworkbench.language
    from tileworkbench.profiler import do_bench

    ours = load(path, "sparse_mla_tileworkbench", tileworkbench, tileworkbench.language)
    q, kv, indices = inputs(torch)
    want = theirs.ref_sparse_mla_fwd_interface(q, kv, indices)
    calls = {"tilelang": lambda: theirs.sparse_mla_fwd_interface(q, kv, indices),
             "tileworkbench": lambda: ours.sparse_mla_fwd_interface(q, kv, indices)}
    for name, call in calls.items():
        out, _ = call()
        theirs.assert_tensors_similar(out, want, eps=1e-2, name=f"{name} out")  # raises where it differs
    times = {name: [] for name in calls}
    for _ in range(ROUNDS):
        for name, call in calls.items():
            times[name].append(do_bench(call, warmup=25, rep=100, return_mode="median"))
    ms = {name: statistics.median(t) for name, t in times.items()}
    flops = 4096 * (576 + 512) * 2048 * 2 * 128
    for name, t in ms.items():
        print(f"{name}: {t:.3f} ms ({flops / t / 1e9:.0f} TFLOP/s), rounds {[round(x, 3) for x in times[name]]}")
    print(f"tileworkbench / TileLang speed: {ms['tilelang'] / ms['tileworkbench']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
