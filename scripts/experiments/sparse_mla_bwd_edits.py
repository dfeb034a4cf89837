"""Experiment: DeepSeek v3.2's sparse MLA backward as this compiler generates it, beside the same
source with one edit made by hand, on the script's own inputs in one process: dQ and dKV of the
edited kernel checked against the unedited one's, then both timed in alternating rounds of
``profiler.do_bench``.

    PYTHONPATH=. python3 scripts/experiments/sparse_mla_bwd_edits.py EXAMPLES EDIT

EXAMPLES is TileLang's ``examples`` folder (``deepseek_v32/sparse_mla_bwd.py`` and the forward
beside it are loaded from it, ``tilelang`` meaning tileworkbench). EDIT names an edit of
``EDITS``:

* ``opaque_tid``: the main loop reads the thread index again at its top through an
  ``asm volatile`` that NVVM cannot hoist, so that nothing computed from it is hoisted out of the
  loop (NVVM's loop-invariant code motion lifts the thread's addresses out, and ptxas, at 255
  registers, spills them and reloads them every iteration: 316 -> 72 bytes of spill stores, the
  loop's local loads and stores 80 -> 24 an iteration, 172 more instructions).
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _edited import edited_kernel, v32_sparse_mla_bwd  # noqa: E402


def opaque_tid(source: str) -> str:
    lines = source.split("\n")
    start = next(i for i, line in enumerate(lines) if re.match(r"^  for \(int i_i = 0; i_i < \d+; \+\+i_i\) \{$", line))
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == "  }")
    for i in range(start + 1, end):
        lines[i] = re.sub(r"\btx\b", "tx_again", lines[i])
    lines.insert(start + 1, '    int tx_again; asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tx_again));')
    return "\n".join(lines)


EDITS = {"opaque_tid": opaque_tid}


def main(examples: Path, edit: str) -> None:
    from tileworkbench.profiler import do_bench

    m, args, call_args, dkv = v32_sparse_mla_bwd(examples)
    ours = m.bwd.compile(*args)
    edited_source = EDITS[edit](ours.get_kernel_source())
    kernels = {"now": ours, edit: edited_kernel(ours, edited_source, out_idx=ours.out_idx)}
    results = {}
    for name, kernel in kernels.items():
        dkv.zero_()
        dq = kernel(*call_args)
        results[name] = (dq.float(), dkv.clone())
    for what, (a, b) in zip(("dQ", "dKV"), zip(results["now"], results[edit])):
        err = ((a - b).norm() / a.norm()).item()
        print(f"{what}: relative difference {err:.2e}", flush=True)
        assert err < 1e-3, f"{edit} computes a different {what}"
    times = {name: [] for name in kernels}
    for _ in range(5):
        for name, kernel in kernels.items():
            times[name].append(do_bench(lambda kernel=kernel: kernel(*call_args),
                                        warmup=25, rep=100))
    base = statistics.median(times["now"])
    for name, samples in times.items():
        ms = statistics.median(samples)
        print(f"sparse_mla_bwd {name:10s} {ms:.3f} ms  {base / ms:.3f}x of now", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
