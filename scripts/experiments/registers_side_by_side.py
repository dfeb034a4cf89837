"""Experiment tool: one of TileLang's example kernels compiled by both compilers, each CUDA source put
through the same nvcc (``-O3 -Xptxas -v``, sm_90a), and ptxas's report side by side: registers,
spill bytes and how many ``warpgroup.arrive`` it had to inject (its C7519 note). No GPU needed.

    PYTHONPATH=. python3 scripts/experiments/registers_side_by_side.py EXAMPLES FILE "OURS" "THEIRS" SITE [PY312]

EXAMPLES is TileLang's ``examples`` folder, FILE a path under it, OURS what builds our kernel from
the loaded module ``m`` (``m.bwd.compile(H=64, D=512, ...)``), THEIRS the expression
``scripts/experiments/tilelang_source_on_cpu.py`` builds TileLang's from, names of the file
(``bwd.compile(H=64, D=512, ...)``), run by PY312 (default /tmp/py312/bin/python) with SITE,
TileLang's unpacked wheel. TileLang's CUDA compiles against its
wheel's headers (``-I SITE/tilelang/src -I SITE/tilelang/3rdparty/cutlass/include -DENABLE_BF16``)
and the toolkit's. docs/experiments.md (session 33) has the sparse MLA backward and FlashMLA read so.
With ``TW_SASS=N`` each kernel's SASS is also attributed to its lines (``sass_by_line.py``: the N
busiest lines, the largest loop's spills, fences and branches).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ptxas_report(source: Path, includes: list) -> dict:
    """Registers, spill stores (bytes) and injected arrives of each kernel in ``source``."""
    cmd = ["nvcc", "-std=c++17", "-arch=sm_90a", "-O3", "-Xptxas", "-v", "-cubin", "-o", os.devnull,
           *includes, str(source)]
    log = subprocess.run(cmd, capture_output=True, text=True).stderr
    if "error" in log and "Used" not in log:
        return {"error": log.strip().splitlines()[0]}
    return {"registers": [int(r) for r in re.findall(r"Used (\d+) registers", log)],
            "spill_stores": [int(b) for b in re.findall(r"(\d+) bytes spill stores", log)],
            "injected_arrives": log.count("C7519")}


def ours(examples: Path, file: str, expr: str, out: Path) -> Path:
    sys.path.insert(0, str(HERE))
    import tilelang_examples as te

    te._install(examples)
    m = te._load(examples / file)  # noqa: F841 (read by expr)
    kernel = eval(expr)  # noqa: S307 (an experiment's own argument)
    out.write_text(kernel.get_kernel_source())
    return out


def tilelang(examples: Path, file: str, expr: str, site: str, py312: str, out: Path) -> Path:
    subprocess.run([py312, str(HERE / "tilelang_source_on_cpu.py"), Path(file).name, expr, site, str(out)],
                   cwd=examples / Path(file).parent, check=True, capture_output=True)
    return out


def main(argv: list) -> None:
    examples, file, ours_expr, theirs_expr, site = Path(argv[0]), argv[1], argv[2], argv[3], argv[4]
    py312 = argv[5] if len(argv) > 5 else "/tmp/py312/bin/python"
    work = Path(tempfile.mkdtemp(prefix="registers_"))
    toolkit = Path(subprocess.run(["which", "nvcc"], capture_output=True, text=True).stdout.strip()).resolve()
    tl_includes = [f"-I{toolkit.parent.parent / 'include'}", f"-I{site}/tilelang/src",
                   f"-I{site}/tilelang/3rdparty/cutlass/include", "-DENABLE_BF16"]
    print("ours    ", ptxas_report(ours(examples, file, ours_expr, work / "ours.cu"), []))
    print("TileLang", ptxas_report(tilelang(examples, file, theirs_expr, site, py312, work / "tilelang.cu"),
                                   tl_includes))
    print(f"(sources in {work})")
    if os.environ.get("TW_SASS"):  # and where each one's instructions come from (sass_by_line.py)
        for name, includes in (("ours", []), ("tilelang", tl_includes)):
            print(f"-- {name}")
            subprocess.run([sys.executable, str(HERE / "sass_by_line.py"), str(work / f"{name}.cu"), "--top",
                            os.environ["TW_SASS"], *includes], check=False)


if __name__ == "__main__":
    main(sys.argv[1:])
