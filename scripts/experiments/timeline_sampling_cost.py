"""Experiment: what a sampled kernel costs when few of its blocks record (issue 20).

``bench timeline`` at 67218f9 showed the spec TMA GEMMs 7-12% slower recording every 64th block
(64 of 4096 blocks), though recording every block costs them 20-22%: most of the cost did not
scale with the blocks that record. This times the spec's ``matmul_tma_copy`` (8192^3 fp16, 2 and
3 stages) plain and in sampled forms that take the cost apart:

- ``lanes``: ``tw.timeline`` as shipped, every block, every 8th and every 64th;
- ``none record``: every 64th, but no block records (the header's constructor marks every block as
  not recording): the sampled structure alone (the branch, the plain copy, open and close);
- ``empty``: every block, records that only count: the instrumented structure alone;
- ``not last R``: every 8th or 64th, but the last R blocks of the grid in launch order (R = 396:
  one wave of this kernel, 132 SMs x 3 blocks) do not record.

and prints, from each instrumented kernel's first call, its recorded blocks' durations and when
the last one ends. Every result is checked against float32 first; the variants take turns
(rotated each round) so the GPU's clock drift falls on all alike.

    PYTHONPATH=. python3 scripts/experiments/timeline_sampling_cost.py
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np

from tileworkbench.backend.timing import Timer
from tileworkbench.examples.gemm import matmul_tma_copy

_spec = importlib.util.spec_from_file_location("forms", Path(__file__).with_name("timeline_record_forms.py"))
forms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(forms)

N, CAPACITY = 8192, 4096  # rounds and calls per turn: timeline_record_forms.cost_rows
CONSTRUCTOR = "first = block % block_every == 0 ? block / block_every * STREAMS * STREAM_WORDS : NONE;"


def _constructor(replacement: str):
    shipped = forms.form_text

    def text(form):
        out = shipped("lanes")
        assert CONSTRUCTOR in out
        return out.replace(CONSTRUCTOR, replacement)
    return text


def compile_form(form, build, configs):
    """``form``: 'lanes', 'empty', 'none record' or 'not last R'."""
    shipped = forms.form_text
    if form == "none record":
        forms.form_text = _constructor("first = NONE; (void)block;")
    elif form.startswith("not last "):
        tail = int(form.split()[-1])
        forms.form_text = _constructor(f"first = block % block_every == 0 && block + {tail}u < gridDim.x * "
                                       "gridDim.y * gridDim.z ? block / block_every * STREAMS * STREAM_WORDS : NONE;")
    try:
        return forms.compile_with("empty" if form == "empty" else "lanes", build, configs)
    finally:
        forms.form_text = shipped


def main() -> int:
    import torch

    torch.manual_seed(0)
    a, b = (torch.randn(N, N, device="cuda", dtype=torch.float16) for _ in range(2))
    want = a.float() @ b.float()
    timer = Timer()
    rows = []
    for stages in (2, 3):
        name = f"spec matmul_tma_copy s{stages}"

        def build(s=stages):
            return matmul_tma_copy(N, N, N, 128, 128, 32, "float16", "float16", "float32", 128, s)

        configs = {"tl.disable_warp_specialized": True}
        variants = [("plain", None, forms.compile_with("lanes", build, configs))]
        for form, every in [("lanes", True), ("lanes", 8), ("lanes", 64), ("none record", 64), ("empty", True),
                            ("not last 396", 64), ("not last 396", 8)]:
            variants.append((form, every, compile_form(form, build, {**configs, "tw.timeline": every,
                                                                     "tw.timeline_capacity": CAPACITY})))
        for form, every, kernel in variants:
            err = float((kernel(a, b).float() - want).norm() / want.norm())
            assert err < 1e-3, (name, form, every, err)
            if form in ("lanes", "not last 396"):
                facts = kernel.timeline().facts
                spans = np.array([(lo, hi) for _, lo, hi in facts["blocks"].values()], dtype=np.float64)
                took = spans[:, 1] - spans[:, 0]
                print(f"{name} {form} every {every}: {len(took)} blocks recorded, each {np.median(took) / 1e3:.1f} us "
                      f"(median; max {took.max() / 1e3:.1f}); the last ends at {spans[:, 1].max() / 1e3:.1f} us",
                      flush=True)
        rows += forms.cost_rows(name, variants, lambda k: k(a, b), timer)
    print("| kernel | form | every | ms | cost | plain's turns spread |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
