"""Record a measured timeline for the workbench's views and tests (needs the H200).

    PYTHONPATH=. python scripts/record_timeline_trace.py OUT_DIR

Compiles the warp-specialised GEMM (2048^3, 128x256x64, 3 stages, 256 threads) with
``tw.timeline`` (every 4th block), checks its result against float32 on random inputs, reads the
timeline and writes ``OUT_DIR/trace-timeline.json`` (the trace document, ``timeline.measured``
included: tests/fixtures keeps one for the extension's and the report's tests) and
``OUT_DIR/chrome-timeline.json`` (Chrome trace / Perfetto).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import tileworkbench as tw
from tileworkbench.examples.gemm import matmul


def main(out: Path) -> int:
    n = 2048
    kernel = tw.compile(matmul(n, n, n, 128, 256, 64, num_stages=3, threads=256), out_idx=[2],
                        pass_configs={"tw.timeline": 4})
    torch.manual_seed(0)
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = kernel(a, b)
    want = a.float() @ b.float()
    err = float((c.float() - want).norm() / want.norm())
    frame = kernel.timeline()
    out.mkdir(parents=True, exist_ok=True)
    (out / "trace-timeline.json").write_text(kernel.trace.to_json())
    frame.to_chrome_trace(out / "chrome-timeline.json")
    s = frame.summary()
    print(f"rel err {err:.1e}; {s['events']} events from {s['recorded_blocks']} blocks; violations "
          f"{len(s['pipeline']['violations'])}; lead {s['pipeline']['lead_stages_median']}")
    return 0 if err < 1e-3 and not s["pipeline"]["violations"] else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "out/timeline")))
