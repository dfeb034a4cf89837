"""Experiment tool: ptxas's registers and spill bytes for every kernel ``scripts/source_hashes.py``
lowers (the bench's candidates, the spec kernels, the examples, the ported programs' cases and,
with ``--tilelang-examples``, the kernels built from TileLang's example files), each compiled by
NVRTC; with ``--against`` the kernels whose counts moved. No GPU needed. Session 43 ran it before
and after the swizzle-period split (``codegen/swizzled.py``) to choose its limits.

    PYTHONPATH=. python3 scripts/experiments/spill_survey.py OUT.json [--tilelang-examples DIR] [--against OLD.json]

A case that builds several kernels gets one entry, its kernels' counts joined.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TILEWORKBENCH_DISABLE_CACHE", "1")

import source_hashes  # noqa: E402

from tileworkbench.backend.nvrtc import compile_check  # noqa: E402


def counts(artifact, kernel_only=False, device_only=False) -> str:
    """``registers/spill bytes`` of the artifact's device source (what ``source_hash`` gives)."""
    try:
        result = compile_check(artifact.device_source, "sm_90a", name="survey.cu")
    except Exception as err:  # noqa: BLE001 - a kernel NVRTC refuses is an entry too
        return f"refused: {type(err).__name__}"
    return f"{result.registers}/{result.spills_bytes or 0}"


def moved(old: dict, new: dict) -> None:
    def parse(v):
        try:
            registers, spills = v.split("/")
            return int(registers), int(spills)
        except ValueError:
            return None
    tally = {"same": 0, "more spills": 0, "fewer spills": 0, "registers": 0, "other": 0}
    for key in sorted(old.keys() & new.keys()):
        a, b = parse(old[key]), parse(new[key])
        if old[key] == new[key]:
            tally["same"] += 1
            continue
        kind = "other" if a is None or b is None else \
            "more spills" if b[1] > a[1] else "fewer spills" if b[1] < a[1] else "registers"
        tally[kind] += 1
        print(f"{kind}: {key}: {old[key]} -> {new[key]}")
    print(tally)


def main(argv) -> int:
    source_hashes.source_hash = counts  # every kernel the hash script visits is compiled instead
    out = source_hashes.hashes()
    if "--tilelang-examples" in argv:
        out.update(source_hashes.example_file_hashes(argv[argv.index("--tilelang-examples") + 1], False, False))
    Path(argv[0]).write_text(json.dumps(out, indent=0, sort_keys=True))
    print(f"{len(out)} kernels into {argv[0]}")
    if "--against" in argv:
        moved(json.loads(Path(argv[argv.index("--against") + 1]).read_text()), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
