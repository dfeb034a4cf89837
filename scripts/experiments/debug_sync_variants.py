"""Experiment: where does debug mode's cost come from? (issue 7's <= 3% goal)

Measures: the spec GEMM (matmul_tma_copy, fp16, 128x128x32, 128 threads, warp specialisation
off) in variants made by editing the generated debug-mode source, outputs checked, then timed
in 6 interleaved rounds (median of per-round ratios to plain):

  plain        the normal kernel
  debug        debug mode as generated (one try_wait inline, then the bounded loop out of line)
  plain_waits  the debug-mode kernel with its waits back to plain ones (the extra parameter only)
  lite_call    one inline try_wait, then a call with two arguments (address, parity; no record)

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/debug_sync_variants.py [size, default 8192] [stages, default 2]

Conclusion (H200, 2026-12-01): a call in the loop is what costs, not the call's arguments, so
debug mode keeps its design (``tw::Barrier::wait_debug`` in ``runtime/include/tw/sync.h``: one
try_wait inline, the bounded loop in a separate function, ``wait_bounded``, which writes the
error record). 8192^3: 2 stages debug x1.047, plain_waits x1.010, lite_call x1.080; 3 stages
debug x1.103, plain_waits x1.000, lite_call x1.080 (lite_call needs no more registers than the
plain kernel, 154, and is no cheaper). Debug mode's cost itself is measured with
``PYTHONPATH=. python3 -m tileworkbench.bench.debug_cost`` (BENCHMARKS.md: 8192^3 x1.026 / x1.011 at
2 / 3 stages at 759d994, after the leader election stopped using elect.sync).

Earlier designs, measured with earlier versions of this script on 2026-12-01 (8192^3, 2 stages
unless noted; run-to-run noise about +-3%): __syncthreads_count leave-checks after every block
barrier x1.064 alone; bounded waits returning through the generated code x1.063 alone, x1.12
together; the bounded loop inlined in the wait x1.13-1.18 (x1.08 at 3 stages); 4 or 16 inline
try_waits before the out-of-line loop x1.13-1.14; a first try with a 1 ms suspend hint x1.04-1.06;
one try then the out-of-line loop (the design kept, 42fe472) x1.03-1.07.
"""

import re
import statistics
import sys

import cupy
from _edited import edited_kernel

import tileworkbench as tw
from tileworkbench.backend.timing import Timer, rel_err
from tileworkbench.examples.gemm import matmul_tma_copy

WAIT_DEBUG = re.compile(r"(\S+?)\.wait_debug\(((?:[^()]|\([^()]*(?:\([^()]*\))*[^()]*\))*?), tw_debug, [^;]*;")


def plain_waits(src):
    """Debug-mode source with every bounded wait back to a plain wait (extra parameter kept)."""
    return WAIT_DEBUG.sub(r"\1.wait(\2);", src)


LITE_SLOW_PATH = r"""
// lite_call: the slow path takes the barrier's shared address and the parity only (no record)
__device__ __noinline__ void tw_wait_slow(unsigned int addr, int parity) {
  unsigned long long start = 0;
  for (unsigned int tries = 1;; ++tries) {
    unsigned int ok;
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok) : "r"(addr), "r"(parity) : "memory");
    if (ok) return;
    if (tries % 64) continue;
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (!start) start = now;
    else if (now - start > 2000000000ull) asm volatile("exit;");
  }
}
"""


def lite_call(src):
    """Each bounded wait as one inline try_wait and a call with two arguments (no error record)."""
    out = re.sub(r"(\w+\[[^\]]*\])\.wait_debug\((.*?), tw_debug, [^;]*;",
                 r"if (!\1.try_wait(\2)) tw_wait_slow(\1.addr(), \2);", src)
    at = out.index('extern "C"')
    return out[:at] + LITE_SLOW_PATH + out[at:]


VARIANTS = {"debug": lambda s: s, "plain_waits": plain_waits, "lite_call": lite_call}


def main():
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
    stages = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    plain_cfg = {tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
    debug_cfg = {**plain_cfg, tw.PassConfigKey.TW_DEBUG_BARRIER_TIMEOUT: 2.0}
    func = matmul_tma_copy(size, size, size, 128, 128, 32, "float16", "float16", "float32", 128, stages)
    plain = tw.compile(func, out_idx=[2], pass_configs=plain_cfg)
    debug = tw.compile(func, out_idx=[2], pass_configs=debug_cfg)
    kernels = {"plain": plain}
    for name, edit in VARIANTS.items():
        kernels[name] = edited_kernel(debug, edit(debug.record["device_source"]))
    rng = cupy.random.default_rng(1)
    A = rng.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    B = rng.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
    ref = A.astype(cupy.float32) @ B.astype(cupy.float32)
    outs = {n: cupy.full((size, size), cupy.nan, cupy.float16) for n in kernels}
    for n, k in kernels.items():
        k(A, B, outs[n])
        print(f"{n:10s} rel err {rel_err(outs[n], ref):.2e}", flush=True)
        if k._runtime is not None:
            k._runtime.check_each_launch = False  # device cost only: no read-back per call
    timer = Timer()
    times = {n: [] for n in kernels}
    for _ in range(6):
        for n, k in kernels.items():
            times[n].append(timer.time(lambda: k(A, B, outs[n]), 3, 10).ms)
    flops = 2.0 * size ** 3
    print(f"spec GEMM {size}^3, {stages} stages")
    for n in kernels:
        ratio = statistics.median(t / p for t, p in zip(times[n], times["plain"]))
        ms = statistics.median(times[n])
        print(f"  {n:10s} {ms:8.3f} ms {flops / ms / 1e9:7.1f} TFLOP/s  x{ratio:.3f}")


if __name__ == "__main__":
    main()
