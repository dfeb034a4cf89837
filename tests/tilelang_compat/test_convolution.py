"""Convolution's two constructs: ``T.Tensor(shape, dtype, t.data)``, another shape over a
tensor's memory, and ``T.im2col``, image patches gathered into a GEMM tile."""

from __future__ import annotations

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs.convolution import convolution

from .kernel_files import import_kernel_file

SM90 = "sm_90a"


def _kernel(**sizes):
    params = dict(N=2, C=64, H=10, W=12, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128, block_K=32,
                  num_stages=2, threads=128)
    return convolution.compile(**{**params, **sizes})


def test_views_point_into_their_tensors_and_the_launcher_checks_what_they_need():
    kernel = _kernel()
    code = kernel.get_kernel_source()
    assert "tw::half* filters_2d = reinterpret_cast<tw::half*>((&kernel[0]));" in code
    assert "tw::half* out_2d = reinterpret_cast<tw::half*>((&out[0]));" in code
    host = kernel.get_host_source()
    # the views' 16-byte copies hold the tensors they view to 16-byte alignment
    line = next(x for x in host.splitlines() if "rt.tensor('kernel'" in x)
    assert "shape=(3, 3, 64, 128)" in line and line.endswith("align=16)")


def test_im2col_tiles_load_ahead_in_chunks_zero_filled_in_the_padding():
    code = _kernel(S=2, D=2, P=2).get_kernel_source().split("// ---- kernel ----")[1]
    steady = code[code.index("// steady state"):]
    gather = next(line for line in steady.splitlines() if "tw::cp_async<16>" in line and "patches" in line)
    # a chunk of 8 channels of one pixel, its row and column checked against the image (H 10, W 12)
    assert gather.count(">= 0)") == 2 and "< 10))" in gather and "< 12))" in gather
    assert steady.index("tw::cp_async<16>((&tw::swizzled<tw::half, 64>(patches") < steady.index("tw::cp_async_commit")


def test_im2col_of_channels_that_do_not_fill_a_chunk_is_the_threads_loads():
    code = _kernel(C=12, block_K=16).get_kernel_source().split("// ---- kernel ----")[1]
    gather = next(line for line in code.splitlines() if "patches" in line and "data[" in line)
    assert "cp_async" not in gather and gather.index("?") < gather.index("data[")


@pytest.mark.parametrize("args, message", [
    ("data, patches, by, k, 3, 1, 1, 1", None),
    ("patches, patches, by, k, 3, 1, 1, 1", "the image must be a 4-D global tensor"),
    ("data, acc, by, k, 3, 1, 1, 1", "the patch tile must be a 2-D shared tile"),
    ("data, patches, by, k, 0, 1, 1, 1", "kernel, stride and dilation must be at least 1"),
    ("data, patches, by, k, 13, 1, 1, 0", "does not fit the 10x10 image"),
])
def test_im2col_checks_its_operands(args, message, tmp_path):
    source = f'''import tileworkbench.language as T

@T.prim_func
def main(data: T.Tensor((2, 10, 10, 64), "float16"), out: T.Tensor((200, 64), "float16")):
    with T.Kernel(4, threads=128) as by:
        patches = T.alloc_shared((64, 32), "float16")
        acc = T.alloc_fragment((64, 32), "float32")
        for k in T.serial(18):
            T.im2col({args})
            T.copy(patches, out[by * 64, (k % 2) * 32])
'''
    if message is None:
        tw.lower(import_kernel_file(tmp_path, source).main, target=SM90)
    else:
        with pytest.raises(tw.CompileError, match=message):
            import_kernel_file(tmp_path, source)


def test_a_view_must_fit_and_match_its_tensor():
    with pytest.raises(tw.CompileError, match="the view has 2048 elements, more than A's 1024"):
        @T.prim_func
        def too_big(A: T.Tensor((32, 32), "float16")):
            with T.Kernel(1, threads=128):
                T.Tensor((64, 32), "float16", A.data)
    with pytest.raises(tw.CompileError, match="the view is float32 but A holds float16"):
        @T.prim_func
        def other_type(A: T.Tensor((32, 32), "float16")):
            with T.Kernel(1, threads=128):
                T.Tensor((1024,), "float32", A.data)
