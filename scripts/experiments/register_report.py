"""Experiment tool: ptxas's report for every kernel of every side-by-side case
(``tileworkbench/examples/tilelang_programs``): registers, spill-store bytes and how many
``warpgroup.arrive`` ptxas injected (its C7519 note, where the NVRTC in use reports it). No GPU.

    PYTHONPATH=. python3 scripts/experiments/register_report.py OUT.json [family ...]

One line a case as it goes (``family.case [(registers, spill bytes, injected arrives) a kernel]``)
and all of them in OUT.json; two reports from two trees (a ``git worktree`` of the commit before)
compare a header or pass change across every kernel at once. docs/experiments.md (session 34) has
the wgmma descriptors' spills found and measured so.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import sys


def main(out: str, families: list) -> None:
    os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # every kernel through NVRTC, none from the disk cache
    from tileworkbench.backend import nvrtc as backend
    import tileworkbench.examples.tilelang_programs as programs

    compile_check, case, report = backend.compile_check, [None], {}

    def reported(source, *args, **kwargs):
        result = compile_check(source, *args, **kwargs)
        log = result.log
        report.setdefault(case[0], []).append((
            [int(r) for r in re.findall(r"Used (\d+) registers", log)],
            [int(b) for b in re.findall(r"(\d+) bytes spill stores", log)],
            log.count("C7519")))
        return result

    backend.compile_check = reported
    for family in families or [m.name for m in pkgutil.iter_modules(programs.__path__)]:
        module = importlib.import_module(f"{programs.__name__}.{family}")
        for name, spec in module.CASES.items():
            case[0] = f"{family}.{name}"
            try:
                spec["compile"]()
            except Exception as exc:  # the report says which case did not build, and goes on
                report[case[0]] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            print(case[0], report.get(case[0]), flush=True)
    with open(out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
