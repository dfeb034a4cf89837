"""isolate_starved_wgmmas: a kernel whose fragments outgrow a thread's registers gets a scheduling
fence after each wgmma gemm that waits for itself, and ptxas then spills less; other kernels are
left alone. The GPU test (tests/gpu/test_starved_wgmmas_gpu.py) checks the kernel's results."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples import matmul
from tileworkbench.examples.mla_pieces import dq_and_dkv_steps
from tileworkbench.frontend import parse
from tileworkbench.jit.lower import lower
from tileworkbench.passes import manager
from tileworkbench.passes.isolate_starved_wgmmas import SCHEDULE_FENCE
from tileworkbench.passes.rules.registers import fragment_registers, thread_register_limit

FENCE = f"{SCHEDULE_FENCE}();"


def kernel_lines(program) -> list[str]:
    return [line.strip() for line in lower(program).device_source.split("// ---- kernel ----")[1].splitlines()]


def without_the_pass(monkeypatch):
    info = manager.REGISTRY["isolate_starved_wgmmas"]
    monkeypatch.setitem(manager.REGISTRY, "isolate_starved_wgmmas", dataclasses.replace(info, fn=lambda f, ctx: f))


def test_fragment_registers_count_each_thread_s_share():
    # dQ's 64 x 512 float32 accumulator over 128 threads is 256 registers, dKV's 32 x 512 another 128
    assert fragment_registers(parse(dq_and_dkv_steps())) == 384
    assert fragment_registers(parse(matmul(1024, 1024, 1024, 128, 128, 64))) == 128 * 128 // 128
    assert thread_register_limit(128) == 255 and thread_register_limit(512) == 128


def test_each_waited_wgmma_gemm_of_a_starved_kernel_is_followed_by_the_fence():
    lines = kernel_lines(dq_and_dkv_steps())
    gemms = [i for i, line in enumerate(lines) if line.startswith("tw::wgmma_gemm_ss<")]
    assert len(gemms) == 1 and lines[gemms[0] + 1] == FENCE
    assert lines.count(FENCE) == 1  # not after the mma.sync gemms
    assert any(line.startswith("tw::gemm_ss<") for line in lines[gemms[0] + 2:])


def test_a_starved_wgmma_gemm_with_no_mma_sync_work_after_it_is_left_alone(monkeypatch):
    # 512 columns a warpgroup of 128 threads: the accumulator alone is 256 registers, but nothing
    # after the gemm is an mma.sync gemm ptxas could pull into its wait
    program = matmul(1024, 1024, 1024, 64, 512, 64, num_stages=2, threads=128)
    assert fragment_registers(parse(program)) > thread_register_limit(128)
    with_pass = lower(program).device_source
    without_the_pass(monkeypatch)
    assert FENCE not in with_pass and lower(program).device_source == with_pass


def test_a_kernel_whose_fragments_fit_is_left_alone(monkeypatch):
    program = matmul(1024, 1024, 1024, 128, 256, 64, threads=256)
    with_pass = lower(program).device_source
    without_the_pass(monkeypatch)
    assert FENCE not in with_pass and lower(program).device_source == with_pass


def test_a_gemm_the_program_waits_for_itself_gets_no_fence():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 512), "float16"), C: T.Tensor((64, 512), "float32"),
             D: T.Tensor((64, 512), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, 64), "float16")
            b_s = T.alloc_shared((64, 512), "float16")
            acc = T.alloc_fragment((64, 512), "float32")
            other = T.alloc_fragment((64, 512), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.clear(acc)
            T.wgmma_gemm(a_s, b_s, acc)
            T.wait_wgmma(0)
            T.copy(D, other)
            T.copy(acc, C)
            T.copy(other, D)

    assert fragment_registers(parse(main)) > thread_register_limit(128)
    lines = kernel_lines(main)
    assert any(line.startswith("tw::wgmma_gemm_ss<") for line in lines) and FENCE not in lines


def test_the_step_kernel_computes_dq_and_dkv_on_the_tile_interpreter():
    rng = np.random.default_rng(5)
    steps = 2
    p, kv, q, do = (rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
                    for shape in ((steps, 64, 32), (steps, 32, 512), (64, 512), (64, 512)))
    dq = np.full((64, 512), np.nan, np.float32)
    dkv = np.full((steps, 32, 512), np.nan, np.float32)
    tw.compile(dq_and_dkv_steps(steps=steps), target="cpu")(p, kv, q, do, dq, dkv)
    f64 = [x.astype(np.float64) for x in (p, kv, q, do)]
    np.testing.assert_allclose(dq, sum(f64[0][s] @ f64[1][s] for s in range(steps)), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(dkv, np.stack([f64[0][s].T @ (f64[2] + f64[3]) for s in range(steps)]),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_with_the_fence_ptxas_spills_less(monkeypatch):
    # Without it ptxas starts the dKV gemm's mma.sync instructions in the wgmma's wait, and the two
    # 128-register accumulators spill around each other (NVRTC 13.0 and 13.5: 4184 against 2560
    # bytes in a closer copy of the kernel; TileLang's own backward 4252 against 2784).
    with_fence = compile_check(lower(dq_and_dkv_steps()).device_source, "sm_90a", "fenced.cu")
    without_the_pass(monkeypatch)
    plain = compile_check(lower(dq_and_dkv_steps()).device_source, "sm_90a", "plain.cu")
    assert with_fence.spills_bytes < 0.8 * plain.spills_bytes, (with_fence.spills_bytes, plain.spills_bytes)

