"""Where a small kernel's host time per call goes (issue 18): the launcher as it is, its parts,
and the driver's launch with arguments packed once, beside torch.matmul and cupy.matmul.

    PYTHONPATH=. python3 scripts/experiments/launch_paths.py

Each line is the median over 60 rounds of 100 calls of host time per call (no synchronisation
inside a round; one after it, untimed, so the launch queue never fills and the GPU's time does
not show).
"""

from __future__ import annotations

import statistics
import time


def per_call_us(fn, calls=100, rounds=60, sync=None) -> float:
    """Median host time per call (``bench.launch.host_us``: rounds of ``calls`` calls with an
    untimed synchronisation between them, so the launch queue never fills)."""
    from tileworkbench.bench.launch import host_us

    return host_us(fn, sync or (lambda: None), calls, rounds)


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
    from tileworkbench.backend.launch import stream_handle
    from tileworkbench.jit.kernel import _allocate, bind_arguments

    rows["ours: stream_handle(None, args)"] = per_call_us(lambda: stream_handle(None, (a, b, c)))
    rows["ours: bind_arguments (passes c)"] = per_call_us(
        lambda: bind_arguments(kernel.name, kernel.params, kernel.out_idx, (a, b, c)))
    rows["ours: _allocate(c)"] = per_call_us(lambda: _allocate(kernel.params[2], a))
    rows["ours: rt.tensor(...) check"] = per_call_us(
        lambda: rt.tensor("A", a, shape=(n, n), dtype="float16", strides=(n, 1), align=16))

    # The driver's launch, arguments packed once: the floor of any Python launch path. The
    # arguments are those the launcher passes (captured from one call): pointers, tensor maps.
    captured = {}
    real_launch = rt.launch
    rt.launch = lambda name, grid, block, smem, args, stream: captured.update(grid=grid, block=block, smem=smem,
                                                                              args=args)
    kernel(a, b, c)
    rt.launch = real_launch
    store = np.zeros(128 * len(captured["args"]) // 8 + 16, dtype=np.uint64)
    base = (store.ctypes.data + 127) // 128 * 128  # 128-byte slots (a tensor map wants 64-byte alignment)
    pointers = np.zeros(len(captured["args"]), dtype=np.uint64)
    for i, arg in enumerate(captured["args"]):
        raw = np.uint64(arg).tobytes() if isinstance(arg, int) else np.asarray(arg).tobytes()
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
    rows["ours: the generated launcher (checks + launch)"] = per_call_us(lambda: kernel._launch(rt, a, b, c, stream=0),
                                                                       sync=sync)
    launch_args = (kernel.name, grid, block, smem, captured["args"], 0)
    rows["ours: rt.launch (pack + cuLaunchKernel)"] = per_call_us(lambda: rt.launch(*launch_args), sync=sync)
    slot0 = base

    def driver_launch_repacked():
        ctypes.memmove(slot0, a.data_ptr().to_bytes(8, "little"), 8)
        launch(handle, *grid, *block, smem, driver.CUstream(raw_stream(0)), params, 0)

    rows["driver: cuLaunchKernel, a pointer re-packed + stream"] = per_call_us(driver_launch_repacked, sync=sync)
    # The same launch without cuda-bindings' wrapper: libcuda's cuLaunchKernel through ctypes.
    libcuda = ctypes.CDLL("libcuda.so.1")
    raw_launch = libcuda.cuLaunchKernel
    raw_launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    raw_launch.restype = ctypes.c_int
    fn_ptr, stream_ptr = int(fn.ptr), int(raw_stream(0))

    def ctypes_launch():
        raw_launch(fn_ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream_ptr, params, None)

    c.zero_()
    assert ctypes_launch() is None
    torch.cuda.synchronize()
    assert (c.float() - ref).abs().max().item() < 0.1, "the ctypes launch computes something else"
    rows["ctypes: libcuda cuLaunchKernel, packed once"] = per_call_us(ctypes_launch, sync=sync)
    try:
        from cuda.bindings._v2 import driver as driver_v2

        v2_launch = driver_v2.launch_kernel
        rows["driver v2: launch_kernel (ints), packed once"] = per_call_us(
            lambda: v2_launch(fn_ptr, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, stream_ptr,
                              params, 0), sync=sync)
    except Exception as exc:  # not in every cuda-bindings
        print(f"(no cuda.bindings._v2.launch_kernel: {type(exc).__name__}: {exc})")
    # A CUDA graph of 100 launches, replayed: what a captured call costs the host.
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        kernel(a, b, c)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        for _ in range(100):
            kernel(a, b, c)
    graph.replay()
    torch.cuda.synchronize()
    assert (c.float() - ref).abs().max().item() < 0.1, "the replayed graph computes something else"
    rows["graph: replay of 100 kernel(a, b, c), host per kernel"] = per_call_us(graph.replay, calls=10, sync=sync) / 100

    def wall_per_kernel(fn, kernels):  # until the GPU is done: GPU-bound when the host keeps up
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - start) / kernels * 1e6

    def replay_20():
        for _ in range(20):
            graph.replay()

    def loop_2000():
        for _ in range(2000):
            kernel(a, b, c)

    rows["graph: 20 replays of 100, wall per kernel"] = statistics.median(wall_per_kernel(replay_20, 2000)
                                                                         for _ in range(5))
    rows["loop: 2000 kernel(a, b, c), wall per kernel"] = statistics.median(wall_per_kernel(loop_2000, 2000)
                                                                           for _ in range(5))
    cfn = rt.module.module_for(0).get_function(kernel.name)
    args = tuple(np.uint64(x) if isinstance(x, int) else x for x in captured["args"])
    rows["cupy: Function call, packed once"] = per_call_us(
        lambda: cfn(tuple(grid), tuple(block), args, shared_mem=smem), sync=sync)
    width = max(map(len, rows))
    for name, us in rows.items():
        print(f"{name:<{width}}  {us:7.2f} us")


if __name__ == "__main__":
    main()
