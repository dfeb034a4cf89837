"""``tw.code_offset``: fillers at the top of a kernel that move its code (a probe of how much a
kernel's speed depends on where ptxas places its loops; docs/experiments.md, "Where the loop lands")."""

import struct

import pytest

import tileworkbench as tw
from tileworkbench.backend import nvrtc
from tileworkbench.errors import CompileError
from tileworkbench.examples.gemm import matmul_tma_copy

FILLER = '  asm volatile("nanosleep.u32 0;");\n'


def spec_gemm():
    return matmul_tma_copy(1024, 1024, 1024, 128, 128, 32, "float16", "float16", "float32", 128, 3)


def device_source(**configs):
    return tw.lower(spec_gemm(), target="sm_90a", pass_configs={"tl.disable_warp_specialized": True, **configs}).device_source


def test_no_offset_is_the_kernel_as_before():
    plain = device_source()
    assert device_source(**{"tw.code_offset": 0}) == plain and "nanosleep" not in plain


def test_an_offset_puts_its_fillers_right_after_the_thread_index():
    plain, moved = device_source(), device_source(**{"tw.code_offset": 3})
    start = moved.index("  const int tx = threadIdx.x;\n") + len("  const int tx = threadIdx.x;\n")
    assert moved[start:].startswith("  // tw.code_offset: 3 one-instruction fillers, the code after them moved 48 bytes\n"
                                    + FILLER * 3)
    assert moved.count("nanosleep") == 3
    assert moved.replace(moved[start:start + moved[start:].index(FILLER * 3) + len(FILLER * 3)], "") == plain


def text_bytes(cubin: bytes) -> int:
    """The size of the cubin's kernel code (its ``.text.<kernel>`` ELF section)."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    entsize, count, names_at = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * entsize) for i in range(count)]
    names = headers[names_at][4]
    texts = [size for name, _, _, _, _, size in headers
             if cubin[names + name:cubin.index(b"\0", names + name)].startswith(b".text.")]
    assert len(texts) == 1
    return texts[0]


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_the_fillers_are_instructions_in_the_cubin():
    # ptxas keeps them, one 16-byte sm_90 instruction each: eight add 128 bytes of code (the code is
    # padded to 128 bytes, so fewer may add nothing or 128)
    sizes = [text_bytes(nvrtc.compile_check(device_source(**{"tw.code_offset": k}), "sm_90a", "offset.cu").cubin)
             for k in (0, 8)]
    assert sizes[1] - sizes[0] == 128


@pytest.mark.parametrize("value", [-1, 65, True, 2.0, "2"])
def test_an_offset_that_is_not_a_small_count_is_refused(value):
    with pytest.raises(CompileError, match=r"pass config tw.code_offset is the number of one-instruction fillers"):
        device_source(**{"tw.code_offset": value})
