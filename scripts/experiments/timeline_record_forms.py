"""Experiment: what a timeline record costs, part by part (issue 20).

Compiles the spec's ``matmul_tma_copy`` (8192^3 fp16, 2 stages, no warp specialisation) and the
warp-specialised 8192^3 GEMM with ``tw.timeline`` under forms of ``tw::Timeline::record`` written
into a copy of the headers:

- ``lanes``: the record as shipped (the recording warp holds 32 events, one per lane, and stores
  them in one coalesced store every 32 records), every block, every 8th unit and every 64th;
- ``empty``: the record only counts (no clock, no store): what the instrumented structure costs
  without records (the streams' open and close, the sampled copy of the body, the count);
- ``lanes, guarded``: a sampled kernel keeps one body (the pass's ``SAMPLED_COPY`` off) and a
  block that does not record skips each record by a branch uniform in the block;
- ``skip``: a warp that does not record leaves each record at once (a branch uniform in the
  warp) instead of running it with its store switched off;
- ``shared``: the warp's 32 held events go to a static shared-memory array (``st.shared``, which an
  arrival releases at once) instead of the global buffer, and the stream's events are copied out
  at its close (the spec kernels only: their one stream of 2048 events is 16 KB of shared memory).

``python3 timeline_record_forms.py`` runs the first three forms (as docs/experiments.md
reports them); ``python3 timeline_record_forms.py skip`` the shipped form against ``skip``;
``python3 timeline_record_forms.py shared`` the shipped form against ``shared`` on the 2- and
3-stage spec kernels.
(At e0081aa the header also spread the recording warp over the warpgroup by block, and this
command compared that with the form before it: docs/experiments.md, "Measured timelines".)
"""

import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

os.environ["TILEWORKBENCH_DISABLE_CACHE"] = "1"  # the header differs under one cache key

import tileworkbench as tw  # noqa: E402
from tileworkbench.backend.timing import Timer, round_ratios  # noqa: E402
from tileworkbench.codegen import cuda as cuda_codegen  # noqa: E402
from tileworkbench.examples.gemm import matmul, matmul_tma_copy  # noqa: E402
from tileworkbench.jit import cache  # noqa: E402
from tileworkbench.passes import instrument_timeline  # noqa: E402

N, ROUNDS, REP, CAPACITY = 8192, 5, 8, 4096
SHIPPED = cuda_codegen.HEADER_DIR
RECORD = re.compile(r"  __device__ __forceinline__ void record\(.*?\n  }\n", re.S)


def form_text(form: str) -> str:
    text = (SHIPPED / "timeline.h").read_text()
    body = RECORD.search(text).group(0)
    if form == "empty":
        return text.replace(body, "  __device__ __forceinline__ void record(unsigned int, int, int) { ++n; }\n")
    if form == "lanes, guarded":  # one body: a block that does not record skips each record
        new = body.replace("    const unsigned int t = (unsigned int)clock();",
                           "    if (first == NONE) return;\n    const unsigned int t = (unsigned int)clock();")
        assert new != body
        return text.replace(body, new)
    if form == "skip":
        start = "    const unsigned int info"
        assert body.count(start) == 1
        return text.replace(body, body.replace(start, "    if (at == NONE) return;\n" + start))
    if form == "shared":
        return _shared_events(text)
    assert form == "lanes", form
    return text


STORE_HELD = re.compile(r"  __device__ __forceinline__ void store_held\(.*?\n  }\n", re.S)
CLOSE_PARTIAL = "      store_held(n & ~31u, n & 31u);  // the last, partial run\n"


def _shared_events(text: str) -> str:
    """The ``shared`` form: held events go to shared memory, the close copies them out."""
    held = STORE_HELD.search(text).group(0)
    text = text.replace(held, """  static __device__ __forceinline__ uint2* shared_events() {
    __shared__ uint2 events[STREAMS * CAPACITY];
    return events;
  }
  __device__ __forceinline__ uint2* stream_events() const {
    return shared_events() + (at - first) / STREAM_WORDS * CAPACITY;
  }
  __device__ __forceinline__ void store_held(unsigned int from, unsigned int lanes) {
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int on = at != NONE && lane < lanes && from + lane < CAPACITY;
    const unsigned int e = smem_addr(stream_events() + from + lane);
    asm volatile(
        "{\\n .reg .pred p;\\n setp.ne.u32 p, %3, 0;\\n @p st.shared.v2.u32 [%0], {%1, %2};\\n}\\n" ::"r"(e),
        "r"(held_clock), "r"(held_info), "r"(on));
  }
""")
    assert text.count(CLOSE_PARTIAL) == 1
    return text.replace(CLOSE_PARTIAL, CLOSE_PARTIAL + """      __syncwarp();
      const unsigned int kept = n < CAPACITY ? n : CAPACITY;
      for (unsigned int i = threadIdx.x & 31u; i < kept; i += 32u) {
        reinterpret_cast<uint2*>(buffer + at + HEADER)[i] = stream_events()[i];
      }
""")


def compile_with(form: str, build, configs):
    instrument_timeline.SAMPLED_COPY = form != "lanes, guarded"
    try:
        return _compile_with(form, build, configs)
    finally:
        instrument_timeline.SAMPLED_COPY = True


def _compile_with(form: str, build, configs):
    folder = Path(tempfile.mkdtemp())
    for f in SHIPPED.iterdir():
        shutil.copy(f, folder / f.name)
    (folder / "timeline.h").write_text(form_text(form))
    cuda_codegen.HEADER_DIR = folder
    cache.MEMORY.clear()  # this process's kernels are keyed without the header's text
    try:
        return tw.compile(build(), out_idx=[2], pass_configs=configs)
    finally:
        cuda_codegen.HEADER_DIR = SHIPPED


def cost_rows(name: str, variants: list, run, timer) -> list[str]:
    """Table rows ``| name | form | every | ms | cost | quartiles |`` of ``variants`` ((form, every,
    kernel), plain first), timed in ROUNDS x REP rounds of one call of each (``Timer.time_alternating``,
    the order rotated each round); cost is the median over the rounds of each call's time over
    plain's in the same round, so the GPU's clock drifting over the run stays out of it."""
    times = timer.time_alternating([lambda k=kernel: run(k) for _, _, kernel in variants], ROUNDS * REP)
    rows = []
    for (form, every, _), samples in zip(variants, times):
        cost, (q1, q3) = round_ratios(samples, times[0])
        rows.append(f"| {name} | {form} | {every if every is not None else ''} | {statistics.median(samples):.3f} | "
                    f"{cost:.3f}x | {q1:.3f}-{q3:.3f} |")
    return rows


def main() -> int:
    import torch

    torch.manual_seed(0)
    a, b = (torch.randn(N, N, device="cuda", dtype=torch.float16) for _ in range(2))
    want = a.float() @ b.float()
    timer = Timer()
    kernels = {
        "spec matmul_tma_copy s2": (lambda: matmul_tma_copy(N, N, N, 128, 128, 32, "float16", "float16", "float32",
                                                            128, 2), {"tl.disable_warp_specialized": True}),
        "spec matmul_tma_copy s3": (lambda: matmul_tma_copy(N, N, N, 128, 128, 32, "float16", "float16", "float32",
                                                            128, 3), {"tl.disable_warp_specialized": True}),
        "ws gemm 128x256x64 s3": (lambda: matmul(N, N, N, 128, 256, 64, num_stages=3, threads=256), {}),
    }
    shared = sys.argv[1:] == ["shared"]
    wanted = {"spec matmul_tma_copy s2", "spec matmul_tma_copy s3" if shared else "ws gemm 128x256x64 s3"}
    print("| kernel | form | every | ms | cost | quartiles of the rounds |\n|---|---|---|---|---|---|")
    for name, (build, configs) in kernels.items():
        variants = [("plain", None, compile_with("lanes", build, configs))]
        forms = [("lanes", True), ("lanes", 8), ("lanes", 64), ("empty", True), ("empty", 8), ("lanes, guarded", 8)]
        if sys.argv[1:] == ["skip"]:
            forms = [("lanes", True), ("lanes", 8), ("skip", True), ("skip", 8)]
        if name not in wanted:
            continue
        if shared:
            forms = [("lanes", True), ("lanes", 64), ("shared", True), ("shared", 8), ("shared", 64)]
        for form, every in forms:
            capacity = 1536 if shared else CAPACITY  # 12 KB a stream: the 2-stage kernel stays under 48 KB
            variants.append((form, every, compile_with(form, build, {**configs, "tw.timeline": every,
                                                                      "tw.timeline_capacity": capacity})))
        for form, every, kernel in variants:
            err = float((kernel(a, b).float() - want).norm() / want.norm())
            assert err < 1e-3, (name, form, every, err)
        for row in cost_rows(name, variants, lambda k: k(a, b), timer):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
