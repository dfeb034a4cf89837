"""Experiment: does a 2-block cluster sharing the B tile through TMA multicast beat the compiler's
persistent warp-specialised GEMM (128x256x64, 3 stages)?

    PYTHONPATH=. python3 scripts/experiments/cluster_multicast.py

The edit (against the generated source of 2026-12-01): __cluster_dims__(2,1,1); blocks 2c and 2c+1
of the persistent grid always get tiles t, t+1 with t even, which share bx (the raster panels have
an even number of rows), so they need the same B tile. Each block loads its own A tile and half of
B (two of the four 128-byte panels), multicast to both blocks, whose full barriers each expect the
whole 48 KB as before. A slot may be refilled only when the consumers of both blocks have released
it: every consumer warp's lane 0 also arrives on the peer block's empty barrier (count 256 + 8).
The cluster syncs after the barrier inits and before exit (no block may leave while its peer can
still arrive on its barriers).

Measured on the H200, 2026-12-01 (7 interleaved rounds, medians, TFLOP/s; outputs correct):

    size  dtype  cuBLAS  compiler persistent  cluster of 2, B multicast  same, grid 128
    4096  fp16   740.6   738.5                727.8                      731.4
    8192  fp16   658.5   690.7                680.7                      677.9
    4096  bf16   762.7   758.4                748.6                      752.2
    8192  bf16   688.9   717.2                722.5                      709.2

No gain: a third less L2 -> shared traffic per block changes nothing, so these kernels are not
limited by it. The driver says 66 clusters of 2 fit at once (all 132 multiprocessors). A first
version arrived on the peer's barrier with `.release.cluster` semantics: ptxas puts a
MEMBAR.ALL.GPU before each such arrive, and the kernel ran at 484 instead of 747 TFLOP/s.
"""

import re
import sys

from _compare import race
from _edited import headers_of

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul
from tileworkbench.jit.kernel import Kernel

CLUSTER_HELPERS = r'''
namespace twx {
__device__ __forceinline__ unsigned int cluster_rank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Arrive on the barrier at the same shared-memory offset in block `peer` of the cluster. Default
// (.release.cta) semantics: `.release.cluster` makes ptxas put a MEMBAR.ALL.GPU before it, which
// took the kernel from 747 to 484 TFLOP/s when every consumer warp did it every k step.
__device__ __forceinline__ void arrive_remote(tw::Barrier& bar, unsigned int peer) {
  asm volatile("{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, %0, %1;\n\t"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}" ::"r"(bar.addr()), "r"(peer)
               : "memory");
}
// A 3-D tensor-map load written to the same offset in every block of `mask`, completing on the
// barrier at the same offset in each.
__device__ __forceinline__ void tma_load_multicast(const tw::TensorMap& desc, tw::Barrier& bar, void* dst, int c0,
                                                   int c1, int c2, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(tw::smem_addr(dst)),
      "l"(tw::desc_addr(desc)), "r"(bar.addr()), "r"(c0), "r"(c1), "r"(c2), "h"(mask)
      : "memory");
}
}  // namespace twx
'''


def must_replace(text, old, new, count=1):
    assert text.count(old) == count, (old, text.count(old))
    return text.replace(old, new)


def cluster_source(src, remote_release=True):
    kernel = src[src.index('extern "C"'):]
    t = must_replace(kernel, "__launch_bounds__(384, 1)", "__cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)")
    t = must_replace(t, "const int tx = threadIdx.x;", "const int tx = threadIdx.x;\n  const unsigned int tw_rank = twx::cluster_rank();")
    if remote_release:
        t = t.replace("stage_empty[0].init(256);", "stage_empty[0].init(264);").replace(
            "stage_empty[1].init(256);", "stage_empty[1].init(264);").replace("stage_empty[2].init(256);", "stage_empty[2].init(264);")
    # cluster-wide: barrier inits visible to the peer before anything is sent to it
    t = must_replace(t, "  if (tx >= 256) {  // producer warpgroup", "  twx::cluster_sync();\n  if (tx >= 256) {  // producer warpgroup")
    elem = re.search(r"tw::tma_load\(B_desc, stage_full\[k_slot0\], \(&tw::swizzled<(\w+::\w+), 128>", t).group(1)
    t = must_replace(t, f"tw::tma_load(B_desc, stage_full[k_slot0], (&tw::swizzled<{elem}, 128>(B_shared, (k_slot0 * 16384))), 0, (k * 64), (bx * 4));",
                     f"twx::tma_load_multicast(B_desc, stage_full[k_slot0], (&tw::swizzled<{elem}, 128>(B_shared, ((k_slot0 * 16384) + (tw_rank * 8192)))), 0, (k * 64), ((bx * 4) + (tw_rank * 2)), 3);")
    if remote_release:
        t = must_replace(t, "          stage_empty[k_slot1].arrive();\n",
                         "          stage_empty[k_slot1].arrive();\n          __syncwarp();\n          if ((tx % 32) == 0) twx::arrive_remote(stage_empty[k_slot1], tw_rank ^ 1u);\n")
        tail = re.search(r"      stage_empty\[(.*)\]\.arrive\(\);\n      tw::tma_store_wait", t).group(1)
        t = must_replace(t, f"      stage_empty[{tail}].arrive();\n",
                         f"      stage_empty[{tail}].arrive();\n      __syncwarp();\n"
                         f"      if ((tx % 32) == 0) twx::arrive_remote(stage_empty[{tail}], tw_rank ^ 1u);\n")
    # no block leaves while its peer may still arrive on its barriers or write its tiles
    end = t.rindex("}")
    t = t[:end] + "  twx::cluster_sync();\n}\n"
    return headers_of(src) + CLUSTER_HELPERS + t


def cluster_host(host, grid=None):
    h = must_replace(host, "box_dims=(64, 64, 4)", "box_dims=(64, 64, 2)")
    if grid is not None:
        h = h.replace("rt.persistent_blocks(KERNEL, 2048, BLOCK, SMEM_BYTES)", str(grid)).replace(
            "rt.persistent_blocks(KERNEL, 512, BLOCK, SMEM_BYTES)", str(grid))
    return h


def with_sources(kernel, device, host):
    record = {k: v for k, v in kernel.record.items() if "cubin" not in k}
    record["device_source"] = device
    record["host_source"] = host
    return Kernel(record, [2])


def max_active_clusters(kernel):
    try:
        from cuda.bindings import driver
        fn = kernel._runtime.function(kernel.name)
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = 132, 1, 1
        config.blockDimX, config.blockDimY, config.blockDimZ = 384, 1, 1
        config.sharedMemBytes = kernel.record["smem_bytes"]
        err, n = driver.cuOccupancyMaxActiveClusters(driver.CUfunction(fn.ptr), config)
        return f"{err} {n}"
    except Exception as exc:  # noqa: BLE001 - an experiment: say what failed and go on
        return f"unknown ({exc})"


def main(sizes=(4096, 8192), dtype="float16"):
    for n in sizes:
        base = tw.compile(matmul(n, n, n, 128, 256, 64, dtype, dtype, 3, 256), out_idx=[2])
        src, host = base.record["device_source"], base.record["host_source"]
        kernels = {"compiler persistent": base,
                   "cluster2 multicast B": with_sources(base, cluster_source(src), cluster_host(host)),
                   "cluster2 grid 128": with_sources(base, cluster_source(src), cluster_host(host, 128))}
        print(f"max active clusters: {max_active_clusters(kernels['cluster2 multicast B'])}", flush=True)
        race(kernels, n, dtype)


if __name__ == "__main__":
    main(dtype=sys.argv[1] if len(sys.argv) > 1 else "float16")
