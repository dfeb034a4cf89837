"""Experiment (issue 18): how low a launch can go on this host, and what an output costs to make.

Two questions the 5 us goal hangs on, measured with the 128^3 fp16 GEMM of ``bench launch``:

1. The driver's own cost: ``cuLaunchKernel`` called from C in a loop (a few lines compiled here
   with the system's C compiler and loaded with ctypes; libcuda found with ``dlopen``), beside
   the same launch from Python through cuda-bindings. What a launch path costs over the C loop is
   Python's; the C loop itself is a floor no launcher goes below.
2. What allocating the output costs from Python, in the ways torch offers (each tensor dropped at
   once, as a call's result is in the benchmark's loop).

    PYTHONPATH=. python3 scripts/experiments/launch_floor.py

Host microseconds per call: the median over 60 rounds of 100 calls, synchronised between rounds
(``bench.launch.host_us``). Needs a GPU and torch; the C part is skipped without a C compiler.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from pathlib import Path

C_LOOP = r"""
#include <dlfcn.h>
#include <time.h>
typedef int (*launch_fn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                         void**, void**);
static launch_fn launch = 0;
int tw_bind(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) return 1;
  launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
  return launch ? 0 : 2;
}
/* ns per launch of `calls` launches; -1 if a launch failed */
double tw_loop(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
               unsigned smem, void* stream, void** params, int calls) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < calls; ++i)
    if (launch(f, gx, gy, gz, bx, by, bz, smem, stream, params, 0) != 0) return -1.0;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / calls;
}
"""


def c_loop():
    """The C launch loop, compiled and loaded; None (and why, printed) where there is no compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("(no C compiler on this machine: the C floor is not measured)")
        return None
    work = Path(tempfile.mkdtemp())
    (work / "loop.c").write_text(C_LOOP)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(work / "loop.so"), str(work / "loop.c"), "-ldl"],
                   check=True)
    lib = ctypes.CDLL(str(work / "loop.so"))
    lib.tw_loop.restype = ctypes.c_double
    lib.tw_loop.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    assert lib.tw_bind() == 0, "libcuda.so.1 could not be opened"
    return lib


def main():
    import statistics

    import torch

    from tileworkbench.bench.launch import host_us, host_us_in_turns
    from tileworkbench.bench.tilelang_programs import load_program

    n = 128
    sync = torch.cuda.synchronize
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    kernel = load_program("gemm", "tileworkbench", Path(tempfile.mkdtemp())).matmul.compile(
        M=n, N=n, K=n, block_M=128, block_N=128, block_K=32, num_stages=2)
    assert (kernel(a, b).float() - ref).abs().max().item() < 0.1, "the kernel computes something else"
    rows = {"ours: kernel(a, b, c)": host_us(lambda: kernel(a, b, c), sync),
            "ours: kernel(a, b)": host_us(lambda: kernel(a, b), sync)}

    # The launch alone, from Python and from C, with the arguments a call hands the launcher.
    rt = kernel._runtime
    seen = {}
    real = rt.launch
    rt.launch = lambda name, grid, block, smem, args, stream: seen.update(grid=grid, block=block, smem=smem, args=args)
    kernel._launch(rt, a, b, c, stream=0)  # the Python launcher (the C path does not call rt.launch)
    rt.launch = real
    real(kernel.name, seen["grid"], seen["block"], seen["smem"], seen["args"], 0)
    launcher = next(iter(rt._launchers.values()))
    grid, block, smem = [int(g) for g in seen["grid"]], [int(x) for x in seen["block"]], int(seen["smem"])
    rows["python: cuLaunchKernel (cuda-bindings), packed once"] = host_us(
        lambda: launcher(kernel.name, grid, block, smem, seen["args"], 0), sync)
    lib = c_loop()
    if lib is not None:
        fn = int(rt.function(kernel.name).ptr)
        params = launcher.params.address
        c.zero_()
        assert lib.tw_loop(fn, *grid, *block, smem, None, params, 1) >= 0
        sync()
        assert (c.float() - ref).abs().max().item() < 0.1, "the C launch computes something else"
        samples = []
        for _ in range(60):
            samples.append(lib.tw_loop(fn, *grid, *block, smem, None, params, 100) / 1e3)
            sync()
        rows["C: cuLaunchKernel in a loop, packed once"] = statistics.median(samples)
        # The same loop with an empty kernel: what the driver costs when the GPU is never the limit.
        import cupy

        empty = cupy.RawKernel('extern "C" __global__ void nothing() {}', "nothing")
        empty((1,), (32,), ())
        empty_fn = int(empty.kernel.ptr)
        samples = []
        for calls in (10, 100, 1000):
            per = []
            for _ in range(20):
                per.append(lib.tw_loop(empty_fn, 1, 1, 1, 32, 1, 1, 0, None, None, calls) / 1e3)
                sync()
            rows[f"C: an empty kernel, {calls} launches a round"] = statistics.median(per)

    # The reads a call makes of each tensor, and the device and stream it asks for.
    import cupy

    rows["torch: a.dtype"] = host_us(lambda: a.dtype, sync)
    rows["torch: a.shape"] = host_us(lambda: a.shape, sync)
    rows["torch: a.stride()"] = host_us(lambda: a.stride(), sync)
    rows["torch: a.get_device()"] = host_us(lambda: a.get_device(), sync)
    rows["torch: a.data_ptr()"] = host_us(lambda: a.data_ptr(), sync)
    rows["cupy: runtime.getDevice()"] = host_us(cupy.cuda.runtime.getDevice, sync)
    raw_stream = torch._C._cuda_getCurrentRawStream
    rows["torch: _cuda_getCurrentRawStream(0)"] = host_us(lambda: raw_stream(0), sync)
    rows["python: an empty lambda"] = host_us(lambda: None, sync)

    # Making the output from Python, each tensor dropped at once.
    dev = a.device
    template = torch.empty(n, n, device="cuda", dtype=torch.float16)
    half = torch.float16
    rows["torch.empty((n, n), dtype=, device=)"] = host_us(lambda: torch.empty((n, n), dtype=half, device=dev), sync)
    rows["a.new_empty((n, n), dtype=)"] = host_us(lambda: a.new_empty((n, n), dtype=half), sync)
    rows["a.new_empty((n, n))"] = host_us(lambda: a.new_empty((n, n)), sync)
    rows["torch.empty_like(template)"] = host_us(lambda: torch.empty_like(template), sync)
    rows["torch.empty_strided((n, n), (n, 1), ...)"] = host_us(
        lambda: torch.empty_strided((n, n), (n, 1), dtype=half, device=dev), sync)
    rows["a.new_empty_strided((n, n), (n, 1))"] = host_us(lambda: a.new_empty_strided((n, n), (n, 1)), sync)
    expanded = torch.empty((), dtype=half, device=dev).expand(n, n)
    rows["torch.empty_like(an expanded scalar)"] = host_us(lambda: torch.empty_like(expanded), sync)
    assert torch.empty_like(expanded).stride() == (n, 1)
    ops_empty = torch.ops.aten.empty_like.default
    rows["torch.ops.aten.empty_like.default(template)"] = host_us(lambda: ops_empty(template), sync)
    # The C launch path (backend/fastcall.c), and what making the output adds to it.
    fast = kernel._fast
    if fast is not None:
        from tileworkbench.jit.kernel import _c_launcher

        own = _c_launcher(kernel, kernel._runtime)  # its last launch is always (a, b, c), which stay alive
        own(a, b, c)
        kept = []
        rows.update(host_us_in_turns({
            "turns: ours, kernel(a, b, c)": lambda: kernel(a, b, c),
            "turns: ours, kernel(a, b)": lambda: kernel(a, b),
            "turns: C path, kernel._fast(a, b, c)": lambda: fast(a, b, c),
            "turns: C path, kernel._fast(a, b) (makes c)": lambda: fast(a, b),
            "turns: C path, fast(a, b, a.new_empty((n, n), dtype=))": lambda: fast(a, b, a.new_empty((n, n),
                                                                                                     dtype=half)),
            "turns: C path, fast(a, b, torch.empty_like(template))": lambda: fast(a, b, torch.empty_like(template)),
            "turns: C path, kernel._fast(a, b), results kept": lambda: kept.append(fast(a, b)),
            "turns: a.new_empty((n, n), dtype=)": lambda: a.new_empty((n, n), dtype=half),
            "turns: torch.matmul(a, b)": lambda: torch.matmul(a, b),
            "turns: C floor, repeat_last(1)": lambda: own.repeat_last(1),
        }, sync))
        kept.clear()
    else:
        from tileworkbench.backend import fastcall

        print(f"(the C launch path is off: {fastcall.why_not()})")
    width = max(map(len, rows))
    for name, us in rows.items():
        print(f"{name:<{width}}  {us:7.2f} us")


if __name__ == "__main__":
    main()
