"""Experiment tool: a kernel's largest loop read for register spills, the way session 40 found why
the fine-tuning sparse MLA backward spilled twice what TileLang's does. No GPU needed.

    python3 scripts/experiments/loop_spills.py SOURCE.cu [--nvrtc] [--trips 2,4] [--timeline] [nvcc options ...]

SOURCE is compiled by nvcc (``-O3 -lineinfo``, sm_90a, plus the options given) or, with ``--nvrtc``,
by our own NVRTC compile (``backend.nvrtc.compile_check``), and disassembled with line numbers
(``nvdisasm -g``; ``TW_NVDISASM_DIR`` as for ``sass_by_line.py``). Printed for the largest loop:

* each source line's local loads and stores (``LDL``/``STL``, the spills) inside it, in order;
* every loop nested in it (its span, the line of its branch, its spills) and, with ``--trips``
  giving the nested loops' trip counts in that order, the loop's spill instructions and bytes
  weighted by them: what one iteration of the loop runs, which static counts understate where
  ptxas left an inner loop rolled (TileLang's dKV gemm);
* with ``--timeline``, the loop's instructions of interest in order, run-length coded:
  G HGMMA, w WARPGROUP arrive/wait, H HMMA, m LDSM, L LDL, S STL, s STS, g LDG, c LDGSTS
  (cp.async), d DEPBAR (its wait), a atomics, e MUFU, x SHFL, | BAR. It showed ptxas starting the dKV gemm's HMMAs inside the dQ wgmma's wait, the
  two 128-register accumulators spilling around each other (``isolate_starved_wgmmas``).
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sass_by_line import parse_listing, tool  # noqa: E402

SYMBOLS = {"HGMMA": "G", "WARPGROUP": "w", "HMMA": "H", "LDSM": "m", "LDL": "L", "STL": "S", "STS": "s",
           "STSM": "s", "LDG": "g", "LDGSTS": "c", "DEPBAR": "d", "ATOM": "a", "RED": "a", "MUFU": "e", "BAR": "|",
           "SHFL": "x"}


def cubin_of(source: Path, use_nvrtc: bool, options: list, work: Path) -> Path:
    cubin = work / "kernel.cubin"
    if use_nvrtc:
        sys.path.insert(0, str(HERE.parents[1]))
        from tileworkbench.backend.nvrtc import compile_check

        result = compile_check(source.read_text(), "sm_90a", source.name, extra_options=("-lineinfo",))
        print(f"NVRTC {result.version}: {result.registers} registers, {result.spills_bytes} bytes of spill stores")
        cubin.write_bytes(result.cubin)
    else:
        subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90a", "-O3", "-lineinfo", "-cubin", "-o", str(cubin),
                        *options, str(source)], check=True, capture_output=True)
    return cubin


def listing_of(cubin: Path, source: Path) -> tuple[list, dict]:
    """(instructions as (address, opcode, operands, line), branch labels -> address)."""
    return parse_listing(subprocess.run([tool("nvdisasm"), "-g", "-c", str(cubin)], check=True, capture_output=True,
                                        text=True).stdout, source)


def backward_branches(code: list, labels: dict) -> list:
    """(target, branch address, branch line) of each loop's back edge."""
    out = []
    for addr, op, args, line in code:
        target = re.search(r"(\.L_x_\d+)", args) if op.startswith("BRA") else None
        if target and labels.get(target.group(1), addr) < addr:
            out.append((labels[target.group(1)], addr, line))
    return out


def width(op: str) -> int:
    return 16 if ".128" in op else 8 if ".64" in op else 4


def run_length(symbols: str) -> str:
    out, i = [], 0
    while i < len(symbols):
        j = i
        while j < len(symbols) and symbols[j] == symbols[i]:
            j += 1
        out.append(symbols[i] + (str(j - i) if j - i > 1 else ""))
        i = j
    return " ".join(out)


def main(argv: list) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--nvrtc", action="store_true")
    parser.add_argument("--trips", default="", help="trip counts of the nested loops, in order")
    parser.add_argument("--timeline", action="store_true")
    args, options = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as work:
        code, labels = listing_of(cubin_of(args.source, args.nvrtc, options, Path(work)), args.source)
    loops = backward_branches(code, labels)
    if not loops:
        print("no loop")
        return
    start, end, _ = max(loops, key=lambda loop: loop[1] - loop[0])
    body = [c for c in code if start <= c[0] <= end]
    lines = args.source.read_text().splitlines()
    by_line: dict = {}
    for _, op, _, line in body:
        kind = op.split(".")[0]
        if kind in ("LDL", "STL"):
            by_line.setdefault(line, collections.Counter())[kind] += 1
    for line, counts in by_line.items():
        text = lines[line - 1].strip()[:90] if isinstance(line, int) else f"{line[0]}:{line[1]}"
        print(f"  {dict(counts)!s:28} line {line}: {text}")
    weight = {addr: 1 for addr, *_ in body}
    trips = [int(t) for t in args.trips.split(",") if t]
    nested = sorted(loop for loop in loops if start <= loop[0] and loop[1] <= end and loop[:2] != (start, end))
    for n, (first, last, line) in enumerate(nested):
        times = trips[n] if n < len(trips) else 1
        kinds = collections.Counter(op.split(".")[0] for addr, op, _, _ in body if first <= addr <= last)
        print(f"nested loop {first:#x}-{last:#x} (its branch at line {line}): LDL {kinds['LDL']}, "
              f"STL {kinds['STL']}, HMMA {kinds['HMMA']}; counted x{times}")
        for addr in weight:
            if first <= addr <= last:
                weight[addr] *= times
    count, size = collections.Counter(), collections.Counter()
    for addr, op, _, _ in body:
        kind = op.split(".")[0]
        count[kind] += weight[addr]
        if kind in ("LDL", "STL"):
            size[kind] += weight[addr] * width(op)
    print(f"largest loop {start:#x}-{end:#x}, one iteration: {sum(count.values())} instructions; LDL {count['LDL']} "
          f"({size['LDL']} bytes), STL {count['STL']} ({size['STL']} bytes), HGMMA {count['HGMMA']}, "
          f"HMMA {count['HMMA']}")
    if args.timeline:
        print(run_length("".join(SYMBOLS[op.split(".")[0]] for _, op, _, _ in body if op.split(".")[0] in SYMBOLS)))


if __name__ == "__main__":
    main(sys.argv[1:])
