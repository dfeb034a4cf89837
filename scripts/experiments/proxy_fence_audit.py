"""Experiment: where a thread's path reaches a wgmma or TMA call on a shared tile it wrote through
the generic proxy with no ``fence.proxy.async`` in between, over every kernel the hash script
builds (ours and, with a folder, TileLang's examples). No GPU.

    PYTHONPATH=. python3 scripts/experiments/proxy_fence_audit.py [TILELANG_EXAMPLES]

Each kernel's IR as the lowering leaves it (after ``fence_before_arrivals``) is walked forwards,
one path per thread: the tiles written since the thread's last fence (stores, and calls writing at
a shared address first in their arguments; ``cp.async`` left out: its waits fence it); loops to a
fixed point, branches and warp-specialised roles joined. A wgmma or TMA call given the address of
such a tile is a finding. It sees one thread's own writes only: a tile other threads wrote reaches
the call through a barrier, and each of them walks the same statements (outside a branch on the
thread), so their writes show up on their own paths. It knows tiles by name, not their versions:
a pipelined loop that fills one stage while its wgmma reads the other is a finding it cannot rule
out. Run at ``2cad8c8`` (session 34) over the 401 kernels and TileLang's examples: one finding,
MInference's vertical-slash attention, of that kind (the stage read was written, and fenced at the
loop's top, one iteration before). The two real gaps found by reading CUDA that session, TileLang's
varlen GQA decode's query tile and FlashMLA's ``SP1_shared``, were fixed before it ran; with the
first fix taken out again, it reports that query tile (``Q_shared -> tw::wgmma_gemm_ss``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def audit(func) -> list:
    """``(tile, call)`` for each async-proxy call on a tile the path wrote since its last fence."""
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.visitor import collect
    from tileworkbench.passes.rules.proxies import async_access_tiles, is_fence, landed_write_tiles

    found = []

    def written(stmt) -> set:
        return {buf.name for buf in landed_write_tiles(stmt)}

    def walk(stmt, dirty: frozenset, report: bool) -> frozenset:
        if isinstance(stmt, ir.SeqStmt):
            for s in stmt.stmts:
                dirty = walk(s, dirty, report)
            return dirty
        if is_fence(stmt):
            return frozenset()
        if isinstance(stmt, ir.IfThenElse):
            other = walk(stmt.else_body, dirty, report) if stmt.else_body is not None else dirty
            return walk(stmt.then_body, dirty, report) | other
        if isinstance(stmt, (ir.For, ir.While)):
            entry = dirty
            while True:
                end = walk(stmt.body, entry, False)
                if end <= entry:
                    break
                entry = entry | end
            return walk(stmt.body, entry, report) | entry
        if isinstance(stmt, ir.ThreadScope):
            return walk(stmt.body, dirty, report)
        if isinstance(stmt, ir.WarpSpecialize):
            return walk(stmt.producer, dirty, report) | walk(stmt.consumer, dirty, report)
        for call in collect(stmt, ir.Call):
            for buf in async_access_tiles(call) if report else ():
                if buf.name in dirty:
                    found.append((buf.name, call.name.split("<")[0]))
        return dirty | written(stmt)

    walk(func.body, frozenset(), True)
    return sorted(set(found))


def main(examples: str | None) -> None:
    from tileworkbench.passes import manager

    sys.path.insert(0, str(HERE.parent))
    hashes = importlib.import_module("source_hashes")
    current, findings = [None], {}
    info = manager.REGISTRY["fence_before_arrivals"]

    def audited(func, ctx):
        out = info.fn(func, ctx)
        for finding in audit(out):
            findings.setdefault(current[0], set()).add(finding)
        return out

    manager.REGISTRY["fence_before_arrivals"] = dataclasses.replace(info, fn=audited)
    lower = importlib.import_module("tileworkbench.jit.lower").lower
    for name, build, own, out_idx in hashes.jobs():
        current[0] = name
        with contextlib.suppress(Exception):
            lower(build(), out_idx=out_idx, pass_configs=own)
    for name, compile_case in hashes.program_cases():
        current[0] = name
        with contextlib.suppress(Exception):
            compile_case()
    if examples:
        sys.path.insert(0, str(HERE))
        te = importlib.import_module("tilelang_examples")
        te._install(Path(examples))
        for file, make in te.CASES:
            current[0] = file
            with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
                built = make(te._load(Path(examples) / file))
                for part in getattr(built, "kernels", None) or [built]:
                    if not hasattr(part, "get_kernel_source"):
                        lower(part, target="sm_90a")
    for name, found in sorted(findings.items()):
        print(f"{name}: " + ", ".join(f"{tile} -> {call}" for tile, call in sorted(found)))
    print(f"{len(findings)} kernels with a finding")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
