"""For the experiments: check kernels on one square GEMM, then time them beside cuBLAS in rounds."""

import statistics


def race(kernels: dict, n: int, dtype: str, *, rounds: int = 7, warmup: int = 3, rep: int = 10,
         unchecked=(), cublas: bool = True) -> dict:
    """Fresh random ``n`` x ``n`` inputs of ``dtype``; each kernel's output (NaN-poisoned first)
    checked against float32, except the deliberately wrong variants named in ``unchecked``; then
    cuBLAS (unless ``cublas`` is False) and the kernels timed in ``rounds`` rounds of ``rep``
    calls, the order rotated by one each round so none always runs first while the GPU's clock
    drifts. Prints each median TFLOP/s with its range and returns the medians."""
    import torch

    from tileworkbench.bench.timing import Timer, rel_err

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
