"""Experiment: where a TileLang program's time goes, kernel by kernel, under both compilers.

A case of ``examples/tilelang_programs`` may launch several kernels (flash decoding's split and
combine kernels, attention backward's preprocess, main and postprocess kernels); the side-by-side
bench times the whole call. This runs each compiler's call under ``torch.profiler`` (after a
warm-up, on the case's own random inputs, each output checked against the case's reference first)
and prints every GPU kernel's mean duration, so a gap can be put on the kernel that owns it.

Run on the H200, TileLang 0.1.15 on the path (docs/tilelang.md):

    PYTHONPATH=.:/tmp/tl python3 scripts/experiments/kernel_parts.py flash_decoding.flash_decoding norms.rms_norm_splitk

Each argument is ``family.case``. Without TileLang, ours alone.
"""

import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from tileworkbench.bench.tilelang_programs import check, load_program

CALLS = 20


def kernel_times(call, torch) -> dict:
    """Kernel name -> (launches per call, mean microseconds per launch) over ``CALLS`` calls."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
    times = defaultdict(list)
    for event in prof.events():
        if event.device_type.name == "CUDA" and event.device_time > 0:
            times[event.name].append(event.device_time)
    return {name: (len(us) / CALLS, sum(us) / len(us)) for name, us in times.items()}


def main():
    import torch

    try:
        import tilelang  # noqa: F401
        compilers = ("tileworkbench", "tilelang")
    except Exception:
        compilers = ("tileworkbench",)
    with tempfile.TemporaryDirectory() as tmp:
        for arg in sys.argv[1:]:
            family, name = arg.split(".")
            for compiler in compilers:
                case = load_program(family, compiler, Path(tmp)).CASES[name]
                kernel = case["compile"]()
                torch.manual_seed(0)
                inputs = case["inputs"](torch)
                verdict = check(kernel, case, inputs, torch)
                print(f"{arg} {compiler}: correct={verdict['correct']}")
                total = 0.0
                for kname, (per_call, us) in sorted(kernel_times(lambda: kernel(*inputs), torch).items(),
                                                    key=lambda kv: -kv[1][0] * kv[1][1]):
                    total += per_call * us
                    print(f"    {us:9.2f} us x {per_call:g}  {kname[:90]}")
                print(f"    {total:9.2f} us per call on the GPU")


if __name__ == "__main__":
    main()
