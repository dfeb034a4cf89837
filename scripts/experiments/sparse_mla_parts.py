"""Experiment: where DeepSeek v3.2's sparse MLA forward spends its time under this compiler.

Runs TileLang's own example file (``examples/deepseek_v32/sparse_mla_fwd.py`` of TileLang's
repository, with its ``utils.py`` beside it, in ``FOLDER``) with tileworkbench standing in for
tilelang, at the file's own sizes (B 1, S 4096, SKV 4096, H 128, top-k 2048, bfloat16), once as
generated (its check against the file's torch reference first) and once per variant of the
generated CUDA with one part taken out, each in a process of its own (no cache between them), each
timed by the file's own ``do_bench``. A variant computes a wrong result (it is not checked): its
time only says what that part costs.

    PYTHONPATH=. python3 scripts/experiments/sparse_mla_parts.py FOLDER [variant ...]

Variants: ``as_generated``, ``no_gather`` (the cp.async copies of the gathered KV rows),
``no_qk`` (the two Q @ K^T gemms), ``no_pv`` (the P @ V gemm), ``no_mask`` (the mask's index loads),
``no_clobber`` (not a part: the copy's asm without its ``"memory"`` clobber).
Findings: docs/experiments.md, "Sparse MLA: where the time goes".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

VARIANTS = {
    "as_generated": [],
    "no_gather": [r"^\s*tw::cp_async<16>\(.*\n"],
    "no_qk": [r"^\s*tw::wgmma_gemm_ss<64, 64, (512|64), .*\n"],
    "no_pv": [r"^\s*tw::wgmma_gemm_ss<64, 512, 64, .*\n"],
    "no_mask": [r"^(\s*mask\[j_\d+\] = ).*\n"],
    # the copy's asm without its "memory" clobber (the commit and the wait keep theirs), so the
    # compiler may compute every copy's address, the index loads included, ahead of the copies
    "no_clobber": [r'("r"\(src_size\))\n\s*: "memory"\);'],
}


def _edit(source: str, patterns: list) -> str:
    for pattern in patterns:
        replacement = r"\1true;\n" if "mask" in pattern else r"\1);" if "src_size" in pattern else ""
        source, n = re.subn(pattern, replacement, source, flags=re.M)
        if not n:
            raise SystemExit(f"the variant's pattern {pattern!r} matches nothing in the generated CUDA")
    return source


def run_one(folder: str, variant: str):
    import tileworkbench
    import tileworkbench.language
    from tileworkbench.jit import lower

    plain = lower.generate_cuda
    lower.generate_cuda = lambda *a, **k: _edit(plain(*a, **k), VARIANTS[variant])
    sys.modules["tilelang"] = tileworkbench
    sys.modules["tilelang.language"] = tileworkbench.language
    sys.path.insert(0, folder)
    import sparse_mla_fwd as example

    print(f"== {variant}", flush=True)
    # a variant is not checked (its result is wrong by design): its time is what is asked
    example.test_sparse_mla_fwd(B=1, S=4096, SKV=4096, H=128, HKV=1, DQK=576, DV=512, topk=2048,
                                check_correctness=variant == "as_generated", block_I=64, num_stages=2, threads=256)


def main(argv: list) -> int:
    if len(argv) >= 3 and argv[1] == "--one":
        run_one(argv[2], argv[3])
        return 0
    folder, variants = argv[1], argv[2:] or list(VARIANTS)
    env = {**os.environ, "TILEWORKBENCH_DISABLE_CACHE": "1", "PYTHONUNBUFFERED": "1"}
    for variant in variants:
        subprocess.run([sys.executable, __file__, "--one", folder, variant], env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
