"""Experiment tool: where a kernel's SASS comes from, by line of its CUDA source, and what its
largest loop holds. No GPU needed.

    python3 scripts/experiments/sass_by_line.py SOURCE.cu [--top N] [nvcc options ...]

SOURCE is compiled with nvcc (``-O3 -lineinfo``, sm_90a, plus the options given: TileLang's CUDA
needs its include folders and ``-DENABLE_BF16``, as ``registers_side_by_side.py`` passes them);
``nvdisasm -g`` maps each instruction to its line. Prints the instruction count with the commonest
opcodes, the N lines with the most instructions (and their opcodes), and for the largest
backward-branch loop its instructions, local loads and stores (spills), tensor-core instructions,
branches and fences. ``cuobjdump``/``nvdisasm`` come from the ``nvidia-cuda-cuobjdump`` and
``nvidia-cuda-nvdisasm`` wheels where the toolkit lacks them (``TW_NVDISASM_DIR``). Session 35
found the per-instruction wgmma descriptors and the three dependent index loads of the sparse MLA
gathers this way (docs/experiments.md).
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def tool(name: str) -> str:
    folder = os.environ.get("TW_NVDISASM_DIR")
    return str(Path(folder) / name) if folder else name


def parse_listing(listing: str, source: Path) -> tuple[list, dict]:
    """``nvdisasm -g``'s listing as instructions ``(address, opcode, operands, line)`` (the line of
    ``source``, or ``(header file, line)`` for a header's) and its branch labels -> address."""
    line, labels, pending, code = None, {}, [], []  # nvdisasm names branch targets .L_x_N
    for text in listing.splitlines():
        at = re.search(r'//## File "([^"]*)", line (\d+)', text)
        if at:  # a line of the source, or of a header it includes (named by its file)
            line = int(at.group(2)) if Path(at.group(1)).name == source.name else (Path(at.group(1)).name, int(at.group(2)))
            continue
        label = re.match(r"\s*(\.L_x_\d+):", text)
        if label:
            pending.append(label.group(1))
            continue
        m = _INSTRUCTION.match(text)
        if m:
            for name in pending:
                labels[name] = int(m.group(1), 16)
            pending = []
            code.append((int(m.group(1), 16), m.group(2), m.group(3), line))
    return code, labels


def main(argv: list) -> None:
    source, top, options = Path(argv[0]), 25, []
    rest = argv[1:]
    while rest:
        if rest[0] == "--top":
            top, rest = int(rest[1]), rest[2:]
        else:
            options.append(rest.pop(0))
    with tempfile.TemporaryDirectory() as work:
        cubin = Path(work) / "kernel.cubin"
        subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90a", "-O3", "-lineinfo", "-cubin", "-o", str(cubin),
                        *options, str(source)], check=True, capture_output=True)
        listing = subprocess.run([tool("nvdisasm"), "-g", "-c", str(cubin)], check=True, capture_output=True,
                                 text=True).stdout
    lines = source.read_text().splitlines()
    code, labels = parse_listing(listing, source)
    by_line, ops_by_line, ops = collections.Counter(), collections.defaultdict(collections.Counter), collections.Counter()
    for _, op, _, line in code:
        by_line[line] += 1
        ops_by_line[line][op.split(".")[0]] += 1
        ops[op.split(".")[0]] += 1
    print(sum(by_line.values()), "instructions;", dict(ops.most_common(12)))
    for at, count in by_line.most_common(top):
        text = lines[at - 1].strip()[:100] if isinstance(at, int) else "(a header)" if at else "(no line)"
        print(f"{count:6d}  line {at}: {text}  {dict(ops_by_line[at].most_common(5))}")
    loops = [(labels[t.group(1)], addr) for addr, op, args, _ in code
             if op.startswith("BRA") and (t := re.search(r"(\.L_x_\d+)", args)) and labels.get(t.group(1), addr) < addr]
    if loops:
        start, end = max(loops, key=lambda span: span[1] - span[0])
        body = collections.Counter(op.split(".")[0] for addr, op, _, _ in code if start <= addr <= end)
        print(f"largest loop {start:#x}-{end:#x}: {sum(body.values())} instructions; "
              + ", ".join(f"{k} {body[k]}" for k in ("LDL", "STL", "HGMMA", "HMMA", "LDSM", "LDG", "BRA", "BAR", "MEMBAR")))


if __name__ == "__main__":
    main(sys.argv[1:])
