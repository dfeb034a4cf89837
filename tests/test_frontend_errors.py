"""User mistakes are CompileErrors that name the problem and point at the kernel line."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench import CompileError

SM90 = {"kind": "cuda", "arch": "sm_90"}


def lower(fn):
    return tw.lower(fn, target=SM90)


def assert_points_at(err: CompileError, snippet: str):
    text = str(err)
    assert __file__ in text.splitlines()[0], text
    assert snippet in text, text
    assert "^" in text.splitlines()[-1], text  # the caret under the offending code


def test_unknown_name():
    with pytest.raises(CompileError, match="unknown name 'undefined_size'") as info:
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                A[0] = undefined_size  # noqa: F821
    assert_points_at(info.value, "A[0] = undefined_size")


def test_wrong_arity():
    with pytest.raises(CompileError, match="wrong arguments to T.copy") as info:
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((128,), "float32")
                T.copy(A, s, 1, 2, 3, 4, 5, 6, 7)
    assert_points_at(info.value, "T.copy(A, s, 1, 2, 3, 4, 5, 6, 7)")


def test_copy_shape_mismatch():
    with pytest.raises(CompileError, match="shape mismatch") as info:
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((64, 64), "float32")
                T.copy(A[0:128, 0:64], s)
    assert_points_at(info.value, "T.copy(A[0:128, 0:64], s)")


def test_unsupported_construct():
    with pytest.raises(CompileError, match="`continue` is not supported"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                for i in T.serial(4):
                    continue


def test_tma_load_needs_a_barrier():
    with pytest.raises(CompileError, match="needs barrier="):
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((128, 64), "float16")
                T.tma_copy(A[0, 0], s)


def test_unknown_copy_instruction():
    with pytest.raises(CompileError, match="unknown prefer_instruction 'fast'"):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((128,), "float32")
                T.copy(A, s, prefer_instruction="fast")


def test_annotation_wins_over_keyword():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "float32")
            T.copy(A, s, prefer_instruction="sync", annotations={"prefer_instruction": "tma"})

    assert "tw::tma_load" in lower(main).kernel_source


def test_gemm_shape_mismatch():
    with pytest.raises(CompileError, match="shapes do not agree"):
        @T.prim_func
        def main(A: T.Tensor((128, 32), "float16")):
            with T.Kernel(1, threads=128):
                a = T.alloc_shared((128, 32), "float16")
                b = T.alloc_shared((64, 128), "float16")
                c = T.alloc_fragment((128, 128), "float32")
                T.gemm(a, b, c)


def test_fragment_outside_parallel_loop_is_rejected_at_its_line():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):  # its elements spread over the threads (written whole, it would
                f[i] = A[i] * 2        # be a per-thread array: localize_read_fragments)
            A[0] = f[3]

    with pytest.raises(CompileError, match="fragment f can only be accessed inside a T.Parallel") as info:
        lower(main)
    assert "A[0] = f[3]" in str(info.value)


def test_too_much_shared_memory():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((256, 256), "float32")
            T.clear(s)

    with pytest.raises(CompileError, match="more than the 232448 bytes of sm_90a"):
        lower(main)


def test_an_operand_that_is_not_a_number_is_named_at_its_line():
    with pytest.raises(CompileError, match="the other operand of `\\+` must be a number, not the string 'x'") as info:
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                A[0] = A[0] + "x"
    assert_points_at(info.value, 'A[0] = A[0] + "x"')


def test_more_user_errors_name_the_problem():
    def expect(message, build):
        with pytest.raises(CompileError, match=message):
            build()

    def bad_threads():
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=2048):
                A[0] = 1.0

    def bad_leader_scope():
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((128, 64), "float16")
                mbar = T.alloc_barrier(128)
                T.tma_copy(A[0, 0], s, barrier=mbar, leader_scope_threads=48)

    def store_with_barrier():
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((128, 64), "float16")
                mbar = T.alloc_barrier(128)
                T.tma_copy(s, A[0, 0], barrier=mbar)

    def bad_swizzle():
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, 1, threads=128):
                T.use_swizzle(panel_size=0)

    def strided_rank_mismatch():
        @T.prim_func
        def main(A: T.StridedTensor((2, 32), (40,), "float32")):
            with T.Kernel(1, threads=32):
                A[0, 0] = 1.0

    expect("threads must be a constant between 1 and 1024", bad_threads)
    expect("leader_scope_threads must be a positive multiple of 32", bad_leader_scope)
    expect("takes no barrier", store_with_barrier)
    expect("panel_size must be a positive constant", bad_swizzle)
    expect("differ in rank", strided_rank_mismatch)


def test_bad_configs_and_targets_are_rejected():
    with pytest.raises(ValueError, match="unknown pass config 'tl.no_such_thing'"):
        tw.PassContext(config={"tl.no_such_thing": True})
    with pytest.raises(ValueError, match="unsupported arch 'sm_42'"):
        tw.Target.of({"kind": "cuda", "arch": "sm_42"})
    with pytest.raises(ValueError, match="unsupported arch 'sm_42'"):
        tw.Target.of("sm_42")
    with pytest.raises(ValueError, match="cannot interpret target 'hopper'; use 'auto', 'cuda', an arch"):
        tw.Target.of("hopper")


def test_targets_spelled_as_strings():
    assert tw.Target.of("sm_90a") == tw.Target.of("cuda -arch=sm_90a") == tw.Target("cuda", "sm_90a")
    assert tw.Target.of("sm_90").arch == "sm_90a"  # wgmma and setmaxnreg need the 'a' features
    assert tw.Target.of("sm_100").arch == "sm_100a"


def test_python_counter_in_a_kernel_loop_is_refused():
    with pytest.raises(CompileError, match="'x' holds the Python value 0") as info:
        @T.prim_func
        def main(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=32):
                x = 0
                for i in T.serial(16):
                    A[x] = i
                    x = x + 1
    assert_points_at(info.value, "x = x + 1")
    assert "x = T.int32(0)" in str(info.value)


def test_a_kernel_variable_reassigned_in_a_loop_keeps_no_range_from_its_first_value():
    @T.prim_func
    def main(A: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=32):
            x = T.int32(0)
            for i in T.serial(16):
                A[x // 4] = i
                x = x + 1

    body = lower(main).device_source.split("---- kernel ----")[1]
    # x is 0 only at first: x // 4 must stay (it was once folded to A[0])
    assert "A[tw::floordiv(x, 4)] = i;" in body and "x = (x + 1);" in body


def test_augmented_assignments_update_kernel_variables_and_buffers():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            x = T.int32(0)
            for i in T.serial(16):
                A[x] += 1.0
                x += 4

    body = lower(main).device_source.split("---- kernel ----")[1]
    assert "A[x] = (A[x] + 1.0f);" in body and "x = (x + 4);" in body


def test_augmented_python_counter_in_a_kernel_loop_is_refused():
    with pytest.raises(CompileError, match="'n' holds the Python value 0"):
        @T.prim_func
        def main(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=32):
                n = 0
                for i in T.serial(16):
                    n += 1
                    A[i] = n


@pytest.mark.parametrize("op", ["T.fill(A, i)", "T.copy(A, s)", "T.cumsum(s)"])
def test_a_tile_operation_inside_a_parallel_loop_is_refused(op, tmp_path):
    """It runs once for the whole block: per element it raced (T.fill(A, i): threads storing 0 and 1
    into one element); the tile-level interpreter failed inside numpy."""
    src = f'''
@T.prim_func
def main(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32):
        s = T.alloc_shared((4,), "float32")
        for i in T.Parallel(2):
            {op}
'''
    _refused_on_both_targets(src, tmp_path / "tile_op_in_parallel.py",
                             r"inside a T.Parallel loop: a tile operation runs once for the whole block", op)


def _refused_on_both_targets(src: str, path, message: str, line_text: str):
    """``main`` defined by ``src`` (written to ``path``, so errors can quote its lines) is refused
    for CUDA and for the CPU interpreter with ``message``, at the line holding ``line_text``."""
    namespace = {"T": T}
    path.write_text(src)
    exec(compile(src, str(path), "exec"), namespace)
    for target in ("cuda", "cpu"):
        with pytest.raises(CompileError, match=message) as info:
            tw.lower(namespace["main"], target=target) if target == "cuda" else tw.compile(namespace["main"], target="cpu")
        assert line_text in info.value.loc.text


@pytest.mark.parametrize("guard, op", [
    ("if tx < 48:", "T.fill(s, 2.0)"),  # part of a warp (tx < 32 is a scope of whole warps)
    ("if A[tx] > 0:", "T.copy(A, s)"),
    ("if tx % 2 == 0:", "for i in T.Parallel(256):\n                    s[i] = 2.0"),
    ("while flag[0] < tx:", "T.fill(s, 2.0)\n                flag[0] += 1"),
], ids=["fill-if-tx", "copy-if-data", "parallel-if-parity", "fill-while"])
def test_a_tile_operation_under_a_condition_the_threads_may_not_share_is_refused(guard, op, tmp_path):
    """Each thread does its share of a tile operation: threads that skip the `if` leave theirs
    undone (the generated CUDA filled 128 of the 256 elements, where the tile-level interpreter
    filled all of them)."""
    src = f'''
@T.prim_func
def main(A: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        s = T.alloc_shared((256,), "float32")
        flag = T.alloc_local((1,), "int32")
        flag[0] = 0
        T.fill(s, 1.0)
        {guard}
            if True:
                {op}
        T.copy(s, A)
'''
    _refused_on_both_targets(src, tmp_path / "tile_op_under_variant_if.py",
                             r"may differ between the block's threads: the block's threads share its work",
                             op.split("\n")[0])


def test_tile_operations_under_conditions_every_thread_shares_are_taken():
    """Block indices, serial loop variables, data at such indices, a fragment element at a shared
    index (TileLang's block-sparse attention: `if block_mask[k] != 0`), and local buffers' own
    copies under any condition."""
    @T.prim_func
    def shared_conditions(A: T.Tensor((4, 64), "float32"), Mask: T.Tensor((4,), "int32"),
                          Out: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            s = T.alloc_shared((64,), "float32")
            mask = T.alloc_fragment((4,), "int32")
            mine = T.alloc_local((4,), "float32")
            T.copy(Mask, mask)
            for k in T.serial(4):
                T.fill(s, -1.0)
                if mask[k] != 0:
                    T.copy(A[k, :], s)
                if tx < 4:
                    T.copy(A[k, 0:4], mine)
                T.copy(s, Out[k, :])

    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 64)).astype(np.float32)
    mask = np.array([1, 0, 1, 1], np.int32)
    out = np.zeros((4, 64), np.float32)
    tw.compile(shared_conditions, target="cpu")(a, mask, out)
    np.testing.assert_array_equal(out, np.where(mask[:, None] != 0, a, -1.0).astype(np.float32))
    tw.lower(shared_conditions, target="cuda")  # and the CUDA lowering takes it too


def test_a_copy_between_overlapping_regions_of_one_tensor_is_refused():
    """The threads copy in no set order, so the result would be undefined (found comparing both
    interpreters on random programs: T.copy(T0, T0[1, 1]))."""
    @T.prim_func
    def shifted(A: T.Tensor((4, 16), "float16")):
        with T.Kernel(1, threads=32):
            T.copy(A[0:2, 0:8], A[1:3, 4:12])

    @T.prim_func
    def apart(A: T.Tensor((4, 16), "float16")):
        with T.Kernel(1, threads=32):
            T.copy(A[0:2, 0:8], A[2:4, 0:8])

    with pytest.raises(CompileError, match="T.copy within A between regions that overlap") as info:
        tw.lower(shifted)
    assert "T.copy(A[0:2, 0:8], A[1:3, 4:12])" in info.value.loc.text
    tw.lower(apart)  # disjoint halves of one tensor are fine


def test_an_overlap_the_block_index_cannot_undo_is_refused_too():
    """The distance between the two starts decides, not the starts: ``A[bx, 0:64]`` onto ``A[bx,
    1:65]`` overlaps in every block, and ``T.copy(T1, T1[bx, 1])`` in a grid of one block (``bx`` is
    0) too, which the random two-interpreter comparison found computing differently on each
    (starts that were not constants were let through), and one whose distance the block index
    changes but within the extents, so every block overlaps. Distances the block index may take
    apart stay allowed."""
    @T.prim_func
    def by_one(A: T.Tensor((4, 128), "float16")):
        with T.Kernel(4, threads=32) as bx:
            T.copy(A[bx, 0:64], A[bx, 1:65])

    @T.prim_func
    def one_block(T1: T.Tensor((1, 64), "float16")):
        with T.Kernel(1, threads=32) as bx:
            T.copy(T1, T1[bx, 1])

    @T.prim_func
    def by_block(A: T.Tensor((4, 128), "float16")):
        with T.Kernel(4, threads=32) as bx:
            T.copy(A[0, 0:64], A[bx, 0:64])  # the same row only in block 0: not known to overlap

    @T.prim_func
    def halves(A: T.Tensor((4, 128), "float16")):
        with T.Kernel(4, threads=32) as bx:
            T.copy(A[bx, 0:64], A[bx, 64:128])

    @T.prim_func
    def every_block(T0: T.Tensor((4, 16), "float16")):
        with T.Kernel(2, threads=32) as bx:
            if 0 < bx:
                T.copy(T0, T0[1, bx])  # a row down and 0 or 1 along: overlapping for either bx (found at random)

    @T.prim_func
    def shifted(T1: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            T.copy(T1, T1[(bx << 0) + 1])  # the range of bx << 0 was unknown: let through (found at random)

    @T.prim_func
    def ored(T1: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            T.copy(T1, T1[1 | bx])  # and of 1 | bx (found at random too)

    @T.prim_func
    def under_if(T2: T.Tensor((64,), "float16")):
        with T.Kernel(2, threads=32) as bx:
            if bx < bx + bx:  # block 1 alone: one element along, overlapping (found at random)
                T.copy(T2, T2[bx])

    for func in (by_one, one_block, every_block, shifted, ored, under_if):
        with pytest.raises(CompileError, match="between regions that overlap"):
            tw.lower(func)
    tw.lower(by_block)
    tw.lower(halves)


def test_a_fill_whose_value_reads_what_it_fills_is_refused():
    """``T.fill(t, t[0] + 1)`` on a thread's own array compiled to a loop that read ``t[0]`` after it
    had overwritten it (4 elements: 2, 3, 3, 3 where the program says 2, 2, 2, 2: the two CPU
    interpreters differed, 3.0 against 2.0, found at random); spread over the threads, which thread
    reads before which writes is not set at all. A value read outside the filled region is fine."""
    @T.prim_func
    def own_array(T1: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            t = T.alloc_local((4,), "float16")
            T.fill(t, 1.0)
            T.fill(t, t[0] + 1.0)
            T1[0] = t[3]

    @T.prim_func
    def whole_tensor(T1: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            T.fill(T1, T.exp(T1[0]))

    @T.prim_func
    def outside(T1: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=32):
            T.fill(T1[1:64], T.exp(T1[0]))

    for func, name in ((own_array, "t"), (whole_tensor, "T1")):
        with pytest.raises(CompileError, match=f"T.fill of {name} with a value that reads {name} where the fill writes"):
            tw.lower(func)
    tw.lower(outside)
