"""Experiment: what does electing the TMA-issuing thread with elect.sync cost, against "thread 0 of
the leader scope"? (tw::shuffle_elect<N>: warp-uniform check, elect.sync with a full mask; ptxas
wraps it in a divergence check and a convergence barrier.)

    PYTHONPATH=. python3 scripts/experiments/elect_variants.py
"""

import statistics

import torch

import tileworkbench as tw
from tileworkbench.bench.timing import Timer, rel_err
from tileworkbench.examples.gemm import matmul, matmul_tma_copy, matmul_tma_copy_store
from tileworkbench.jit.kernel import Kernel

ELECT = '''  unsigned int pred = 0;
  asm volatile(
      "{\\n .reg .pred p;\\n elect.sync _|p, 0xffffffff;\\n selp.u32 %0, 1, 0, p;\\n}\\n"
      : "=r"(pred));
  return pred != 0;'''
FIRST = "  return (threadIdx.x % 32) == 0;  // experiment: lane 0 of the (first) warp of the scope"


def first_thread(kernel):
    src = kernel.record["device_source"]
    assert ELECT in src
    rec = {k: v for k, v in kernel.record.items() if "cubin" not in k}
    rec["device_source"] = src.replace(ELECT, FIRST)
    return Kernel(rec, [2])


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
        v = first_thread(k)
        errs = []
        for kern in (k, v):
            out = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
            kern(a, b, out)
            errs.append(rel_err(out, ref))
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        t = {"elect": [], "first": []}
        for _ in range(5):
            t["elect"].append(timer.time(lambda: k(a, b, c), 3, 10).tflops(2.0 * n ** 3))
            t["first"].append(timer.time(lambda: v(a, b, c), 3, 10).tflops(2.0 * n ** 3))
        e, f = statistics.median(t["elect"]), statistics.median(t["first"])
        print(f"{name:36s} elect {e:6.1f} | first thread {f:6.1f} ({f / e:.3f}x) | err {errs[0]:.1e} {errs[1]:.1e}",
              flush=True)


if __name__ == "__main__":
    main()
