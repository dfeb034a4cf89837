"""Experiment: a wgmma main loop whose trip count ptxas cannot see is at least one.

Measures: the lower-triangular matmul (``examples.lower_triangular_matmul``; row block ``by``
runs ``(by + 1) * 2`` stages, so the trip count is not a constant) as compiled, where the code
generator writes that main loop as a do-while, against the same source with the consumers' main
loop turned back into the for loop the compiler wrote before. Both are checked against float64
(A lower triangular) and bit for bit against each other, then timed in alternating rounds
(TFLOP/s count the flops the kernel does: M * N * (M + block_M) on average).

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/zero_trip_loops.py [M, default 4096]

Conclusion (H200, 2026-12-01, commit 59b992e; M = 4096, median of 9 rounds, same bits): as a for
loop, which ptxas must allow to run zero times, the loop is 16-18% slower, instruction for
instruction the same loop. Before the code generator changed, with the do-while edited in by
hand (that source and today's compiled one differ only in a comment): fp16 474.6 TFLOP/s as a
for loop, 553.0 as a do-while (+16.5%); bf16 479.6 and 566.2 (+18%). After: compiled (do-while)
552.7 / 565.2, for loop 473.8 / 480.7. So the code generator writes a wgmma loop whose trip count
is not a constant but provably at least one as a do-while (``ir.records.LoopForm.at_least_once``,
``codegen/cuda.py``); constant trip counts keep their for loops. First seen in the stream-K
experiment (docs/experiments.md, 'Stream-K'): a hand-written persistent GEMM ran 17% slower with
its main loop a ``for`` over run-time bounds than as a do-while.
"""

import re
import sys

from _edited import edited_kernel

import tileworkbench as tw
from tileworkbench.examples import lower_triangular_matmul


def as_for_loop(source: str) -> str:
    """The consumers' do-while main loop written as the for loop it was before."""
    head = re.search(r"int (\w+) = 0;  // at least one iteration: a do-while\n(\s*)#pragma unroll 1\n\s*do \{\n", source)
    var, indent = head.groups()
    tail = re.compile(r"\} while \(\+\+" + var + r" < (.+?)\);")
    end = tail.search(source, head.end())
    return (source[:head.start()] + f"#pragma unroll 1\n{indent}for (int {var} = 0; {var} < {end.group(1)}; ++{var}) {{\n"
            + source[head.end():end.start()] + "}" + source[end.end():])


def main():
    import statistics

    import torch

    from tileworkbench.backend.timing import Timer

    m = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    for dtype in ("float16", "bfloat16"):
        compiled = tw.compile(lower_triangular_matmul(m, m, dtype=dtype), out_idx=[2])
        kernels = {"compiled (do-while)": compiled,
                   "for loop": edited_kernel(compiled, as_for_loop(compiled.record["device_source"]))}
        tdt = getattr(torch, dtype)
        a = torch.tril(torch.randn(m, m, device="cuda", dtype=tdt))
        b = torch.randn(m, m, device="cuda", dtype=tdt)
        ref = a.double() @ b.double()
        outs = {name: k(a, b) for name, k in kernels.items()}
        for name, c in outs.items():
            err = ((c.double() - ref).norm() / ref.norm()).item()
            assert err < (1e-2 if dtype == "bfloat16" else 2e-3), f"{name}: error {err}"
        print(f"{m} {dtype}: both match float64, same bits: {torch.equal(*outs.values())}", flush=True)
        flops = 2.0 * m * m * (m + 128) / 2
        timer, times = Timer(), {name: [] for name in kernels}
        names = list(kernels)
        for r in range(9):
            for name in names[r % 2:] + names[:r % 2]:
                times[name].append(timer.time(lambda k=kernels[name]: k(a, b, outs[name]), 3, 20).tflops(flops))
        for name, v in times.items():
            print(f"{m} {dtype} {name:19s} {statistics.median(v):7.1f} TFLOP/s (min {min(v):.1f} max {max(v):.1f})",
                  flush=True)


if __name__ == "__main__":
    main()
