"""Experiment: FlashAttention-3's two schedules, written by hand into our generated attention kernel
(the compiler's plain schedule, ``tw.gemm_overlap`` False), beside the compiler's own overlap
(``warp_specialize``'s ``rules.OverlapPlan``, ``tw.gemm_overlap`` True).

* ``overlap`` (intra-warpgroup): iteration k issues S_k = Q K_k^T and O += P_{k-1} V_{k-1} back to
  back, waits for S_k only, runs the softmax of S_k while P @ V is still on the tensor cores, then
  waits for P @ V, rescales O and casts P_k. K and V get a full/empty barrier pair each (K's slot
  is free once S_k is done, V's only after the next iteration's P @ V).
* ``pingpong``: the two consumer warpgroups take turns issuing their GEMMs (named barriers 2 and
  3), so one warpgroup's softmax runs while the other's GEMMs use the tensor cores.
* ``overlap+pingpong``: both.

The kernel is ours for the given shape (``examples/attention.py``, TileLang's 128 x 128, 2-stage,
256-thread configuration); the consumer loop and the producer loop are replaced, nothing else.
Each variant is checked against a float32 reference on random inputs, then all are timed in
5 alternating rounds of ``profiler.do_bench`` (median ms, L2 flushed).

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/attention_overlap.py [SEQ ...] [ROWc ...]

(c: causal; a causal ROW is SEQ, SEQxDIM or BATCHxHEADSxSEQxDIM, with gG for G query heads per
K/V head, e.g. 1x32x8192x128g4c.)

Findings: docs/experiments.md, "Attention: intra-warpgroup overlap and ping-pong".
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _compare import race_attention  # noqa: E402
from _edited import edited_kernel  # noqa: E402

from tileworkbench.bench.attention import compile_mha  # noqa: E402
from tileworkbench.target import PassConfigKey  # noqa: E402

BARRIERS_AT = 196640  # the generated kernel's shared memory ends here; V's barrier pair goes after it
SMEM = BARRIERS_AT + 32

HELPERS = r"""
namespace tw {
template <int N> __device__ __forceinline__ void pin(float* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void pin(half* r) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+h"(r[i].bits)::"memory");
}
__device__ __forceinline__ void turn_wait(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void turn_pass(int id) { asm volatile("bar.arrive %0, 256;" ::"r"(id) : "memory"); }
}  // namespace tw
"""


def _between(src: str, start: str, end: str) -> tuple[int, int]:
    i = src.index(start)
    return i, src.index(end, i)


def _loop_with(src: str, body: str, after: int = 0) -> int:
    """Where the unrolled loop whose first statement starts with ``body`` begins."""
    m = re.compile(r"      #pragma unroll\n      for \(int (\w+) = 0;[^\n]*\n        " + re.escape(body)).search(src, after)
    return m.start()


def _softmax_and_finish(src: str) -> tuple[str, str]:
    """The generated loop's softmax (after Q @ K^T up to the cast) and its finish (cast, rescale)."""
    i = _loop_with(src, "scores_max_prev[")
    j = _loop_with(src, "acc_s_cast[", i)
    k = src.index("      tw::wgmma_gemm_rs<", j)
    return src[i:j], src[j:k]


def edit(src: str, tiles: int, overlap: bool, pingpong: bool) -> str:
    softmax, finish = _softmax_and_finish(src)
    qk = re.search(r"      tw::wgmma_gemm_ss<(.*?)>\(\(&tw::swizzled<tw::half, 128>\(Q_shared, 0\)\), "
                   r"\(&tw::swizzled<tw::half, 128>\(K_shared, \(\(k_1 % 2\) \* 16384\)\)\), acc_s, tx\);", src)
    pv = re.search(r"      tw::wgmma_gemm_rs<(.*?)>\(acc_s_cast, \(&tw::swizzled<tw::half, 128>\(V_shared, "
                   r"\(\(k_1 % 2\) \* 16384\)\)\), acc_o, tx\);", src)
    qk_t, pv_t = qk.group(1), pv.group(1)

    def qk_call(slot, in_flight):
        return (f"      tw::wgmma_gemm_ss<{qk_t}, {in_flight}>((&tw::swizzled<tw::half, 128>(Q_shared, 0)), "
                f"(&tw::swizzled<tw::half, 128>(K_shared, (({slot}) % 2) * 16384)), acc_s, tx);\n")

    def pv_call(slot, in_flight):
        return (f"      tw::wgmma_gemm_rs<{pv_t}, {in_flight}>(acc_s_cast, "
                f"(&tw::swizzled<tw::half, 128>(V_shared, (({slot}) % 2) * 16384)), acc_o, tx);\n")

    zero_s = "      #pragma unroll\n      for (int z = 0; z < 64; ++z) acc_s[z] = 0.0f;\n"
    wait_mine = "      tw::turn_wait(2 + tx / 128);\n" if pingpong else ""
    pass_other = "      tw::turn_pass(3 - tx / 128);\n" if pingpong else ""

    def k_wait(k):
        return f"      stage_full[({k}) % 2].wait((({k}) / 2) % 2);\n"

    def v_wait(k):
        return f"      v_full[({k}) % 2].wait((({k}) / 2) % 2);\n"

    if overlap:
        body = (
            ("      if (tx >= 128) tw::turn_pass(2);  // the first turn is warpgroup 0's\n" if pingpong else "")
            + k_wait(0) + zero_s + wait_mine + qk_call(0, 1) + pass_other
            + "      tw::wgmma_wait<0>();\n      tw::pin<64>(acc_s);\n      stage_empty[0].arrive();\n"
            + softmax + finish
            + "    #pragma unroll 1\n    for (int k_1 = 1; k_1 < TILES; ++k_1) {\n"
            + k_wait("k_1") + zero_s + wait_mine + qk_call("k_1", 1) + v_wait("k_1 - 1") + pv_call("k_1 - 1", 1)
            + pass_other
            + "      tw::pin<64>(acc_s);\n      stage_empty[k_1 % 2].arrive();\n"
            + softmax
            + "      tw::wgmma_wait<0>();\n      tw::pin<64>(acc_o);\n      tw::pin<64>(acc_s_cast);\n"
            + "      v_empty[(k_1 - 1) % 2].arrive();\n"
            + finish + "    }\n"
            + v_wait("TILES - 1") + wait_mine + pv_call("TILES - 1", 1)
            + ("      if (tx < 128) tw::turn_pass(3);\n" if pingpong else "")
            + "      tw::wgmma_wait<0>();\n      tw::pin<64>(acc_o);\n"
            + "      v_empty[(TILES - 1) % 2].arrive();\n")
    else:  # the generated schedule, with turns around each GEMM's issue
        body = (
            ("      if (tx >= 128) tw::turn_pass(2);  // the first turn is warpgroup 0's\n" if pingpong else "")
            + "    #pragma unroll 1\n    for (int k_1 = 0; k_1 < TILES; ++k_1) {\n"
            + k_wait("k_1") + zero_s + wait_mine + qk_call("k_1", 1) + pass_other
            + "      tw::wgmma_wait<0>();\n      tw::pin<64>(acc_s);\n      stage_empty[k_1 % 2].arrive();\n"
            + softmax + finish + v_wait("k_1") + wait_mine + pv_call("k_1", 1)
            + pass_other
            + "      tw::wgmma_wait<0>();\n      tw::pin<64>(acc_o);\n      v_empty[k_1 % 2].arrive();\n    }\n"
            + ("      if (tx < 128) tw::turn_wait(2);  // warpgroup 1's last turn, passed to no one\n"
               if pingpong else ""))
    body = body.replace("TILES", str(tiles))

    start = src.index("    #pragma unroll 1\n    for (int k_1 = 0;")
    end = re.compile(r"    #pragma unroll\n    for \(int \w+ = 0;[^\n]*\n      acc_o\[\w+\] = \(acc_o\[\w+\] / logsum").search(src, start).start()
    src = src[:start] + body + src[end:]

    # the producer: K and V each on their own barrier pair
    p0, p1 = _between(src, "        if (tw::shuffle_elect<32>()) {\n          stage_full[(k % 2)].expect_transaction(32768);\n"
                           "          tw::tma_load(V_desc", "        stage_full[(k % 2)].arrive();\n")
    v_block = src[p0:p1].replace("stage_full", "v_full")
    src = src[:p0] + src[p1:]
    p = src.index("        stage_full[(k % 2)].arrive();\n") + len("        stage_full[(k % 2)].arrive();\n")
    src = (src[:p] + "        v_empty[(k % 2)].wait((((k / 2) + 1) % 2));\n" + v_block
           + "        v_full[(k % 2)].arrive();\n" + src[p:])
    # V's barriers, after the kernel's own
    init = src.index("  if (tx >= 256) {  // producer warpgroup")
    src = src[:init] + (
        f"  tw::Barrier* v_full = reinterpret_cast<tw::Barrier*>(tw_smem + {BARRIERS_AT});\n"
        f"  tw::Barrier* v_empty = reinterpret_cast<tw::Barrier*>(tw_smem + {BARRIERS_AT + 16});\n"
        "  if (tx == 0) {\n    v_full[0].init(32);\n    v_full[1].init(32);\n"
        "    v_empty[0].init(256);\n    v_empty[1].init(256);\n  }\n"
        "  tw::fence_barrier_init();\n  __syncthreads();\n") + src[init:]
    kernel_at = src.index("// ---- kernel ----")
    return src[:kernel_at] + HELPERS + src[kernel_at:]


QUICK = True  # the ping-pong variants measured 0.94-0.95x and 0.79-0.82x (docs/experiments.md): left out


def compare(kernels: dict, seq: int, causal: bool, batch: int = 1, heads: int = 16, dim: int = 128,
            groups: int = 1) -> None:
    """Check every kernel against float32 on the same random inputs, then time them in 5
    alternating rounds and print each one's TFLOP/s and its speed over the first ("generated")."""
    import torch

    torch.manual_seed(0)
    q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(batch, heads // groups, seq, dim, device="cuda", dtype=torch.float16) for _ in range(2))
    label = f"{batch}x{heads}x{seq}x{dim}{f' gqa{groups}' if groups > 1 else ''}{' causal' if causal else ''}"
    race_attention(kernels, q, k, v, causal, label, "generated")


PLAIN = {PassConfigKey.TW_GEMM_OVERLAP: False}
OVERLAP = {PassConfigKey.TW_GEMM_OVERLAP: True}


def main(seqs) -> None:
    """Non-causal rows: the plain schedule, the compiler's overlap and the hand-written variants
    (edits of the plain kernel's source)."""
    for seq in seqs:
        base = compile_mha(1, 16, seq, 128, False, pass_configs=PLAIN)
        src = base.get_kernel_source()
        kernels = {"generated": base, "compiler overlap": compile_mha(1, 16, seq, 128, False, pass_configs=OVERLAP)}
        for name, flags in (("hand overlap", (True, False)),) + (() if QUICK else (
                ("hand pingpong", (False, True)), ("hand overlap+pingpong", (True, True)))):
            kernels[name] = edited_kernel(base, edit(src, seq // 128, *flags), smem_bytes=SMEM, out_idx=(3,))
        compare(kernels, seq, False)


def causal(rows) -> None:
    """Causal rows (``SEQ``, ``SEQxDIM``, ``BxHxSEQxDIM`` or ``...gG`` for G heads per K/V head):
    the compiler's plain schedule against its overlap (no hand edit)."""
    for row in rows:
        shape, _, groups = row.partition("g")
        dims = [int(x) for x in shape.split("x")]
        batch, heads, seq, dim = {1: lambda: (1, 16, dims[0], 128), 2: lambda: (1, 16, *dims),
                                  4: lambda: tuple(dims)}[len(dims)]()
        groups = int(groups or 1)
        compare({name: compile_mha(batch, heads, seq, dim, True, groups=groups, pass_configs=configs)
                 for name, configs in (("generated", PLAIN), ("compiler overlap", OVERLAP))},
                seq, True, batch, heads, dim, groups)


if __name__ == "__main__":
    main([int(s) for s in sys.argv[1:] if not s.endswith("c")] or ([] if sys.argv[1:] else [4096, 8192]))
    causal([s[:-1] for s in sys.argv[1:] if s.endswith("c")])
