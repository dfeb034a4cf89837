"""Diagnostic: the protocol-order violations a timeline of FlashAttention forward shows (issue 20).

Runs ``mha_fwd(1, 16, 8192, 128)`` with ``tw.timeline`` (every block), checks the result against
float32, and prints what ``summary()`` calls violations, each with the rows of its block's streams
around the cause and the wait end, so that a wrong match, a wrong record or a real protocol race
can be told apart. Needs a GPU:

    PYTHONPATH=. python3 scripts/experiments/timeline_violations.py
"""

import sys

import numpy as np
import torch

import tileworkbench as tw
from tileworkbench.bench.attention import check, reference
from tileworkbench.examples.attention import PASS_CONFIGS, mha_fwd


def main() -> int:
    seq = 8192
    kernel = tw.compile(mha_fwd(1, 16, seq, 128, False), out_idx=[3],
                        pass_configs={**PASS_CONFIGS, "tw.timeline": True, "tw.timeline_capacity": 1024})
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 16, seq, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = reference(torch, q, k, v, False)
    total = 0
    for call in range(3):
        print("result", check(torch, kernel(q, k, v), ref), flush=True)
        frame = kernel.timeline()
        s = frame.summary()
        vio = s["pipeline"]["violations"]
        total += len(vio)
        print(f"call {call}: events {s['events']}, dropped {s['dropped_events']}, unclosed {s['unclosed_streams']}, "
              f"diverged {s['diverged_streams']}, waits checked {s['pipeline']['waits_checked']}, "
              f"violations {len(vio)}", flush=True)
        for v_ in vio[:4]:
            print("  ", v_)
            rows = frame[(frame["block"] == v_["block"])]
            near = rows[(rows["t_ns"] > min(v_["cause_ns"], v_["wait_end_ns"]) - 400)
                        & (rows["t_ns"] < max(v_["cause_ns"], v_["wait_end_ns"]) + 400)]
            print(near[["stream", "role", "seq", "site", "kind", "barrier", "slot", "parity", "t_ns"]].to_string())
        bad_role = frame.groupby(["block", "stream"])["role"].nunique().max()
        print("roles per stream (1 expected):", bad_role, " t_ns range", float(np.min(frame["t_ns"])),
              float(np.max(frame["t_ns"])))
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
