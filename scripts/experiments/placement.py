"""Experiment: how much of a kernel's speed is where ptxas places its code (issues 20, 23).

``loop_layout.py`` found the spec's 3-stage TMA GEMM up to 8% slower when a store before its main
loop moved the loop. This asks the same of the kernels we tune: each is compiled with 0-7
one-instruction fillers (``nanosleep 0``, run once by every thread) at the top of its body, which
move everything after them 16 bytes at a time, and every form is timed against the one without
fillers, one call of each a round (``Timer.time_alternating``), after checking its result against
float32. Kernels: the warp-specialised GEMM (8192^3 fp16, 128x256x64, 3 stages, 256 threads), the
spec ``matmul_tma_copy`` (8192^3, 3 stages) and FlashAttention forward (1x16x8192x128 fp16, ours).

    PYTHONPATH=. python3 scripts/experiments/placement.py [gemm | spec | attention ...]
"""

import os
import statistics
import sys

os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # the fillers are not in the cache key

from tileworkbench.backend.timing import Timer, round_ratios  # noqa: E402
from tileworkbench.codegen import cuda as cuda_codegen  # noqa: E402
from tileworkbench.jit import cache  # noqa: E402
from tileworkbench.jit.kernel import compile as compile_kernel  # noqa: E402

FILLERS = range(8)
ROUNDS = 60
_render = cuda_codegen.CudaRenderer.render


def with_fillers(count: int):
    """``CudaRenderer.render`` that puts ``count`` fillers right after the thread index."""
    def render(self):
        out = _render(self)
        marker = "  const int tx = threadIdx.x;\n"  # every kernel here names its thread index tx
        assert marker in out, "no thread index line"
        fill = "".join('  asm volatile("nanosleep.u32 0;");\n' for _ in range(count))
        return out.replace(marker, marker + fill, 1)
    return render


def compiled(build, count, **options):
    cuda_codegen.CudaRenderer.render = with_fillers(count)
    cache.MEMORY.clear()
    try:
        return compile_kernel(build(), **options)
    finally:
        cuda_codegen.CudaRenderer.render = _render


def cases():
    import torch

    from tileworkbench.examples.attention import PASS_CONFIGS, best_config, mha_fwd
    from tileworkbench.examples.gemm import matmul, matmul_tma_copy

    torch.manual_seed(0)
    n = 8192
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    product = a.float() @ b.float()

    def gemm_check(out):
        return float((out.float() - product).norm() / product.norm()) < 1e-3

    q, k, v = (torch.randn(1, 16, 8192, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    scores = (q.float() @ k.float().transpose(-1, -2)) / 128 ** 0.5
    attention = scores.softmax(-1) @ v.float()

    def attention_check(out):
        return float((out.float() - attention).abs().max()) < 1e-2

    return {
        "gemm": (lambda: matmul(n, n, n, 128, 256, 64, num_stages=3, threads=256), {"out_idx": [2]},
                 lambda kern: kern(a, b), gemm_check),
        "spec": (lambda: matmul_tma_copy(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, 3),
                 {"out_idx": [2], "pass_configs": {"tl.disable_warp_specialized": True}},
                 lambda kern: kern(a, b), gemm_check),
        "attention": (lambda: mha_fwd(1, 16, 8192, 128, False, **best_config(128)),
                      {"out_idx": [3], "pass_configs": PASS_CONFIGS}, lambda kern: kern(q, k, v), attention_check),
    }


def main() -> int:
    wanted = sys.argv[1:] or ["gemm", "spec", "attention"]
    table = ["| kernel | fillers | ms | over none | quartiles |", "|---|---|---|---|---|"]
    all_cases = cases()
    for name in wanted:
        build, options, call, check = all_cases[name]
        kernels = [compiled(build, count, **options) for count in FILLERS]
        for count, kernel in zip(FILLERS, kernels):
            assert check(call(kernel)), (name, count)
        times = Timer().time_alternating([lambda kern=kern: call(kern) for kern in kernels], ROUNDS)
        for count, samples in zip(FILLERS, times):
            ratio, (q1, q3) = round_ratios(samples, times[0])
            table.append(f"| {name} | {count} | {statistics.median(samples):.4f} | {ratio:.3f}x | {q1:.3f}-{q3:.3f} |")
        print("\n".join(table[-len(FILLERS):]), flush=True)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
