"""Property: the attention forward kernel (``examples.attention.mha_fwd``, written as TileLang's
example is) at a random configuration (sizes, head dimension, causal or not, tiles, stages,
threads, grouped heads) and with the pass configs that choose its pipeline (the overlap of the
softmax with the previous P @ V, a barrier pair per tile, no warp specialisation) either lowers,
and NVRTC then compiles its CUDA for sm_90a, or raises a CompileError that names a line of the
kernel: never another exception, an internal error, a message without a line, or the barrier
checker rejecting the compiler's own protocol. A sweep of 400 configurations found num_stages=0
split into a producer with no stage to fill (``k % 0``, no line); tests/test_warp_specialize.py
keeps that case. One of 800 more asked ptxas for more registers than 512 threads leave (an
internal error then): a CompileError at the gemm now, below."""


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tileworkbench as tw
from tileworkbench.backend.nvrtc import RegisterShortage, compile_check, nvrtc_version
from tileworkbench.examples.attention import mha_fwd

from .harness import lowered_or_refused

EXAMPLES = 40
COMPILED = 12  # NVRTC takes 0.3-0.6 s on each: a sample of the lowered ones
CONFIGS = [{}, {}, {"tw.gemm_overlap": False}, {"tw.gemm_overlap": True}, {"tl.disable_warp_specialized": True},
           {"tw.ws_tile_barriers": True}]


@st.composite
def attention_configs(draw) -> tuple:
    heads = draw(st.sampled_from([2, 4, 8]))
    config = dict(batch=draw(st.sampled_from([1, 2])), heads=heads,
                  seq_len=draw(st.sampled_from([128, 256, 1000, 1024, 4096])),
                  dim=draw(st.sampled_from([32, 64, 96, 128, 256])), is_causal=draw(st.booleans()),
                  block_M=draw(st.sampled_from([64, 128, 128, 192])),
                  block_N=draw(st.sampled_from([32, 64, 128, 128, 176, 256])),
                  num_stages=draw(st.sampled_from([0, 1, 2, 2, 3])),
                  threads=draw(st.sampled_from([128, 256, 256, 384])),
                  groups=draw(st.sampled_from([g for g in (1, 1, 2, 4) if heads % g == 0])))
    return config, draw(st.sampled_from(CONFIGS))


def test_random_attention_configurations_lower_and_compile_or_raise_a_compile_error():
    lowered, refused = [], []

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(attention_configs())
    def check(drawn):
        config, pass_configs = drawn
        artifact = lowered_or_refused(lambda: tw.lower(mha_fwd(**config), target="sm_90a", pass_configs=pass_configs),
                                      f"{drawn}", own_protocol=True)
        if artifact is None:
            refused.append(drawn)
        else:
            lowered.append((drawn, artifact.device_source))

    check()
    assert len(lowered) >= EXAMPLES // 4 and refused, (len(lowered), len(refused))
    for drawn, source in lowered[:COMPILED]:
        try:
            compile_check(source, "sm_90a", name="attention_property.cu")
        except RegisterShortage:
            continue  # tiles and threads past the register file: compile() says so at the gemm (below)
        except tw.CompileError as err:
            raise AssertionError(f"NVRTC rejected the CUDA at {drawn}:\n{err}") from err


@pytest.mark.skipif(nvrtc_version() is None, reason="NVRTC is not installed here")
def test_tiles_past_the_register_file_are_a_compile_error_at_the_gemm():
    """192 x 256 score tiles on three consumer warpgroups and a producer: 512 threads leave 128
    registers each, and one wgmma of 256 columns needs about 154 (ptxas stops)."""
    program = mha_fwd(1, 8, 1024, 128, True, block_M=192, block_N=256, num_stages=1, threads=384, groups=2)
    with pytest.raises(tw.CompileError) as caught:
        tw.lower(program, target="sm_90a", enable_device_compile=True)
    err = caught.value
    assert not isinstance(err, RegisterShortage) and "internal error" not in str(err)
    assert "does not fit in registers: ptxas needs 154 registers per thread" in str(err)
    assert "512 threads a block (384 + a 128-thread producer warpgroup) leave 128 each" in str(err)
    assert err.loc is not None and err.loc.file.endswith("examples/attention.py")
    assert "T.gemm(Q_shared, K_shared, acc_s" in err.loc.text
