"""Experiment: what the persistent GEMM's epilogue costs, as an upper bound on what overlapping it
with the next tile's main loop (e.g. ping-pong consumer warpgroups) could buy.

    PYTHONPATH=. python3 scripts/experiments/epilogue_cost.py [float16|bfloat16]

"no epilogue" is the compiler's 3-stage persistent 128x256x64 kernel with the consumers' epilogue
(store wait, barrier, register -> shared writes, fence, barrier, TMA store) replaced by a sum of
the accumulators stored only if it equals an unlikely value (without a use, ptxas drops the wgmmas):
its output is garbage (not checked), its time is the main loops' and that sum's.
"""

import re
import sys

from _compare import race
from _edited import edited_kernel

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul

EPILOGUE = re.compile(r"      tw::tma_store_wait<true>\(\);\n      tw::sync_consumers<256>\(\);\n.*?"
                      r"        tw::tma_store_arrive\(\);\n      \}\n", re.S)


KEEP_ALIVE = ("      { float tw_sum = 0.0f;\n        #pragma unroll\n        for (int j = 0; j < 128; ++j) tw_sum += C_local[j];\n"
              "        if (tw_sum == 1.2345e-30f) C[tx] = decltype(C[0])(tw_sum); }\n")


def without_epilogue(src):
    cut, count = EPILOGUE.subn(KEEP_ALIVE, src)
    assert count == 1, count
    return cut


def main(dtype="float16", sizes=(4096, 8192)):
    for n in sizes:
        base = tw.compile(matmul(n, n, n, 128, 256, 64, dtype, dtype, 3, 256), out_idx=[2])
        kernels = {"compiler persistent": base, "no epilogue": edited_kernel(base, without_epilogue(base.record["device_source"]))}
        race(kernels, n, dtype, unchecked=("no epilogue",))


if __name__ == "__main__":
    main(dtype=sys.argv[1] if len(sys.argv) > 1 else "float16")
