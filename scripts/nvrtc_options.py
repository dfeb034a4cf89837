"""NVRTC options against compile time for the spec GEMM (no GPU needed).

    PYTHONPATH=. python3 scripts/nvrtc_options.py [--reps 5] [--arch sm_90a]

Each option set runs in a fresh process (its first compile pays NVRTC's start-up, as a cold
``tw.compile`` does), then ``--reps`` more times in that process; the table shows the first and
the median of the rest. ``same SASS`` compares the cubin's code sections (``.text.*``) byte for
byte with the baseline's (our options as ``backend/nvrtc.py`` passes them), so "yes" means the
machine code is identical; "no" needs a look with ``cuobjdump -sass``. The device source is the
spec GEMM's: ``matmul_tma_copy(4096, 4096, 4096, 128, 128, 32, fp16, fp16, fp32, 128, 2)`` with
warp specialisation off.
"""

from __future__ import annotations

import json
import statistics
import struct
import subprocess
import sys
import time

# (label, options added to ours; "del X" removes X; "+ptx" stops at PTX).
VARIANTS = [
    ("ours (as compile() runs it)", []),
    ("front end only (--fdevice-syntax-only)", ["--fdevice-syntax-only", "+ptx"]),
    ("PTX only (no ptxas)", ["+ptx"]),
    ("without --no-cache (NVRTC's cache in the driver's, on)", ["del --no-cache"]),
    ("without -Xptxas=-v", ["del -Xptxas=-v"]),
    ("without -lineinfo", ["del -lineinfo"]),
    ("-dopt=on", ["-dopt=on"]),
    ("--minimal", ["--minimal"]),
    ("-split-compile=0", ["-split-compile=0"]),
    ("--Ofast-compile=min", ["--Ofast-compile=min"]),
    ("--Ofast-compile=mid", ["--Ofast-compile=mid"]),
    ("--Ofast-compile=max", ["--Ofast-compile=max"]),
    ("-Xptxas=-O2", ["-Xptxas=-O2"]),
    ("-Xptxas=-O1", ["-Xptxas=-O1"]),
    ("-Xptxas=--allow-expensive-optimizations=false", ["-Xptxas=--allow-expensive-optimizations=false"]),
]


def spec_source(arch: str) -> str:
    import tileworkbench as tw
    from tileworkbench.examples.gemm import matmul_tma_copy

    func = matmul_tma_copy(4096, 4096, 4096, 128, 128, 32, "float16", "float16", "float32", 128, 2)
    return tw.lower(func, target={"kind": "cuda", "arch": arch},
                    pass_configs={tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}).device_source


def code_sections(cubin: bytes) -> dict:
    """Name -> bytes of each ``.text.*`` section of an ELF64 cubin."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = cubin[strtab[4]:strtab[4] + strtab[5]]

    def name(h):
        return names[h[0]:names.index(b"\0", h[0])].decode()

    return {name(h): cubin[h[4]:h[4] + h[5]] for h in headers if name(h).startswith(".text")}


def _options(arch: str, change: list) -> tuple[list, bool]:
    from tileworkbench.backend.nvrtc import nvrtc_options

    options = list(nvrtc_options(arch))
    ptx = False
    for c in change:
        if c == "+ptx":  # a virtual arch: NVRTC stops at PTX, ptxas does not run
            ptx = True
            options = [f"--gpu-architecture={arch.replace('sm_', 'compute_')}" if o.startswith("--gpu-architecture")
                       else o for o in options if o != "-Xptxas=-v"]
        elif c.startswith("del "):
            options = [o for o in options if o != c[4:]]
        else:
            options.append(c)
    return options, ptx


def child(arch: str, change: list, reps: int) -> dict:
    from cuda.bindings import nvrtc

    source = spec_source(arch).encode()
    options, ptx = _options(arch, change)
    times, cubin, log, error = [], b"", "", None
    for _ in range(reps + 1):
        start = time.perf_counter()
        _, prog = nvrtc.nvrtcCreateProgram(source, b"gemm.cu", 0, [], [])
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.decode(errors="replace")
        if int(err) != 0:
            error = " / ".join(line.strip() for line in log.strip().splitlines()[:2]) or str(err)
            nvrtc.nvrtcDestroyProgram(prog)
            break
        if "--fdevice-syntax-only" in options:
            pass
        elif not ptx:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            cubin = b" " * size
            nvrtc.nvrtcGetCUBIN(prog, cubin)
        else:
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            nvrtc.nvrtcGetPTX(prog, b" " * size)
        times.append(time.perf_counter() - start)
        nvrtc.nvrtcDestroyProgram(prog)
    return {"options": options, "times": times, "cubin": cubin.hex(), "log": log, "error": error}


def main():
    args = sys.argv[1:]
    reps = int(args[args.index("--reps") + 1]) if "--reps" in args else 5
    arch = args[args.index("--arch") + 1] if "--arch" in args else "sm_90a"
    if "--child" in args:
        change = json.loads(args[args.index("--child") + 1])
        print(json.dumps(child(arch, change, reps)))
        return
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    print(f"NVRTC {major}.{minor}, {arch}, first compile in a fresh process and median of {reps} more\n")
    print("| options | first s | median s | same SASS | registers |\n| --- | --- | --- | --- | --- |")
    base = None
    for label, change in VARIANTS:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(change), "--reps", str(reps),
                               "--arch", arch], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"| {label} | failed: {done.stderr.strip().splitlines()[-1:]} | | | |")
            continue
        r = json.loads(done.stdout)
        if r["error"]:
            print(f"| {label} | rejected: {r['error'][:120]} | | | |")
            continue
        cubin = bytes.fromhex(r["cubin"])
        sections = code_sections(cubin) if cubin else None
        if base is None:
            base = sections
        same = "–" if sections is None else ("yes" if sections == base else "no")
        regs = next((line.split("Used ")[1].split(" registers")[0] for line in r["log"].splitlines()
                     if "Used " in line and "registers" in line), "–")
        first, rest = r["times"][0], r["times"][1:]
        print(f"| {label} | {first:.3f} | {statistics.median(rest) if rest else float('nan'):.3f} | {same} | {regs} |")


if __name__ == "__main__":
    main()
