"""The silent miscompiles found so far (issue 15's three, then those found porting TileLang's programs), on the generated code (their GPU tests against float64
are tests/gpu/test_correctness_fixes_gpu.py): a slice whose extent is known only at run time, two
gemm forms on one accumulator (and a gemm into part of one), and offsets past 2^31 elements."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.edge_cases import (big_tensor_copy, long_vector_add, masked_block_gemm, masked_tma_copy,
                                                mixed_gemm_forms, overhanging_tiles, run_time_extent_copy, triangular_tma_copy,
                                                two_gemm_forms)

SM90 = "sm_90a"


def kernel_part(artifact) -> str:
    return artifact.device_source.split("// ---- kernel ----")[1]


def test_a_run_time_extent_copies_exactly_its_elements():
    code = kernel_part(tw.lower(run_time_extent_copy(), target=SM90))
    # The copy loops over the largest extent (bx = 7: 120 elements) and stops at this block's own.
    assert "if ((flat_1 < 120)) {" in code
    assert "if ((i0_1 < ((bx * 16) + 8))) {" in code
    # Past the extent nothing is written: the only store of the copy is the element copy itself.
    copy_part = code.split("if ((i0_1 < ((bx * 16) + 8))) {")[1].split("}")[0]
    assert copy_part.strip() == "s[i0_1] = A[((bx * 128) + i0_1)];"


def test_a_run_time_extent_against_a_fixed_one_is_refused():
    with pytest.raises(tw.CompileError, match="the A region's extent bx is known only when the kernel runs, but "
                                              "the s region is 128"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
            with T.Kernel(4, threads=128) as bx:
                s = T.alloc_shared((128,), "float32")
                T.copy(A[0:bx], s)
                T.copy(s, B)


def test_each_gemm_keeps_its_own_form_on_a_shared_accumulator():
    code = kernel_part(tw.lower(two_gemm_forms(), target=SM90))
    calls = [line.strip() for line in code.splitlines() if "wgmma_gemm_ss<" in line]
    assert len(calls) == 2
    assert "false, tw_wgmma_m64n128k16_f16_kn>" in calls[0] and "(b, 0)" in calls[0]  # B stored K x N
    assert "true, tw_wgmma_m64n128k16_f16_kk>" in calls[1] and "(bt, 0)" in calls[1]  # B stored N x K


def test_an_accumulator_fed_by_wgmma_and_mma_sync_gemms_takes_mma_sync_for_both():
    """The gemm with K = 48 (rows of 96 bytes: no swizzle wgmma reads) takes mma.sync, whose
    accumulator layout differs from wgmma's: both gemms of that accumulator take mma.sync, rather
    than one of them using the other's layout."""
    code = kernel_part(tw.lower(mixed_gemm_forms(), target=SM90, enable_device_compile=True))
    assert "wgmma_gemm_ss" not in code
    assert code.count("tw::gemm_ss<128, 64, 64,") == 1 and code.count("tw::gemm_ss<128, 64, 48,") == 1


def test_a_gemm_into_part_of_an_accumulator_is_refused():
    with pytest.raises(tw.CompileError, match="T.gemm C must be a whole fragment"):
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((128, 64), "float16")
                b = T.alloc_shared((64, 64), "float16")
                c = T.alloc_fragment((128, 128), "float32")
                T.gemm(a, b, c[0:128, 0:64])


def test_offsets_past_2_to_the_31_are_64_bit():
    # the threads' copy in and out (TMA lowering off: by default the copy out is a TMA store,
    # whose coordinates are per dimension and stay 32-bit)
    threads_only = {"tl.disable_tma_lower": True}
    code = kernel_part(tw.lower(big_tensor_copy(65536), target=SM90, pass_configs=threads_only))
    assert "(&A[(((((long long)(by) * 8388608) + (i0 * 65536)) + (bx * 128)) + (i1 * 8))])" in code
    assert "(&B[(((((long long)(by) * 8388608) + (i0_1 * 65536)) + (bx * 128)) + (i1_1 * 8))])" in code
    by_tma = kernel_part(tw.lower(big_tensor_copy(65536), target=SM90))
    assert "(&A[(((((long long)(by) * 8388608)" in by_tma and "tw::tma_store(B_desc, (&s[0]), (bx * 128), (by * 128));" in by_tma
    small = kernel_part(tw.lower(big_tensor_copy(4096), target=SM90))
    assert "long long" not in small and "(&A[((((by * 524288) + (i0 * 4096))" in small


def test_a_long_vector_guard_and_index_are_64_bit():
    code = kernel_part(tw.lower(long_vector_add(2**31 + 1000), target=SM90))
    assert "((long long)(bx) * 1024)" in code and "2147484648LL" in code
    assert "long long" not in kernel_part(tw.lower(long_vector_add(2**20), target=SM90))


def test_a_wide_tensor_indexed_by_a_parameter_is_64_bit():
    """A kernel parameter's range is unknown: inside a wide tensor's offset its arithmetic is 64-bit."""
    @T.prim_func
    def main(X: T.Tensor((2**31 + 8,), "float16"), Y: T.Tensor((64,), "float16"), n: T.int32, m: T.int32):
        with T.Kernel(1, threads=1):
            X[n * 2 + m] = 1.0
            Y[n * 2 + m] = 1.0

    code = kernel_part(tw.lower(main, target=SM90, enable_device_compile=True))
    assert "X[(((long long)(n) * 2) + m)] =" in code
    assert "Y[((n * 2) + m)] =" in code  # a small tensor's in-bounds offsets fit an int


def test_a_masked_tiles_copies_and_gemm_have_a_barrier_between_them():
    code = kernel_part(tw.lower(masked_block_gemm(), target=SM90))
    masked = code.split("if ((mask[")[1]
    # Every thread's part of both tiles is written before the gemm reads the whole tiles.
    assert masked.index("B_s") < masked.index("__syncthreads();") < masked.index("tw::wgmma_gemm_ss<")


@pytest.mark.parametrize("program", [masked_tma_copy, triangular_tma_copy])
def test_a_synchronous_tma_copy_not_run_every_iteration_waits_on_a_counted_phase(program):
    code = kernel_part(tw.lower(program(), target=SM90))
    assert "int A_to_s_mbarrier_phase = 0;" in code
    wait = code.index("A_to_s_mbarrier[0].wait(A_to_s_mbarrier_phase);")
    assert code.index("A_to_s_mbarrier_phase = (A_to_s_mbarrier_phase ^ 1);") > wait
    assert "% 2)" not in code  # no phase taken from the iteration index


def test_parallel_accesses_to_global_tensors_stay_inside_them_on_overhanging_tiles():
    code = kernel_part(tw.lower(overhanging_tiles(), target=SM90))
    inside = "((((by * 64) + i) < 1000) && (((bx * 64) + j_1) < 200))"
    assert f"{inside} ? A[" in code and "] : 0.0f)" in code  # what lies outside A reads as zero
    store_c = code.index("C[")
    assert code.rfind("if (", 0, store_c) == code.rfind("if (((((by * 64) + i_1) < 1000) && (((bx * 64) + j_1_1) < 200)))",
                                                         0, store_c)
    store_s = code.index("S[")
    assert code.rfind("if ((((by * 64) + i_2) < 1000)) {", 0, store_s) > store_c  # S's column bx is always inside


def test_parallel_accesses_proven_inside_or_already_guarded_get_no_check():
    from tileworkbench.examples import elementwise_add
    whole = kernel_part(tw.lower(elementwise_add(1024, 1024, 32, 128), target=SM90))
    assert " ? " not in whole and "if (" not in whole  # even the kernel's own check is proven
    ragged = kernel_part(tw.lower(elementwise_add(1000, 1030, 32, 128), target=SM90))
    assert " ? " not in ragged and ragged.count("if (") == 1  # its own check is the one needed


def test_a_parallel_store_at_a_data_dependent_index_is_checked_both_ways():
    @T.prim_func
    def scatter(idx: T.Tensor((128,), "int32"), src: T.Tensor((128,), "float32"), dst: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                dst[idx[i]] = src[i]

    code = kernel_part(tw.lower(scatter, target=SM90))
    assert "if (((idx[i] >= 0) && (idx[i] < 64))) {" in code.replace("tx", "i")


def _scatter_through_an_unchecked_index():
    @T.prim_func
    def scatter(x: T.Tensor((64,), "float32"), idx: T.Tensor((80,), "int32"), start: T.Tensor((1,), "int32"),
                out: T.Tensor((50,), "float32")):
        with T.Kernel(1, threads=64):
            k = start[0]
            for i in T.Parallel(64):
                out[idx[k + i]] = x[i]
    return scatter


@pytest.mark.parametrize("level", ["tile", "thread"])
def test_a_stores_check_reads_its_index_table_only_inside_it(level):
    """``out[idx[k + i]]`` with ``k`` read from a tensor: the store's own check (``idx[k + i]`` inside
    ``out``) must not read ``idx`` past its end to decide; it tests ``k + i`` first and skips the
    store where the index table has no element (the thread-level interpreter reported the read of
    ``idx[80]`` while the check read it unguarded)."""
    from tileworkbench.interpreter.threads import run_at_thread_level

    code = kernel_part(tw.lower(_scatter_through_an_unchecked_index(), target=SM90))
    assert "((((k + i) >= 0) && ((k + i) < 80)) && ((idx[(k + i)] >= 0) && (idx[(k + i)] < 50)))" in code
    rng = np.random.default_rng(5)
    x = rng.standard_normal(64).astype(np.float32)
    idx = (rng.permutation(80) - 10).astype(np.int32)  # some outside out, some negative
    for k in (40, -5):  # k + i runs past idx's end, or below its start
        out = np.zeros(50, np.float32)
        run = run_at_thread_level if level == "thread" else (lambda f, *a: tw.compile(f, target="cpu")(*a))
        run(_scatter_through_an_unchecked_index(), x, idx, np.array([k], np.int32), out)
        want = np.zeros(50, np.float32)
        for i in range(64):
            if 0 <= k + i < 80 and 0 <= idx[k + i] < 50:
                want[idx[k + i]] = x[i]
        np.testing.assert_array_equal(out, want)


def _row_by_index():
    @T.prim_func
    def row_copy(x: T.Tensor((40, 64), "float16"), idx: T.Tensor((8,), "int32"), start: T.Tensor((1,), "int32"),
                 y: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float16")
            k = start[0]
            T.copy(x[idx[k], 0:64], s)
            T.copy(s, y)
    return row_copy


@pytest.mark.parametrize("level", ["tile", "thread"])
def test_a_tile_copied_from_a_row_an_index_table_gives_is_checked_at_both_ends(level):
    """``T.copy(x[idx[k], 0:64], s)``: the row may be negative as well as past the end; the copy's
    check tested only the end, so a negative row read the memory before ``x`` (the thread-level
    interpreter reported it); a row outside reads as zeros at either end now."""
    from tileworkbench.interpreter.threads import run_at_thread_level

    code = kernel_part(tw.lower(_row_by_index(), target=SM90))
    assert ": 0) >= 0) && (" in code  # the guarded row's lower end
    rng = np.random.default_rng(8)
    x = rng.standard_normal((40, 64)).astype(np.float16)
    idx = np.array([3, -5, 39, 40, 0, -1, 7, 12], np.int32)
    for k in range(8):
        y = np.full(64, 9, np.float16)
        run = run_at_thread_level if level == "thread" else (lambda f, *a: tw.compile(f, target="cpu")(*a))
        run(_row_by_index(), x, idx, np.array([k], np.int32), y)
        want = x[idx[k]] if 0 <= idx[k] < 40 else np.zeros(64, np.float16)
        np.testing.assert_array_equal(y, want)


def test_tilelangs_switch_turns_the_parallel_access_guards_off():
    code = kernel_part(tw.lower(overhanging_tiles(), target=SM90,
                                pass_configs={tw.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}))
    assert " ? A[" not in code and "< 1000" not in code


def test_assigning_a_kernel_variable_by_name_stores_into_it():
    # TileLang's `flag = T.alloc_var(T.bool); flag = False` assigns the variable; taken as rebinding
    # the Python name, `if flag:` below was decided while building (always true): a wrong answer.
    @T.prim_func
    def any_positive(X: T.Tensor((64,), "float32"), Y: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            flag = T.alloc_var(T.bool)
            flag = False
            for k in T.serial(64):
                if X[k] > 0:
                    flag = True
            Y[0] = 0
            if flag:
                Y[0] = 1

    code = kernel_part(tw.lower(any_positive, target=SM90))
    assert code.count("flag[0] = ") == 2 and "if (flag[0]) {" in code


def test_a_kernel_variables_name_can_be_given_a_new_variable():
    @T.prim_func
    def two_vars(Y: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32):
            v = T.alloc_var(T.int32)
            v = 3
            Y[0] = v
            v = T.alloc_var(T.float32)  # a new variable under the old name, not a store into the old
            v = 0.5
            Y[1] = v

    code = kernel_part(tw.lower(two_vars, target=SM90))
    assert "int v[1];" in code and "float v_1[1];" in code and "v_1[0] = 0.5f;" in code


def test_a_fill_of_a_global_region_past_the_tensors_end_writes_only_inside_it():
    """``T.fill(T0[5:9], v)`` on 8 elements: the generated code wrote T0[8] (found running random
    grammar programs through both CPU interpreters); the fill now skips what lies past the shape,
    as a copy's stores do."""
    import numpy as np

    from tileworkbench.interpreter.threads import ThreadKernel

    @T.prim_func
    def main(T0: T.Tensor((8,), "float32"), T1: T.Tensor((3, 40), "float32")):
        with T.Kernel(2, threads=128) as bx:
            T.fill(T0[5:9], -2.5)
            T.fill(T1[bx * 2:bx * 2 + 2, 10:50], 1.0)  # block 1's second row and every row's last 10: outside

    art = tw.lower(main)
    assert "< 8" in art.device_source.split("// ---- kernel ----")[1]
    t0, t1 = np.zeros(8, np.float32), np.zeros((3, 40), np.float32)
    ThreadKernel.of(art)(t0, t1)  # a write out of bounds would be an error here
    assert np.array_equal(t0, [0, 0, 0, 0, 0, -2.5, -2.5, -2.5])
    assert (t1[:, 10:] == 1.0).all() and (t1[:, :10] == 0).all()


def test_a_copy_whose_shared_slice_provably_leaves_the_tile_is_refused():
    """``T.copy(s[bx], T0)`` with a 1-element tile and a 1000-element tensor: the threads would read
    past the tile (the thread-level interpreter found it); a slice of fixed extent was not checked."""
    # refused by the front end now, as the kernel is defined (a tile longer than the buffer runs
    # past it wherever it starts)
    with pytest.raises(tw.CompileError, match=r"s\[bx\] stands for a tile as large as the other side \(1000\), "
                                              r"and along dimension 0 that runs to 1000 elements from bx, past its 1"):
        @T.prim_func
        def main(T0: T.Tensor((1000,), "int32")):
            with T.Kernel(8, threads=64) as bx:
                s = T.alloc_shared((1,), "float16")
                T.copy(s[bx], T0)


@pytest.mark.parametrize("extents", [(0,), (2, 0), (0, 4)])
def test_a_parallel_nest_with_no_iteration_runs_nothing_on_either_side(extents):
    """``T.Parallel`` with an extent of 0: the generated code stores nothing (a nest of two stopped
    the compiler with "division by zero: `flat % 0`" and no line), and the CPU interpreter does not
    run the body once either (it wrote a store that names no loop index). Found by the random
    two-interpreter comparison."""
    from tileworkbench.interpreter.threads import ThreadKernel

    if len(extents) == 1:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(extents[0]):
                    A[0] = 5.0
    else:
        @T.prim_func
        def main(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                for i, j in T.Parallel(extents[0], extents[1]):
                    A[0] = 5.0

    artifact = tw.lower(main, target=SM90)
    assert "5.0" not in kernel_part(artifact)
    for run in (tw.compile(main, target="cpu"), ThreadKernel.of(artifact)):
        a = np.arange(4, dtype=np.float32)
        run(a)
        np.testing.assert_array_equal(a, np.arange(4, dtype=np.float32))


def test_a_copy_that_converts_is_no_cp_async_even_when_asked_for():
    """cp.async moves bytes: ``T.copy(float32 tensor, float16 tile, prefer_instruction="cp_async")``
    was a 4-byte cp.async of the float32 bits into a 2-byte slot (misaligned, and no conversion).
    Now the element copy converts it, on the GPU and on both CPU interpreters alike (found at
    random: the thread-level interpreter refused the misaligned access)."""
    from tileworkbench.interpreter.threads import ThreadKernel

    @T.prim_func
    def main(T0: T.Tensor((1,), "float32"), T1: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=32):
            s1 = T.alloc_shared((4,), "float16")
            T.fill(s1, 0)
            T.copy(T0, s1[1:2], prefer_instruction="cp_async")
            T.copy(s1, T1)

    artifact = tw.lower(main, target=SM90)
    assert "cp_async" not in kernel_part(artifact)
    for run in (tw.compile(main, target="cpu"), ThreadKernel.of(artifact)):
        out = np.zeros(4, np.float16)
        run(np.array([1.5], np.float32), out)
        np.testing.assert_array_equal(out, np.array([0, 1.5, 0, 0], np.float16))


def test_a_float32_constant_past_its_range_is_infinity_in_the_cuda():
    """``1e+30 * 1e+30`` (Python folds it to 1e60) in a float32 select was written as the literal
    ``1.0000000000000001e+60f``, which NVRTC rejects ("floating constant is out of range"; the
    random NVRTC property found it). As a float32 the value is infinite, as the CPU interpreter
    computes it; 3.4e38 stays a number."""
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                A[i] = T.if_then_else(i < 2, 1e30 * 1e30, -1e60) + T.if_then_else(i == 3, 3.4e38, 0.0)

    src = tw.lower(main, target="sm_90a").kernel_source
    assert "e+60" not in src and "__int_as_float(0x7f800000)" in src and "__int_as_float(0xff800000)" in src
    assert "3.4e+38f" in src
    if nvrtc_version() is not None:
        compile_check(src, "sm_90a")
    a = np.zeros(4, np.float32)
    with np.errstate(over="ignore"):
        tw.compile(main, target="cpu")(a)
    assert a.tolist() == [np.inf, np.inf, -np.inf, -np.inf]


def test_a_copy_known_to_read_past_a_shared_tile_is_refused():
    """``s1[0, bx - 1]`` in a grid of one block reads index -1 of a 1 x 1 shared tile: the generated
    code read the word before the tile (found by the random interpreters-agree search; the
    thread-level interpreter refused it at run time, the tile-level one did not)."""

    @T.prim_func
    def main(T0: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=32) as (bx,):
            s1 = T.alloc_shared((1, 1), "float16")
            T.fill(s1, 1.0)
            T.copy(s1[0, (bx - 1)], T0)

    with pytest.raises(tw.CompileError, match=r"T.copy reads s1 outside its shape \(1, 1\): along dimension 1 it "
                                              r"starts at bx - 1 \(= -1\)"):
        tw.lower(main, target="sm_90a")
