"""Where a small kernel's host time per call goes (issue 18): the launcher as it is, its parts,
and the driver's launch with arguments packed once, beside torch.matmul and cupy.matmul.

    PYTHONPATH=. python3 scripts/experiments/launch_paths.py

Each line is the median over 7 rounds of 2000 calls of host time per call (no synchronisation
inside a round; one at its end, so the queue never fills: the kernels are microseconds long).
"""

from __future__ import annotations

import statistics
import time


def per_call_us(fn, calls=2000, rounds=7, sync=None) -> float:
    for _ in range(200):
        fn()
    if sync:
        sync()
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - start) / calls * 1e6)
        if sync:
            sync()
    return statistics.median(out)


def main():
    import ctypes

    import cupy
    import numpy as np
    import torch
    from cuda.bindings import driver

    import tileworkbench as tw
    from tileworkbench.examples import matmul

    n = 128
    kernel = tw.compile(matmul(n, n, n, 128, 128, 32, "float16", "float16", 2, 128), out_idx=[2])
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    kernel(a, b, c)
    torch.cuda.synchronize()
    assert (c.float() - ref).abs().max().item() < 0.1, "the kernel computes something else"
    sync = torch.cuda.synchronize
    rows = {}
    rows["ours: kernel(a, b, c)"] = per_call_us(lambda: kernel(a, b, c), sync=sync)
    rows["ours: kernel(a, b) (allocates c)"] = per_call_us(lambda: kernel(a, b), sync=sync)
    rows["torch.matmul(a, b, out=c)"] = per_call_us(lambda: torch.matmul(a, b, out=c), sync=sync)
    rows["torch.matmul(a, b)"] = per_call_us(lambda: torch.matmul(a, b), sync=sync)
    try:  # TileLang 0.1.15 where it is on the path: the same program, its @jit call
        import tempfile
        from pathlib import Path

        from tileworkbench.bench.tilelang_programs import load_program

        theirs = load_program("gemm", "tilelang", Path(tempfile.mkdtemp()))
        tl_kernel = theirs.matmul.compile(M=n, N=n, K=n, block_M=128, block_N=128, block_K=32, num_stages=2)
        assert (tl_kernel(a, b).float() - ref).abs().max().item() < 0.1
        rows["tilelang: kernel(a, b) (allocates c)"] = per_call_us(lambda: tl_kernel(a, b), sync=sync)
        ours_same = load_program("gemm", "tileworkbench", Path(tempfile.mkdtemp()))
        tw_kernel = ours_same.matmul.compile(M=n, N=n, K=n, block_M=128, block_N=128, block_K=32, num_stages=2)
        rows["ours: the same program, kernel(a, b)"] = per_call_us(lambda: tw_kernel(a, b), sync=sync)
    except ImportError as exc:
        print(f"(no TileLang here: {exc})")
    ca, cb = cupy.asarray(a), cupy.asarray(b)
    rows["cupy.matmul(a, b)"] = per_call_us(lambda: cupy.matmul(ca, cb), sync=sync)

    # The parts of a call.
    rows["torch: t.data_ptr()"] = per_call_us(lambda: a.data_ptr())
    rows["torch: t.shape == (n, n)"] = per_call_us(lambda: a.shape == (n, n))
    rows["torch: t.stride() == (n, 1)"] = per_call_us(lambda: a.stride() == (n, 1))
    rows["torch: t.dtype is torch.float16"] = per_call_us(lambda: a.dtype is torch.float16)
    rows["torch: t.is_cuda"] = per_call_us(lambda: a.is_cuda)
    rows["torch: t.get_device()"] = per_call_us(lambda: a.get_device())
    rows["torch: t.device.index"] = per_call_us(lambda: a.device.index)
    rows["torch: torch.cuda.current_stream()"] = per_call_us(lambda: torch.cuda.current_stream().cuda_stream)
    raw_stream = torch._C._cuda_getCurrentRawStream
    rows["torch: _cuda_getCurrentRawStream(0)"] = per_call_us(lambda: raw_stream(0))
    rows["torch: torch.empty((n, n))"] = per_call_us(
        lambda: torch.empty((n, n), dtype=torch.float16, device=a.device))
    rows["cupy: get_current_stream().ptr"] = per_call_us(lambda: cupy.cuda.get_current_stream().ptr)
    rt = kernel._runtime
    rows["ours: rt.tensor(...) check"] = per_call_us(
        lambda: rt.tensor("A", a, shape=(n, n), dtype="float16", strides=(n, 1), align=16))

    # The driver's launch, arguments packed once: the floor of any Python launch path. The
    # arguments are those the launcher passes (captured from one call): pointers, tensor maps.
    captured = {}
    real_launch = rt.launch
    rt.launch = lambda name, grid, block, smem, args: captured.update(grid=grid, block=block, smem=smem, args=args)
    kernel(a, b, c)
    rt.launch = real_launch
    from tileworkbench.backend.tensors import TensorView

    store = np.zeros(128 * len(captured["args"]) // 8 + 16, dtype=np.uint64)
    base = (store.ctypes.data + 127) // 128 * 128  # 128-byte slots (a tensor map wants 64-byte alignment)
    pointers = np.zeros(len(captured["args"]), dtype=np.uint64)
    for i, arg in enumerate(captured["args"]):
        raw = np.uint64(arg.ptr).tobytes() if isinstance(arg, TensorView) else np.asarray(arg).tobytes()
        ctypes.memmove(base + 128 * i, raw, len(raw))
        pointers[i] = base + 128 * i
    params = pointers.ctypes.data
    fn = rt.function(kernel.name)
    handle = driver.CUfunction(fn.ptr)
    grid, block, smem = [int(g) for g in captured["grid"]], captured["block"], captured["smem"]
    stream = driver.CUstream(raw_stream(0))
    launch = driver.cuLaunchKernel

    def driver_launch():
        launch(handle, *grid, *block, smem, stream, params, 0)

    c.zero_()
    driver_launch()
    torch.cuda.synchronize()
    assert (c.float() - ref).abs().max().item() < 0.1, "the driver launch computes something else"
    rows["driver: cuLaunchKernel, packed once"] = per_call_us(driver_launch, sync=sync)
    slot0 = base

    def driver_launch_repacked():
        ctypes.memmove(slot0, a.data_ptr().to_bytes(8, "little"), 8)
        launch(handle, *grid, *block, smem, driver.CUstream(raw_stream(0)), params, 0)

    rows["driver: cuLaunchKernel, a pointer re-packed + stream"] = per_call_us(driver_launch_repacked, sync=sync)
    cfn = rt.module.module_for(0).get_function(kernel.name)
    args = tuple(np.uint64(x.ptr) if isinstance(x, TensorView) else x for x in captured["args"])
    rows["cupy: Function call, packed once"] = per_call_us(
        lambda: cfn(tuple(grid), tuple(block), args, shared_mem=smem), sync=sync)
    width = max(map(len, rows))
    for name, us in rows.items():
        print(f"{name:<{width}}  {us:7.2f} us")


if __name__ == "__main__":
    main()
