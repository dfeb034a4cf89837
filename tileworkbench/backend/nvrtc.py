"""NVRTC through cuda-bindings: compile generated CUDA to a cubin for a target arch, no GPU needed.

``tileworkbench.compile`` uses it for every kernel (the cubin goes into the compile record and
the disk cache; ``backend/runtime.py`` loads it), ``lower(..., enable_device_compile=True)``
to record registers and spills from ptxas's report, and CI to prove every generated kernel
compiles for sm_90a.
"""

from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass

from ..errors import CompileError, InternalCompilerError

# --minimal: NVRTC leaves out its texture, device-runtime and launch declarations, which our
# kernels never use (no toolkit headers either): ~6 ms less front end, the same cubin code.
BASE_OPTIONS = ("-std=c++17", "-lineinfo", "--device-as-default-execution-space", "--minimal")
# ptxas: "(C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized ... in the
# function 'k' in line 2657" -> the code and the note, without the function and the PTX line
_PERFORMANCE_NOTE = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*?)(?: in the function '[^']*')?"
                               r"(?: in line \d+)?\s*$", re.MULTILINE)
# ELF e_machine of CUDA cubins
EM_CUDA = 190


@dataclass
class NvrtcResult:
    cubin: bytes
    log: str
    registers: int | None
    spills_bytes: int | None
    seconds: float
    arch: str = ""
    options: tuple = ()
    version: str | None = None  # NVRTC's "major.minor"

    @property
    def performance_notes(self) -> list[tuple[str, str]]:
        """ptxas's "Potential Performance Loss" notes, as (code, what it says): C7511, the wgmma
        instructions serialised for want of registers (the kernel is short of them: its
        accumulators spill around each instruction); C7519, a ``warpgroup.arrive`` ptxas had to
        add; and the like."""
        return [(m.group(1), m.group(2).strip()) for m in _PERFORMANCE_NOTE.finditer(self.log)]

    def to_json(self) -> dict:
        """Everything but the cubin, for the compile record."""
        return {"version": self.version, "arch": self.arch, "options": list(self.options),
                "registers": self.registers, "spills_bytes": self.spills_bytes, "seconds": self.seconds,
                "log": self.log}


# How many programs this process compiled (the compile-time benchmark checks that a disk-cache
# hit compiles none).
COMPILES = 0


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


def nvrtc_options(arch: str, extra_options: tuple = ()) -> tuple[str, ...]:
    """The options every compile passes (``-Xptxas=-v`` only adds ptxas's resource report).

    ``--no-cache`` (NVRTC 12.9 on): NVRTC would otherwise keep results in the driver's compute
    cache (``~/.nv/ComputeCache``, only where a driver is installed) and, on a hit there, return
    the cubin without ptxas's report, so registers and spills would be missing. Our own disk
    cache holds the cubin with its report; a second cache below it would only make the cold
    compile's time and report depend on what the machine compiled before.
    """
    return (arch_option(arch), "-Xptxas=-v", *BASE_OPTIONS, *_cache_options(), *extra_options)


def _cache_options() -> tuple[str, ...]:
    version = nvrtc_version()
    if version is None:
        return ()
    major, minor = (int(x) for x in version.split("."))
    return ("--no-cache",) if (major, minor) >= (12, 9) else ()


@functools.cache
def nvrtc_version() -> str | None:
    """NVRTC's ``"major.minor"``, or None where the library cannot be loaded (no CUDA here)."""
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
        return f"{major}.{minor}" if int(err) == 0 else None
    except (ImportError, OSError, RuntimeError):  # no cuda-bindings, or no libnvrtc to load
        return None


def fingerprint(arch: str) -> str:
    """What decides the cubin besides the source: NVRTC's version and the options (arch included).
    Part of the compile-cache key."""
    return f"nvrtc {nvrtc_version() or 'unavailable'}: {' '.join(nvrtc_options(arch))}"


def cubin_sm(cubin: bytes) -> int | None:
    """The SM number (90 for sm_90/sm_90a) a cubin holds code for; None if it is no CUDA ELF."""
    if len(cubin) < 52 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return None
    (machine,) = struct.unpack_from("<H", cubin, 18)
    (flags,) = struct.unpack_from("<I", cubin, 48)
    if machine != EM_CUDA:
        return None
    # ELF ABI version 8 (CUDA 12.8 on) keeps the SM in bits 8-15 of e_flags; earlier ones in bits 0-7
    return (flags >> 8) & 0xFF if cubin[8] >= 8 else flags & 0xFF


class RegisterShortage(InternalCompilerError):
    """ptxas could not fit one instruction in the registers a thread has: the kernel's tiles and
    thread count ask for more than the register file gives (``jit.lower`` says so at the user's
    gemm as a ``CompileError``); ``needed`` and ``available`` registers per thread."""

    def __init__(self, message: str, needed: int, available: int):
        super().__init__(message)
        self.needed, self.available = needed, available


_SHORTAGE = re.compile(r"Insufficient registers \((\d+)\).*?register target of (\d+)")


def compile_check(source: str, arch: str = "sm_90a", name: str = "kernel.cu",
                  extra_options: tuple = ()) -> NvrtcResult:
    """Compile ``source`` to a cubin for ``arch``; raise CompileError with NVRTC's log on failure."""
    import time

    global COMPILES
    start = time.perf_counter()
    try:
        from cuda.bindings import nvrtc

        err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    except (ImportError, OSError, RuntimeError) as exc:  # no cuda-bindings, or libnvrtc missing
        raise CompileError(f"NVRTC is not available here, so the generated CUDA cannot be compiled: {exc}") from exc
    _check(err, what="nvrtcCreateProgram")
    COMPILES += 1
    options = nvrtc_options(arch, tuple(extra_options))
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        log = _log(nvrtc, prog)
        if int(err) != 0:
            shortage = _SHORTAGE.search(log)
            if shortage:
                raise RegisterShortage(f"ptxas: {log.strip()}", int(shortage.group(2)), int(shortage.group(1)))
            # The code generator wrote CUDA that does not compile: a bug of ours, not the user's.
            raise InternalCompilerError(f"internal error: NVRTC could not compile the generated CUDA for {arch} "
                                        f"(a compiler bug, please report it with the kernel):\n{log}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    return NvrtcResult(cubin, log, int(regs.group(1)) if regs else None,
                       int(spill.group(1)) if spill else None, time.perf_counter() - start,
                       arch=arch, options=options, version=nvrtc_version())
