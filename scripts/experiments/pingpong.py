"""Experiment: ping-pong consumer warpgroups, so one tile's epilogue overlaps the next tile's main loop.

    PYTHONPATH=. python3 scripts/experiments/pingpong.py [float16|bfloat16]

Why: cutting the epilogue out of the compiler's persistent 128x256x64 kernel (which makes its
output garbage) ran it 2% faster at 4096^3 (scripts/experiments/epilogue_cost.py): while both
consumer warpgroups store one tile, the tensor cores idle.

The edit, on the compiler's persistent 128x128x64 kernel with 4 stages and one consumer
warpgroup (one producer warpgroup, 256 threads): two consumer warpgroups (384 threads), each
taking every other tile of the block (tile_iter = wg, wg + 2, ...) with its own 128x128
accumulator and its own epilogue tile. Both read the one ring in order: the producer loads tile
0's 64 stages, then tile 1's, ... A stage's full barrier only tells its phase's parity apart, so a
warpgroup may start waiting on tile t's stages only once the other has waited on all of tile t-1's:
an mbarrier pair orders the main loops (warpgroup w waits on order[w], and after its last stage
arrives on order[1 - w]). While warpgroup 1 runs tile 1's main loop, warpgroup 0 stores tile 0.
The epilogue's consumer barrier becomes a named barrier per warpgroup (ids 1 and 2). The same
edit on the 64x256 kernel (4 stages of 40 KB, two 32 KB epilogue tiles: 224 KB).

Measured on the H200, 2026-12-01 (TFLOP/s, interleaved rounds, medians; outputs correct):

    size  dtype  cuBLAS  128x256 s3 (2 wg)  128x128 t128  ping-pong  64x256 t128  ping-pong
    4096  fp16   754.7   752.4              667.3         667.0      -            -
    4096  fp16   708.3   709.0              656.0         656.3      656.0        651.0   (a hot GPU)
    4096  bf16   748.6   747.1              675.8         676.2      679.5        675.0
    8192  fp16   625.6   661.7              641.7         642.1      638.4        625.7

Ping-pong buys nothing: one warpgroup's main loop, whichever tile shape, keeps the tensor cores
~10% less busy than two warpgroups on one 128x256 tile, and that, not the epilogue, is what the
single-warpgroup kernels lose.
"""

import re
import sys

from _compare import race

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul
from tileworkbench.jit.kernel import Kernel, _gpu_present

HELPERS = r'''
namespace twx {
template <int THREADS>
__device__ __forceinline__ void sync_group(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(THREADS) : "memory");
}
}  // namespace twx
'''


def must_replace(text, old, new, count=1):
    assert text.count(old) == count, (old, text.count(old))
    return text.replace(old, new)


def pingpong_source(src):
    head, kernel = src[:src.index('extern "C"')], src[src.index('extern "C"'):]
    t = must_replace(kernel, "__launch_bounds__(256, 1)", "__launch_bounds__(384, 1)")
    c_out = int(re.search(r"C_local_out = reinterpret_cast<\w+::\w+\*>\(tw_smem \+ (\d+)\)", t).group(1))
    full = int(re.search(r"stage_full_mem = tw_smem \+ (\d+);", t).group(1))
    empty = int(re.search(r"stage_empty_mem = tw_smem \+ (\d+);", t).group(1))
    grow = full - c_out  # a second epilogue tile
    t = must_replace(t, f"stage_full_mem = tw_smem + {full};", f"stage_full_mem = tw_smem + {full + grow};")
    t = must_replace(t, f"stage_empty_mem = tw_smem + {empty};", f"stage_empty_mem = tw_smem + {empty + grow};")
    order = empty + grow + 32
    t = must_replace(t, "  if (tx >= 128) {  // producer warpgroup\n",
                     f"  tw::Barrier* order = reinterpret_cast<tw::Barrier*>(tw_smem + {order});\n"
                     "  if ((tx == 0)) {\n    order[0].init(128);\n    order[1].init(128);\n  }\n"
                     "  tw::fence_barrier_init();\n  __syncthreads();\n"
                     "  if (tx >= 256) {  // producer warpgroup\n    tw::setmaxnreg_dec<24>();\n")
    t = must_replace(t, "    if ((tx < 160)) {", "    if ((tx < 288)) {")
    producer_end = t.index("  } else {  // consumer warpgroups\n")
    consumer = t[producer_end:]
    consumer = must_replace(consumer, "  } else {  // consumer warpgroups\n",
                            "  } else {  // consumer warpgroups\n    tw::setmaxnreg_inc<240>();\n"
                            "    const int wg = tx / 128;\n    int order_phase = 0;\n")
    consumer = re.sub(r"for \(int tile_iter_1 = 0; (tile_iter_1 < .*?); \+\+tile_iter_1\) \{",
                      r"for (int tile_iter_1 = wg; \1; tile_iter_1 += 2) {", consumer, count=1)
    # every consumer-side use of tx becomes the thread's index in its warpgroup
    consumer = re.sub(r"\btx\b", "(tx % 128)", consumer)
    consumer = consumer.replace("const int wg = (tx % 128) / 128;", "const int wg = tx / 128;")
    consumer = must_replace(consumer, "      // consumer: wait for stage k, gemm, release the slot\n",
                            "      // main loops in turn: the other warpgroup has waited on all its stages\n"
                            "      if (tile_iter_1 > 0) {\n        order[wg].wait(order_phase);\n        order_phase ^= 1;\n      }\n"
                            "      // consumer: wait for stage k, gemm, release the slot\n")
    consumer = must_replace(consumer, "      tw::wgmma_wait<0>();\n",
                            "      order[wg ^ 1].arrive();\n      tw::wgmma_wait<0>();\n")
    consumer = consumer.replace("tw::sync_consumers<128>();", "twx::sync_group<128>(1 + wg);")
    consumer = re.sub(r"\(&tw::swizzled<(\w+::\w+), 128>\(C_local_out, ",
                      rf"(&tw::swizzled<\1, 128>(C_local_out + wg * {grow // 2}, ", consumer)
    return head + HELPERS + t[:producer_end] + consumer


def pingpong_host(host, extra_smem):
    h = must_replace(host, "BLOCK = (256, 1, 1)", "BLOCK = (384, 1, 1)")
    size = int(re.search(r"SMEM_BYTES = (\d+)", h).group(1))
    return h.replace(f"SMEM_BYTES = {size}", f"SMEM_BYTES = {size + extra_smem}"), size + extra_smem


def pingpong_kernel(base):
    src = base.record["device_source"]
    full = int(re.search(r"stage_full_mem = tw_smem \+ (\d+);", src).group(1))
    c_out = int(re.search(r"C_local_out = reinterpret_cast<\w+::\w+\*>\(tw_smem \+ (\d+)\)", src).group(1))
    host, smem = pingpong_host(base.record["host_source"], (full - c_out) + 16)
    record = {k: v for k, v in base.record.items() if "cubin" not in k}
    record.update(device_source=pingpong_source(src), host_source=host, smem_bytes=smem)
    return Kernel(record, [2], load_device=_gpu_present())


def kernels_for(n, dtype, wide=True):
    coop = tw.compile(matmul(n, n, n, 128, 256, 64, dtype, dtype, 3, 256), out_idx=[2])
    one = tw.compile(matmul(n, n, n, 128, 128, 64, dtype, dtype, 4, 128), out_idx=[2])
    kernels = {"128x256 s3 (compiler)": coop, "128x128 s4 t128 (compiler)": one, "128x128 s4 ping-pong": pingpong_kernel(one)}
    if wide:  # a warpgroup's tile as wide as the cooperative kernel's half: 64x256, 4 stages of 40 KB
        narrow = tw.compile(matmul(n, n, n, 64, 256, 64, dtype, dtype, 4, 128), out_idx=[2])
        kernels |= {"64x256 s4 t128 (compiler)": narrow, "64x256 s4 ping-pong": pingpong_kernel(narrow)}
    return kernels


def main(dtype="float16", sizes=(4096, 8192)):
    for n in sizes:
        race(kernels_for(n, dtype), n, dtype)


if __name__ == "__main__":
    main(dtype=sys.argv[1] if len(sys.argv) > 1 else "float16")
