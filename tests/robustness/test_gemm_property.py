"""Property: a GEMM tile loop at a random configuration, the way TileLang's examples write one
(sizes, tiles, stages, threads, data types, B's layout, the warp policy, the epilogue through a
shared tile or not, a loop that is pipelined or not, the pass configs that switch paths), either
lowers, and NVRTC then compiles its CUDA for sm_90a, or raises a CompileError that names a line of
the kernel. Nothing else: no other exception, no internal error, no barrier-protocol error from the
checker (the user wrote no barrier, so one would be the compiler's own), no CUDA NVRTC rejects.

The random grammar of ``test_property.py`` reaches neither warp specialisation nor the pipelining,
epilogue and TMA passes often; this one drives them (the pass coverage it reaches is asserted).
"""


from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


from .harness import Bad, lowered_or_refused, run
from .test_property import _compile_all

EXAMPLES = 240
# mostly what tensor cores take here; float32 and int8 inputs and a float16 accumulator are refused
INPUTS = ["float16"] * 4 + ["bfloat16"] * 2 + ["float8_e4m3"] * 2 + ["float32", "int8"]
ACCUMULATORS = {"float16": ["float32"] * 5 + ["float16"], "bfloat16": ["float32"], "float32": ["float32"],
                "float8_e4m3": ["float32"], "int8": ["int32"]}
CONFIGS = [{}, {}, {}, {"tl.disable_warp_specialized": True}, {"tl.disable_tma_lower": True},
           {"tw.disable_wgmma": True}, {"tw.register_epilogue": True}, {"tw.disable_persistent": True},
           {"tw.disable_rasterization": True}]
# passes the configurations must reach, each in some lowered program
MUST_REACH = ("warp_specialize", "inject_software_pipeline", "lower_tma", "stage_epilogue", "carry_stage_counters")


@st.composite
def gemm_programs(draw) -> str:
    size = st.sampled_from([128, 256, 384, 512, 1000, 1024])
    m, n, k = draw(size), draw(size), draw(size)
    bm, bn = draw(st.sampled_from([64, 128, 128, 256])), draw(st.sampled_from([64, 128, 128, 256, 96]))
    bk = draw(st.sampled_from([16, 32, 64, 64, 128]))
    stages = draw(st.sampled_from([0, 1, 2, 2, 3, 3, 4]))
    threads = draw(st.sampled_from([128, 128, 256, 256, 384]))
    dtype = draw(st.sampled_from(INPUTS))
    accum = draw(st.sampled_from(ACCUMULATORS[dtype]))
    # mostly a 16-bit result, which a pipelined (not warp-specialised) GEMM stages through shared memory
    out = draw(st.sampled_from([accum] + ["float16" if dtype != "int8" else "int32"] * 2))
    transpose_b = draw(st.booleans()) or dtype == "float8_e4m3" and draw(st.booleans())
    policy = draw(st.sampled_from(["", ", policy=T.GemmWarpPolicy.FullRow", ", policy=T.GemmWarpPolicy.Square"]))
    loop = draw(st.sampled_from(["T.Pipelined({}, num_stages={})", "T.Pipelined({}, num_stages={})",
                                 "T.serial({})"]))
    staged = draw(st.booleans())
    configs = draw(st.sampled_from(CONFIGS))
    b_shape, b_tile = ((n, k), (bn, bk)) if transpose_b else ((k, n), (bk, bn))
    b_at = "bx * {bn}, kk * {bk}" if transpose_b else "kk * {bk}, bx * {bn}"
    trips = f"T.ceildiv({k}, {bk})"
    header = loop.format(trips, stages)
    lines = [
        "@T.prim_func",
        f'def main(A: T.Tensor(({m}, {k}), "{dtype}"), B: T.Tensor({b_shape}, "{dtype}"), '
        f'C: T.Tensor(({m}, {n}), "{out}")):',
        f"    with T.Kernel(T.ceildiv({n}, {bn}), T.ceildiv({m}, {bm}), threads={threads}) as (bx, by):",
        f'        A_s = T.alloc_shared(({bm}, {bk}), "{dtype}")',
        f'        B_s = T.alloc_shared({b_tile}, "{dtype}")',
        f'        C_f = T.alloc_fragment(({bm}, {bn}), "{accum}")',
        "        T.clear(C_f)",
        f"        for kk in {header}:",
        f"            T.copy(A[by * {bm}, kk * {bk}], A_s)",
        f"            T.copy(B[{b_at.format(bn=bn, bk=bk)}], B_s)",
        f"            T.gemm(A_s, B_s, C_f{', transpose_B=True' if transpose_b else ''}{policy})",
    ]
    if staged:
        lines += [f'        C_s = T.alloc_shared(({bm}, {bn}), "{out}")', "        T.copy(C_f, C_s)",
                  f"        T.copy(C_s, C[by * {bm}, bx * {bn}])"]
    else:
        lines.append(f"        T.copy(C_f, C[by * {bm}, bx * {bn}])")
    lines += ["", "", "def run():", f"    return tw.lower(main, target=SM90, pass_configs={configs!r})"]
    return "\n".join(lines) + "\n"


def test_random_gemm_configurations_lower_and_compile_or_raise_a_compile_error():
    lowered, refused, reached = [], [], set()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(gemm_programs())
    def check(source):
        case = Bad(f"gemm-property-{len(lowered) + len(refused)}", source, "")
        artifact = lowered_or_refused(lambda: run(case), f":\n{source}", own_protocol=True)
        if artifact is None:
            refused.append(source)
            return
        reached.update(p.name for p in artifact.trace.passes if p.changed)
        lowered.append((source, artifact.device_source))

    check()
    total = len(lowered) + len(refused)
    assert len(lowered) > total // 3, f"only {len(lowered)} of {total} configurations lowered"
    assert refused, "no configuration was refused: the sizes drawn never leave the supported ones"
    missing = [p for p in MUST_REACH if p not in reached]
    assert not missing, f"no lowered configuration reached {missing}"
    _compile_all(lowered)
