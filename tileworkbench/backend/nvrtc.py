"""NVRTC through cuda-bindings: compile generated CUDA for a target arch without a GPU.

Used by CI to prove every generated kernel compiles for sm_90a, and by ``lower(...,
enable_device_compile=True)`` to record registers and spills from ptxas's report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import CompileError

BASE_OPTIONS = ("-std=c++17", "-lineinfo", "--device-as-default-execution-space")


@dataclass
class NvrtcResult:
    cubin: bytes
    log: str
    registers: int | None
    spills_bytes: int | None
    seconds: float


def _check(result, what="nvrtc"):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err}")
    return result[1:] if isinstance(result, tuple) and len(result) > 1 else None


def _log(nvrtc, prog) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace").rstrip("\x00 \n")


def arch_option(arch: str) -> str:
    return f"--gpu-architecture={arch}"


def compile_check(source: str, arch: str = "sm_90a", name: str = "kernel.cu",
                  extra_options: tuple = ()) -> NvrtcResult:
    """Compile ``source`` to a cubin for ``arch``; raise CompileError with NVRTC's log on failure."""
    import time

    from cuda.bindings import nvrtc

    start = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, what="nvrtcCreateProgram")
    try:
        options = [arch_option(arch).encode(), b"-Xptxas=-v", *(o.encode() for o in BASE_OPTIONS),
                   *(o.encode() for o in extra_options)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        log = _log(nvrtc, prog)
        if int(err) != 0:
            raise CompileError(f"NVRTC could not compile the generated CUDA for {arch}:\n{log}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    return NvrtcResult(cubin, log, int(regs.group(1)) if regs else None,
                       int(spill.group(1)) if spill else None, time.perf_counter() - start)
