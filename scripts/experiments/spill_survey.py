"""Experiment tool: ptxas's registers and spill bytes for every kernel ``scripts/source_hashes.py``
lowers (the bench's candidates, the spec kernels, the examples, the ported programs' cases and,
with ``--tilelang-examples``, the kernels built from TileLang's example files), each compiled by
NVRTC, and its cubin's size; with ``--against`` the kernels whose counts moved. No GPU needed. Session 43 ran it before
and after the swizzle-period split (``codegen/swizzled.py``) to choose its limits.

    PYTHONPATH=. python3 scripts/experiments/spill_survey.py OUT.json [--tilelang-examples DIR] [--against OLD.json]

A case that builds several kernels gets one entry, its kernels' counts joined (``r/s/b;r/s/b;``;
compared by the most registers and the sums of the rest).
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
    """``registers/spill bytes/cubin bytes`` of the artifact's device source (what ``source_hash``
    gives); the cubin's size stands in for the amount of code (a change NVRTC sees that moves no
    register, a header's, shows there)."""
    try:
        result = compile_check(artifact.device_source, "sm_90a", name="survey.cu")
    except Exception as err:  # noqa: BLE001 - a kernel NVRTC refuses is an entry too
        return f"refused: {type(err).__name__}"
    return f"{result.registers}/{result.spills_bytes or 0}/{len(result.cubin)};"


def moved(old: dict, new: dict) -> None:
    def parse(v):
        """(most registers, spill bytes, cubin bytes) of an entry's kernels, or None (refused)."""
        try:
            kernels = [k.split("/") for k in v.rstrip(";").split(";")]
            sizes = [int(k[2]) for k in kernels if len(k) > 2]
            return (max(int(k[0]) for k in kernels), sum(int(k[1]) for k in kernels),
                    sum(sizes) if sizes else None)
        except (ValueError, IndexError):
            return None
    tally = {"same": 0, "more spills": 0, "fewer spills": 0, "registers": 0, "code size": 0, "other": 0}
    sizes = []
    for key in sorted(old.keys() & new.keys()):
        a, b = parse(old[key]), parse(new[key])
        if old[key] == new[key]:
            tally["same"] += 1
            continue
        kind = "other" if a is None or b is None else \
            "more spills" if b[1] > a[1] else "fewer spills" if b[1] < a[1] else \
            "registers" if b[0] != a[0] else "code size"
        tally[kind] += 1
        if kind != "other" and a[2] and b[2]:
            sizes.append(b[2] / a[2])
        print(f"{kind}: {key}: {old[key]} -> {new[key]}")
    print(tally)
    if sizes:
        print(f"cubin size of the kernels that moved: {min(sizes):.3f}x - {max(sizes):.3f}x, "
              f"{sum(s < 1 for s in sizes)} smaller, {sum(s > 1 for s in sizes)} larger")


def main(argv) -> int:
    source_hashes.source_hash = counts  # every kernel the hash script visits is compiled instead
    source_hashes.joined = "".join  # a case of several kernels keeps each one's counts
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
