"""The GEMM suite from a checkout: ``python benchmarks/gemm.py [--quick] [--out DIR] ...``.

Same code and arguments as ``python -m tileworkbench.bench gemm`` (tileworkbench/bench/cli.py).
"""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from the source tree
    from tileworkbench.bench.cli import main

    sys.exit(main(["gemm", *sys.argv[1:]]))
