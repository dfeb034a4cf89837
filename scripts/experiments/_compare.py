"""For the experiments: check GEMM kernels on one square GEMM, then time them beside cuBLAS in
rounds (persistent_grid_size.py and others); check attention kernels against float32, then time
them in alternating rounds (attention_overlap.py, causal_block_order.py)."""

import statistics


def race(kernels: dict, n: int, dtype: str, *, rounds: int = 7, warmup: int = 3, rep: int = 10,
         unchecked=(), cublas: bool = True) -> dict:
    """Fresh random ``n`` x ``n`` inputs of ``dtype``; each kernel's output (NaN-poisoned first)
    checked against float32, except the deliberately wrong variants named in ``unchecked``; then
    cuBLAS (unless ``cublas`` is False) and the kernels timed in ``rounds`` rounds of ``rep``
    calls, the order rotated by one each round so none always runs first while the GPU's clock
    drifts. Prints each median TFLOP/s with its range and returns the medians."""
    import torch

    from tileworkbench.backend.timing import Timer, rel_err

    tdt = getattr(torch, dtype)
    a, b = (torch.randn(n, n, device="cuda", dtype=tdt) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=tdt)
    ref = a.float() @ b.float()
    for name, kernel in kernels.items():
        if name in unchecked:
            continue
        out = torch.full((n, n), float("nan"), device="cuda", dtype=tdt)
        kernel(a, b, out)
        err = rel_err(out, ref)
        print(f"{n} {dtype} {name}: err {err:.1e}", flush=True)
        assert err < (1e-2 if dtype == "bfloat16" else 2e-3), f"{name} computes something else"
    fns = {"cublas": lambda: torch.matmul(a, b, out=c)} if cublas else {}
    fns |= {name: (lambda k=kernel: k(a, b, c)) for name, kernel in kernels.items()}
    names, timer = list(fns), Timer()
    times = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(timer.time(fns[name], warmup, rep).tflops(2.0 * n ** 3))
    width = max(map(len, names))
    medians = {name: statistics.median(v) for name, v in times.items()}
    for name, v in times.items():
        print(f"{n} {dtype} {name:{width}s} {medians[name]:7.1f} TFLOP/s  (min {min(v):.1f} max {max(v):.1f})",
              flush=True)
    return medians


def race_persistent_variants(make_variants, argv, rounds: int = 9):
    """For each size in ``argv[1]`` (default 4096,8192) and fp16/bf16: the compiler's persistent
    warp-specialised GEMM (128x256x64, 3 stages), the variants ``make_variants(kernel)`` returns
    (a dict name -> kernel, all meant to compute the same bits), checked bit for bit against it,
    then all raced beside cuBLAS."""
    import torch

    import tileworkbench as tw
    from tileworkbench.examples.gemm import matmul

    sizes = [int(v) for v in (argv[1] if len(argv) > 1 else "4096,8192").split(",")]
    for n in sizes:
        for dtype in ("float16", "bfloat16"):
            pers = tw.compile(matmul(n, n, n, 128, 256, 64, dtype, dtype, 3, 256), out_idx=[2])
            kernels = {"persistent": pers, **make_variants(pers)}
            tdt = getattr(torch, dtype)
            a, b = (torch.randn(n, n, device="cuda", dtype=tdt) for _ in range(2))
            ref = pers(a, b)
            same = {name: torch.equal(k(a, b), ref) for name, k in kernels.items()}
            print(f"{n} {dtype}: same bits as the compiler's: {same}", flush=True)
            race(kernels, n, dtype, rounds=rounds)


def alternating_medians(calls: dict, rounds: int = 5) -> dict:
    """Each call (name -> no-argument function) timed with ``profiler.do_bench`` in ``rounds``
    alternating rounds (so clocks and neighbours affect all alike): name -> median milliseconds."""
    from tileworkbench.profiler import do_bench

    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(do_bench(call, warmup=25, rep=100, return_mode="median"))
    return {name: statistics.median(samples) for name, samples in times.items()}


def race_attention(kernels: dict, q, k, v, causal: bool, label: str, base: str, rounds: int = 5) -> dict:
    """Attention kernels (``kernel(q, k, v) -> o``) each checked against the float32 reference on
    the same inputs, then timed in ``rounds`` alternating rounds of ``profiler.do_bench`` (median
    ms, L2 flushed); prints each one's TFLOP/s (half the work when causal) and speed over
    ``base``, and returns the median ms."""
    import torch

    from tileworkbench.bench.attention import check, reference
    from tileworkbench.profiler import do_bench

    want = reference(torch, q, k, v, causal)
    for name, kernel in kernels.items():
        result = check(torch, kernel(q, k, v), want)
        if not result["correct"]:
            raise SystemExit(f"{label}, {name}: wrong ({result})")
    b, h, s, d = q.shape
    flops = 4 * b * h * s * k.shape[2] * d / (2 if causal else 1)
    times = {name: [] for name in kernels}
    for _ in range(rounds):
        for name, kernel in kernels.items():
            times[name].append(do_bench(lambda kernel=kernel: kernel(q, k, v), warmup=25, rep=100,
                                        return_mode="median"))
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    width = max(map(len, kernels))
    for name, ms in medians.items():
        print(f"{label} {name:{width}s} {ms:.4f} ms  {flops / ms / 1e9:6.1f} TFLOP/s  {medians[base] / ms:.3f}x",
              flush=True)
    return medians
