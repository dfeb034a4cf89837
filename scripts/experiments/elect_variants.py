"""Experiment: what does electing the TMA-issuing thread with elect.sync cost, against "thread 0 of
the leader scope"?

Measures: each kernel as compiled (``tw::shuffle_elect<N>`` is lane 0 of the group's first warp,
from ``threadIdx``) against the same source with the body ``tw::shuffle_elect<N>`` had before
759d994 put back (a warp-uniform check, then elect.sync with a full mask, which ptxas wraps in a
divergence check and a convergence barrier). Kernels: the spec's matmul_tma_copy and
matmul_tma_copy_store (128x128x32, 128 threads, 2 and 3 stages, warp specialisation off) and
the persistent warp-specialised 128x256x64 s3 GEMM, fp16, 4096^3 and 8192^3; outputs checked
against float32, then 5 alternating rounds, medians.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/elect_variants.py

Conclusion (H200, 2026-12-01, commit 759d994; TFLOP/s, elect.sync -> first thread): spec kernels
at 4096^3 +7-9%, at 8192^3 503 -> 592, 518 -> 570, 505 -> 612, 539 -> 633; the warp-specialised
GEMM unchanged. So ``tw::shuffle_elect<N>`` (``runtime/include/tw/common.h``) returns
``threadIdx.x % N == 0`` and uses no elect.sync; the barrier analysis models that leader exactly
(``leader_not_running``, docs/checker.md).
"""

import statistics

import torch
from _edited import edited_kernel

import tileworkbench as tw
from tileworkbench.backend.timing import Timer, rel_err
from tileworkbench.examples.gemm import matmul, matmul_tma_copy, matmul_tma_copy_store

ELECT = '''  if constexpr (N > 32) {
    if ((threadIdx.x % N) >= 32) return false;
  }
  unsigned int pred = 0;
  asm volatile(
      "{\\n .reg .pred p;\\n elect.sync _|p, 0xffffffff;\\n selp.u32 %0, 1, 0, p;\\n}\\n"
      : "=r"(pred));
  return pred != 0;'''
FIRST = "  return threadIdx.x % N == 0;"


def with_elect_sync(kernel):
    """The kernel with tw::shuffle_elect's elect.sync body back."""
    src = kernel.record["device_source"]
    assert FIRST in src
    return edited_kernel(kernel, src.replace(FIRST, ELECT))


def main():
    plain = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    cases = []
    for n in (4096, 8192):
        for builder in (matmul_tma_copy, matmul_tma_copy_store):
            for s in (2, 3):
                cases.append((f"{builder.__name__} s{s} {n}", n,
                              tw.compile(builder(n, n, n, 128, 128, 32, "float16", "float16", "float32", 128, s),
                                         out_idx=[2], pass_configs=plain)))
        cases.append((f"persistent 128x256x64 s3 {n}", n,
                      tw.compile(matmul(n, n, n, 128, 256, 64, "float16", "float16", 3, 256), out_idx=[2])))
    timer = Timer()
    for name, n, k in cases:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        v = with_elect_sync(k)
        errs = []
        for kern in (v, k):
            out = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
            kern(a, b, out)
            errs.append(rel_err(out, ref))
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        t = {"elect": [], "first": []}
        for _ in range(5):
            t["elect"].append(timer.time(lambda: v(a, b, c), 3, 10).tflops(2.0 * n ** 3))
            t["first"].append(timer.time(lambda: k(a, b, c), 3, 10).tflops(2.0 * n ** 3))
        e, f = statistics.median(t["elect"]), statistics.median(t["first"])
        print(f"{name:36s} elect {e:6.1f} | first thread {f:6.1f} ({f / e:.3f}x) | err {errs[0]:.1e} {errs[1]:.1e}",
              flush=True)


if __name__ == "__main__":
    main()
