"""How the code generator writes loops around wgmma (codegen/cuda.py: wgmma_loop_runs_at_least_once)."""

import re

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples import lower_triangular_matmul, matmul

SM90 = {"kind": "cuda", "arch": "sm_90"}


def kernel_body(art):
    return art.device_source.split("// ---- kernel ----")[1]


def test_a_wgmma_loop_with_a_block_dependent_trip_count_is_a_do_while():
    # Row block by runs (by + 1) * 2 stages: at least 2, not a constant. Written as a for loop
    # ptxas must allow it to run zero times, and the kernel ran 16-18% slower on the H200
    # (scripts/experiments/zero_trip_loops.py).
    for configs, var in (({}, "k_1"), ({tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}, "k")):
        art = tw.lower(lower_triangular_matmul(1024, 1024), target=SM90, pass_configs=configs)
        body = kernel_body(art)
        head = f"int {var} = 0;  // at least one iteration: a do-while\n"
        assert body.count("// at least one iteration: a do-while") == 1, configs
        loop = body[body.index(head):]
        loop = loop[:loop.index(f"}} while (++{var} < ((by * 2) + 2));")]
        assert re.search(r"#pragma unroll 1\n\s*do \{\n", loop) and "tw::wgmma_gemm_ss<" in loop
        assert compile_check(art.device_source, "sm_90a").registers
    # the warp-specialised producer's loop issues no wgmma: it stays a for loop
    producer = kernel_body(tw.lower(lower_triangular_matmul(1024, 1024), target=SM90)).split("consumer warpgroups")[0]
    assert "for (int k = 0; k < ((by * 2) + 2); ++k) {" in producer


def test_constant_trip_counts_keep_their_for_loops():
    for threads in (128, 256):
        art = tw.lower(matmul(1024, 1024, 1024, 128, 256 if threads == 256 else 128, 64, "float16", "float16", 3,
                              threads), target=SM90)
        body = kernel_body(art)
        assert "do {" not in body and "for (int k_1 = 0; k_1 < 16; ++k_1) {" in body
