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
  one wave of this kernel, 132 SMs x 3 blocks) do not record;
- ``first R``: every k-th of the first R blocks only (``few``: with every 512th and 4096th, one block);
- ``binary``: no block records though both copies are kept (the grid never reaches R = 10^9);
- ``which``: one block records, ``only B`` (0, 200, 2048, 3900 or the last, 4095);
- ``clocks``: one block records, with ``%globaltimer`` read as ``clock64`` or no clock read in a record;
- ``silent``: one block runs the instrumented copy with records that only count (``empty one``: the
  streams' headers still written at open and close; ``silent one``: nothing written);
- ``stores``: the same, the header written at open only or at close only; and ``deferred open``:
  records as shipped, but open() writes nothing (its clocks kept in registers) and close() writes
  the whole header;
- ``where``: one block records (as shipped, and counting only) into CuPy's pool as shipped or into
  a torch allocation (``torch``); every variant timed again without the timer's L2 flush;
- ``stray``: one word stored into the buffer by thread 0 of block 1, a block that does not record,
  beside ``silent one`` (block 0 counting, nothing written) and beside no block recording;
- ``shift``: no block records, and block 1 stores 1 to 8 words at its start: the same kernel with
  its code after that moved by a few instructions each time (is the cost where the loop lands?).

Each recording variant's blocks are printed twice: from its first call, and from the last timed one.

and prints, from each instrumented kernel's first call, its recorded blocks' durations and when
the last one ends. Every result is checked against float32 first; the variants take turns
(``Timer.time_alternating``: one call of each a round, rotated; cost the median of the rounds'
ratios) so the GPU's clock drift falls on all alike.

    PYTHONPATH=. python3 scripts/experiments/timeline_sampling_cost.py [few | binary | which | clocks | silent | stores | where | stray | shift]
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


def _silent_with(shipped, extra: str):
    """The ``silent one`` form (block 0 runs the instrumented copy, nothing written) with ``extra``
    appended to the constructor (``shipped``: the header's text by form)."""
    def text(_form):
        out = shipped("empty")
        for guard in ("if (threadIdx.x == TX && first != NONE) {", "if (threadIdx.x == TX) {",
                      "if ((threadIdx.x >> 5) == (TX >> 5) && at != NONE) {"):
            assert out.count(guard) == 1, guard
            out = out.replace(guard, "if (false) {")
        assert CONSTRUCTOR in out
        return out.replace(CONSTRUCTOR, "first = block == 0u ? 0u : NONE; " + extra)
    return text


def compile_form(form, build, configs):
    """``form``: 'lanes', 'empty', 'none record', 'not last R', 'first R', 'only B', 'no globaltimer'
    or 'no record clock'."""
    shipped = forms.form_text
    if form == "none record":
        forms.form_text = _constructor("first = NONE; (void)block;")
    elif form == "none record, a stray store":  # no block records; thread 0 of block 1 stores one word at its start
        forms.form_text = _constructor("first = NONE; if (block == 1u && threadIdx.x == 0) buffer[0] = 1u;")
    elif form.startswith("none record, stray stores "):  # the same with N words: the code before the loop grows
        count = int(form.split()[-1])
        stores = " ".join(f"buffer[{i}] = {i + 1}u;" for i in range(count))
        forms.form_text = _constructor(f"first = NONE; if (block == 1u && threadIdx.x == 0) {{ {stores} }}")
    elif form == "silent one, a stray store":  # block 0 counts silently; thread 0 of block 1 stores one word
        forms.form_text = _silent_with(shipped, "if (block == 1u && threadIdx.x == 0) buffer[0] = 1u;")
    elif form.startswith("first "):
        head = int(form.split()[-1])
        forms.form_text = _constructor(f"first = block % block_every == 0 && block < {head}u ? "
                                       "block / block_every * STREAMS * STREAM_WORDS : NONE;")
    elif form.startswith("not last "):
        tail = int(form.split()[-1])
        forms.form_text = _constructor(f"first = block % block_every == 0 && block + {tail}u < gridDim.x * "
                                       "gridDim.y * gridDim.z ? block / block_every * STREAMS * STREAM_WORDS : NONE;")
    elif form.startswith("only "):  # one block records, at the buffer's first stream (every 4096 sizes it)
        forms.form_text = _constructor(f"first = block == {int(form.split()[-1])}u ? 0u : NONE;")
    elif form in ("empty one", "silent one", "open writes only", "close writes only"):
        # records that only count; "silent": open and close write nothing; "open/close writes only":
        # the stream's header written at one end only
        guards = {"open": ["if (threadIdx.x == TX && first != NONE) {"],
                  "close": ["if (threadIdx.x == TX) {", "if ((threadIdx.x >> 5) == (TX >> 5) && at != NONE) {"]}
        off = {"empty one": [], "silent one": guards["open"] + guards["close"],
               "open writes only": guards["close"], "close writes only": guards["open"]}[form]

        def text(_form, off=off):
            out = shipped("empty")
            for guard in off:
                assert out.count(guard) == 1, guard
                out = out.replace(guard, "if (false) {")
            return out
        forms.form_text = text
    elif form == "deferred open":  # open() writes nothing: its clocks kept in registers, close() writes the header
        def text(_form):
            out = shipped("lanes")
            members = "  unsigned int held_clock, held_info;  // the event this lane holds until the warp stores 32\n"
            opening = ("      unsigned int* mine = buffer + at;\n      unsigned int sm;\n"
                       '      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));\n'
                       "      put64(mine + GT_OPEN, global_ns());\n      put64(mine + CLOCK_OPEN, clock());\n"
                       "      mine[SM] = sm;\n"
                       "      mine[BLOCK] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
                       "      mine[THREAD] = TX;\n")
            closing = "        unsigned int* mine = buffer + at;\n        put64(mine + CLOCK_CLOSE, clock());\n"
            for part in (members, opening, closing):
                assert out.count(part) == 1, part
            out = out.replace(members, members + "  unsigned long long opened_ns = 0, opened_clock = 0;\n")
            opening_now = opening.split("      mine[THREAD] = TX;\n")[0]
            assert out.count(opening_now) == 1
            closed = ("        unsigned int* mine = buffer + at;\n        unsigned int sm;\n"
                      '        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));\n'
                      "        put64(mine + GT_OPEN, opened_ns);\n        put64(mine + CLOCK_OPEN, opened_clock);\n"
                      "        mine[SM] = sm;\n"
                      "        mine[BLOCK] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);\n"
                      "        mine[THREAD] = TX;\n        put64(mine + CLOCK_CLOSE, clock());\n")
            out = out.replace(opening, "      opened_ns = global_ns();\n      opened_clock = clock();\n")
            out = out.replace("      mine[CLOSED] = 0u;  // the buffer is zeroed once, not per launch: a stream counts once this "
                              "launch closes it\n", "")
            return out.replace(closing, closed)
        forms.form_text = text
    elif form in ("no globaltimer", "no record clock"):  # every 4096th (block 0) records, a clock read left out
        old, new = (('"mov.u64 %0, %%globaltimer;"', '"mov.u64 %0, %%clock64;"') if form == "no globaltimer"
                    else ("const unsigned int t = (unsigned int)clock();", "const unsigned int t = 0u;"))

        def text(_form, old=old, new=new):
            out = shipped("lanes")
            assert old in out
            return out.replace(old, new)
        forms.form_text = text
    try:
        return forms.compile_with("empty" if form == "empty" else "lanes", build, configs)
    finally:
        forms.form_text = shipped


def _records_blocks(form: str, every) -> bool:
    """Whether the variant records blocks with their spans (a timeline to print)."""
    return every is not None and form not in ("none record", "empty", "not last 1000000000", "empty one",
                                              "silent one", "open writes only", "close writes only",
                                              "empty one torch", "silent one, a stray store",
                                              "none record, a stray store") and not form.startswith("none record")


def _timeline_buffers_in_torch() -> None:
    """``Runtime.timeline_buffer`` as shipped, except that a runtime marked ``timeline_in_torch``
    records into a torch allocation of the same size (the ``where`` mode: CuPy's pool or not)."""
    import cupy
    import torch

    from tileworkbench.backend.timeline_buffers import TimelineBuffers

    shipped = TimelineBuffers.timeline_buffer

    def placed(self, kernel_name, grid, layout, stream=0):
        address = shipped(self, kernel_name, grid, layout, stream)
        if not getattr(self, "timeline_in_torch", False):
            return address
        buffer, grid_kept, stream_kept = self.timelines[kernel_name]
        held = self.__dict__.setdefault("torch_timelines", {})
        if kernel_name not in held or held[kernel_name].numel() != buffer.size:
            held[kernel_name] = torch.zeros(buffer.size, dtype=torch.int32, device="cuda")
        self.timelines[kernel_name] = (cupy.from_dlpack(held[kernel_name]).view(cupy.uint32), grid_kept, stream_kept)
        return held[kernel_name].data_ptr()

    TimelineBuffers.timeline_buffer = placed


def main() -> int:
    import torch

    if sys.argv[1:] == ["where"]:
        _timeline_buffers_in_torch()

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
        forms_here = [("lanes", True), ("lanes", 8), ("lanes", 64), ("none record", 64), ("empty", True),
                      ("not last 396", 64), ("not last 396", 8)]
        if sys.argv[1:] == ["few"]:  # how the cost goes with fewer recorders, and where they run
            forms_here = [("lanes", 64), ("lanes", 512), ("lanes", 4096), ("not last 396", 64),
                          ("not last 792", 64), ("first 396", 8), ("first 396", 64), ("none record", 64)]
        if sys.argv[1:] == ["binary"]:  # no block records, both copies kept (the grid never reaches R)
            forms_here = [("lanes", 4096), ("not last 1000000000", 4096), ("not last 1000000000", 64),
                          ("none record", 64)]
        if sys.argv[1:] == ["which"]:  # one block records: which one
            forms_here = [("lanes", 4096), ("only 0", 4096), ("only 200", 4096), ("only 2048", 4096),
                          ("only 3900", 4096), ("only 4095", 4096)]
        if sys.argv[1:] == ["silent"]:  # one block runs the instrumented copy, recording less and less
            forms_here = [("lanes", 4096), ("empty one", 4096), ("silent one", 4096), ("not last 1000000000", 4096)]
        if sys.argv[1:] == ["stores"]:  # one block: which of the stream's header writes cost
            forms_here = [("lanes", 4096), ("empty one", 4096), ("open writes only", 4096),
                          ("close writes only", 4096), ("silent one", 4096), ("deferred open", 4096),
                          ("deferred open", 64)]
        if sys.argv[1:] == ["where"]:  # one block records into a torch allocation (marked "torch"), or CuPy's pool
            forms_here = [("lanes", 4096), ("lanes torch", 4096), ("empty one", 4096), ("empty one torch", 4096),
                          ("silent one", 4096)]
        if sys.argv[1:] == ["stray"]:  # one word stored by a block that does not record
            forms_here = [("silent one", 4096), ("silent one, a stray store", 4096), ("none record", 4096),
                          ("none record, a stray store", 4096), ("empty one", 4096)]
        if sys.argv[1:] == ["shift"]:  # no block records; 1-8 words stored by block 1: the kernel's code shifted
            forms_here = [("none record", 4096)] + [(f"none record, stray stores {n}", 4096) for n in range(1, 9)]
        if sys.argv[1:] == ["clocks"]:  # one block records, without one of its clock reads
            forms_here = [("lanes", 4096), ("no globaltimer", 4096), ("no record clock", 4096)]
        for form, every in forms_here:
            in_torch = form.endswith(" torch")
            kernel = compile_form(form.removesuffix(" torch"), build, {**configs, "tw.timeline": every,
                                                                      "tw.timeline_capacity": CAPACITY})
            if kernel._runtime is None:
                kernel._load()
            kernel._runtime.timeline_in_torch = in_torch
            variants.append((form, every, kernel))
        for form, every, kernel in variants:
            err = float((kernel(a, b).float() - want).norm() / want.norm())
            assert err < 1e-3, (name, form, every, err)
            if _records_blocks(form, every):
                facts = kernel.timeline().facts
                spans = np.array([(lo, hi) for _, lo, hi in facts["blocks"].values()], dtype=np.float64)
                took = spans[:, 1] - spans[:, 0]
                print(f"{name} {form} every {every}: {len(took)} blocks recorded, each {np.median(took) / 1e3:.1f} us "
                      f"(median; max {took.max() / 1e3:.1f}); the last ends at {spans[:, 1].max() / 1e3:.1f} us",
                      flush=True)
        rows += forms.cost_rows(name, variants, lambda k: k(a, b), timer)
        if sys.argv[1:] == ["where"]:  # again without the timer's L2 flush before each call
            rows += [row.replace(f"| {name} |", f"| {name}, no L2 flush |")
                     for row in forms.cost_rows(name, variants, lambda k: k(a, b), Timer(flush_bytes=0))]
        for form, every, kernel in variants:  # the recorders again, in the last timed call
            if _records_blocks(form, every):
                spans = np.array([(lo, hi) for _, lo, hi in kernel.timeline().facts["blocks"].values()])
                took = spans[:, 1] - spans[:, 0]
                print(f"{name} {form} every {every}, last timed call: recorded blocks each {np.median(took) / 1e3:.1f} "
                      f"us (median; max {took.max() / 1e3:.1f}); the last ends at {spans[:, 1].max() / 1e3:.1f} us",
                      flush=True)
    print("| kernel | form | every | ms | cost | quartiles of the rounds |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
