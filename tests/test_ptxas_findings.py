"""ptxas's performance notes ("Potential Performance Loss") become warnings in the trace, at the
kernel's largest gemm: a kernel short of registers says so where its author can see it."""

from __future__ import annotations

import inspect

import pytest

from tileworkbench.backend import nvrtc
from tileworkbench.backend.nvrtc import NvrtcResult
from tileworkbench.examples import matmul
from tileworkbench.examples.mla_pieces import dq_and_dkv_steps
from tileworkbench.jit.lower import lower

LOG = """kernel.cu(907): warning #177-D: variable "bx" was declared but never referenced
ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function 'main_kernel' in line 2657
ptxas info    : (C7519) Potential Performance Loss: warpgroup.arrive injected to avoid a wgmma hazard in the function 'k'
ptxas info    : Used 255 registers, used 1 barriers, 1736 bytes cumulative stack size
"""


def test_the_notes_are_read_without_the_function_and_the_ptx_line():
    result = NvrtcResult(b"", LOG, 255, 2520, 0.1)
    assert result.performance_notes == [
        ("C7511", "wgmma.mma_async instructions are serialized due to insufficient register resources for the "
                  "wgmma pipeline"),
        ("C7519", "warpgroup.arrive injected to avoid a wgmma hazard")]
    assert NvrtcResult(b"", "ptxas info    : Used 64 registers\n", 64, 0, 0.1).performance_notes == []


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_a_kernel_short_of_registers_is_warned_at_its_largest_gemm():
    art = lower(dq_and_dkv_steps(), enable_device_compile=True)
    notes = [f for f in art.trace.findings if f.get("source") == "ptxas"]
    assert [f["code"] for f in notes] == ["C7511"] and notes[0]["severity"] == "warning"
    assert "short of registers" in notes[0]["message"]
    lines, first = inspect.getsourcelines(dq_and_dkv_steps)
    gemm_line = next(first + i for i, text in enumerate(lines) if "T.gemm(p_s, kv_s, acc_dq)" in text)
    assert notes[0]["line"] == gemm_line  # the 64 x 512 accumulator's gemm


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_a_kernel_that_fits_has_no_ptxas_findings():
    art = lower(matmul(1024, 1024, 1024, 128, 128, 64), enable_device_compile=True)
    assert not [f for f in art.trace.findings if f.get("source") == "ptxas"]
