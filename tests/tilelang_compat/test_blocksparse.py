"""Block-sparse GEMM's pipelined loop: the body is one ``if BlockMask[by, bx, k]:`` around the
tiles' copies and the gemm. It is pipelined with the condition kept on each copy (evaluated for
the iteration it loads ahead) and on the gemm; a condition the pipeline cannot evaluate ahead
(one that reads what the kernel writes) leaves the loop serial, and correct."""

from __future__ import annotations

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs.blocksparse_gemm import blocksparse_matmul

SM90 = "sm_90a"


def _steady(src: str) -> str:
    body = src.split("// ---- kernel ----")[1]
    return body[body.index("// steady state"):body.index("tw::store_matrix_x4")]


def test_the_masked_tiles_are_loaded_ahead_and_multiplied_under_their_condition():
    kernel = blocksparse_matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, num_stages=2,
                                        thread_num=128, enable_rasteration=True)
    steady = _steady(kernel.get_kernel_source())
    ahead = "if (BlockMask[((((by * 256) + (bx * 32)) + k) + 1)]) {"  # the next iteration's tile
    assert steady.count(ahead) == 2 and steady.count("tw::cp_async<16>") == 2  # A's and B's copies
    commit, gemm = steady.index("tw::cp_async_commit();"), steady.index("tw::wgmma_gemm_ss<")
    assert steady.index(ahead) < commit < steady.index("tw::cp_async_wait<1>();") < gemm
    # The commit is outside the condition: every iteration commits a group, empty or not.
    assert steady.rfind("if (BlockMask[(((by * 256) + (bx * 32)) + k)]) {", 0, gemm) > commit


def _flagged_gemm():
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             flags: T.Tensor((8,), "int32"), C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(8, num_stages=2):
                if flags[k] != 0:
                    T.copy(A[by * 128, k * 32], A_s)
                    T.copy(B[k * 32, bx * 128], B_s)
                    T.gemm(A_s, B_s, acc)
            flags[0] = 1  # the kernel writes the flags: a condition read ahead could see it
            T.copy(acc, C[by * 128, bx * 128])

    return main


def test_a_condition_on_what_the_kernel_writes_is_not_pipelined():
    art = tw.lower(_flagged_gemm(), target=SM90)
    (record,) = [r for r in art.func.attrs.get("pipelines", [])] or [None]
    assert record is None  # nothing pipelined: the loop runs serially
    src = art.device_source.split("// ---- kernel ----")[1]
    assert "cp_async" not in src and "if ((flags[k] != 0)) {" in src
