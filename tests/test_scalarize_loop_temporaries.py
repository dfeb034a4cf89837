"""``scalarize_loop_temporaries``: a thread's array that carries a value only within one loop
iteration becomes a scalar; arrays that carry values across iterations or loops, are addressed, are
accessed outside a loop's straight-line body, at two elements in one iteration, or at an index
whose variable the body re-assigns, stay arrays. (GPU: tests/gpu/test_correctness_fixes_gpu.py.)"""

import re

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.backend import nvrtc
from tileworkbench.examples.edge_cases import loop_temporaries


def kernel_code(program) -> str:
    return tw.lower(program, target="sm_90a").device_source.split("// ---- kernel ----")[1]


def arrays(code: str) -> set:
    return set(re.findall(r"^\s*(?:alignas\(\d+\) )?(?:float|tw::half|int) (\w+)\[\d+\];", code, re.M))


def test_arrays_that_carry_values_only_within_an_iteration_become_scalars():
    code = kernel_code(loop_temporaries())
    assert arrays(code) == {"vals", "offsets"}  # both read in later loops than the one that wrote them
    assert "float partner = __shfl_sync(4294967295, vals[j_1], (tx_1 ^ 1), 32);" in code
    assert "vals[j_1] = (vals[j_1] + partner);" in code
    # the float16 array's rounding stays: the scalar holds the element's value
    assert "float rounded = tw::to_float(tw::from_float<tw::half>((float)((vals[j_2] * 3.0f))));" in code
    assert "Y[(base + j_2)] = (rounded + 1.0f);" in code


@pytest.mark.skipif(nvrtc.nvrtc_version() is None, reason="NVRTC is not installed here")
def test_the_scalarized_kernel_compiles():
    artifact = tw.lower(loop_temporaries(), target="sm_90a", enable_device_compile=True)
    assert artifact.nvrtc.spills_bytes == 0


def _one_loop(body):
    """A kernel whose thread array ``t`` is used as ``body(t, X, Y, j, tx)`` in a loop over j."""

    @T.prim_func
    def main(X: T.Tensor((512,), "float32"), Y: T.Tensor((512,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            t = T.alloc_local((4,), "float32")
            body(t, X, Y, tx)

    return main


@T.macro
def read_before_write(t, X, Y, tx):
    for j in T.serial(4):
        Y[tx * 4 + j] = t[j]  # the previous loop's (here: nobody's) value
        t[j] = X[tx * 4 + j]


@T.macro
def another_element(t, X, Y, tx):
    for j in T.serial(4):
        t[j] = X[tx * 4 + j]
        Y[tx * 4 + j] = t[3 - j]  # written by another iteration


@T.macro
def outside_a_loop(t, X, Y, tx):
    t[0] = 1.0
    for j in T.serial(4):
        t[j] = X[tx * 4 + j] + t[0]
        Y[tx * 4 + j] = t[j]


@T.macro
def across_loops(t, X, Y, tx):
    for j in T.serial(4):
        t[j] = X[tx * 4 + j]
    for j in T.serial(4):
        Y[tx * 4 + j] = t[j]


@T.macro
def in_a_nested_loop(t, X, Y, tx):
    for j in T.serial(4):
        t[j] = X[tx * 4 + j]
        for r in T.serial(2):
            Y[tx * 4 + j] = t[j] * r


@T.macro
def under_a_branch(t, X, Y, tx):
    for j in T.serial(4):
        if X[tx * 4 + j] > 0:
            t[j] = X[tx * 4 + j]
        Y[tx * 4 + j] = t[j]


@T.macro
def addressed(t, X, Y, tx):
    for j in T.vectorized(4):
        t[j] = X[tx * 4 + j]
    for j in T.vectorized(4):
        Y[tx * 4 + j] = t[j]


@T.macro
def reassigned_index(t, X, Y, tx):
    i = T.alloc_var(T.int32)
    for j in T.serial(4):
        i = j
        t[i] = X[tx * 4 + j]
        i = (j + 1) % 4  # t[i] now names another element
        Y[tx * 4 + j] = t[i]


@pytest.mark.parametrize("body", [read_before_write, another_element, outside_a_loop, across_loops, in_a_nested_loop,
                                  under_a_branch, addressed, reassigned_index], ids=lambda f: f.__name__ if hasattr(f, "__name__") else str(f))
def test_other_arrays_stay_arrays(body):
    assert "t" in arrays(kernel_code(_one_loop(body)))


@T.macro
def within_an_iteration(t, X, Y, tx):
    for j in T.serial(4):
        t[j] = X[tx * 4 + j]
        t[j] = t[j] * 2.0  # stored again: assigned
        Y[tx * 4 + j] = t[j]


def test_a_second_store_in_the_iteration_assigns_the_scalar():
    code = kernel_code(_one_loop(within_an_iteration))
    assert "t" not in arrays(code)
    assert "float t = X[((tx_1 * 4) + j)];\n    t = (t * 2.0f);\n    Y[((tx_1 * 4) + j)] = t;" in code


def test_a_register_fragment_a_tensor_core_call_names_stays_an_array():
    from tileworkbench.examples.attention import mha_fwd

    code = kernel_code(mha_fwd(1, 2, 256, 64, False, block_M=128, block_N=64))
    assert "acc_s_cast" in arrays(code) and re.search(r"wgmma_gemm_rs<[^(]*>\(acc_s_cast,", code)


@pytest.mark.parametrize("dtype, want", [("float8_e4m3", 448.0), ("float16", 2000.0)])
def test_arithmetic_in_the_arrays_narrow_type_is_still_rounded(dtype, want):
    """``t[0] = t[0] * 2`` of an FP8 ``t`` is typed FP8 but computed in float32: the array's store
    rounded it (1000 -> 448, the largest e4m3; 448 * 2 -> 448 again), so the scalar's assignment
    rounds too. Found comparing the two CPU interpreters on random programs: the scalar held 896."""
    import numpy as np

    from tileworkbench.interpreter.threads import ThreadKernel

    @T.prim_func
    def main(Out: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            t = T.alloc_local((1,), dtype)
            for i in T.serial(2):
                t[i % 1] = bx + 1000.0
                t[i % 1] = t[i % 1] * 2
                Out[0] = t[i % 1] + 0.0

    artifact = tw.lower(main, target="sm_90a")
    code = artifact.device_source.split("// ---- kernel ----")[1]
    assert "t" not in arrays(code) and "t = (t * 2);" not in code
    out = np.zeros(1, np.float16)
    ThreadKernel.of(artifact)(out)  # the generated code, thread by thread
    assert out[0] == want
    tiles = np.zeros(1, np.float16)
    tw.compile(main, target="cpu")(tiles)  # TileLang's semantics, tile by tile
    assert tiles[0] == want
