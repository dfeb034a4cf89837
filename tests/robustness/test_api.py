"""Misused API: what is passed to lower/compile/jit, pass configs, targets, and the DSL's functions
used where there is no kernel. Each error points at the user's line that made it."""

import pytest

from .harness import Bad, check_bad, check_unique, ids

KERNEL = '''
@T.prim_func
def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), n: T.int32):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            B[i] = A[i] + 1.0
'''


def call(line, match, id_):
    """A case that calls into the API on one line (marked) after defining ``main``."""
    return Bad(id_, KERNEL + f"\ndef run():\n    {line}  # <-\n", match)


NOT_KERNELS = [
    ("lambda", "tw.lower(lambda A: A, target=SM90)", "a lambda cannot be a kernel"),
    ("class", "tw.lower(type('K', (), {}), target=SM90)", "the class K is not a kernel"),
    ("int", "tw.lower(3, target=SM90)", "expected a kernel .* not the int 3"),
    ("none", "tw.lower(None, target=SM90)", "expected a kernel .* not None"),
    ("string", "tw.lower('main', target=SM90)", "expected a kernel .* not the string 'main'"),
    ("builtin", "tw.lower(len, target=SM90)", "expected a kernel .* not the builtin_function_or_method len"),
    ("compile-lambda", "tw.compile(lambda: 0, target=SM90, load_device=False)", "a lambda cannot be a kernel"),
    ("compile-list", "tw.compile([main], target=SM90, load_device=False)", "not a list of 1"),
]

OUT_IDX = [
    ("string", "'a'", "out_idx names the output parameters .* not 'a'"),
    ("float", "1.5", "out_idx names the output parameters .* not 1.5"),
    ("bool", "True", "out_idx names the output parameters .* not True"),
    ("list-of-str", "['B']", "out_idx names the output parameters"),
    ("nested", "[[1]]", "out_idx names the output parameters"),
    ("dict", "{1: 2}", "out_idx names the output parameters"),
    ("too-big", "3", "out_idx 3 is out of range: main has 3 parameter"),
    ("too-negative", "[-4]", "out_idx -4 is out of range"),
    ("duplicate", "[1, 1]", "out_idx names parameter B twice"),
    ("duplicate-negative", "[1, -2]", "out_idx names parameter B twice"),
    ("scalar", "[2]", "out_idx 2 names the scalar parameter n"),
]

PASS_CONFIGS = [
    ("list", "[1, 2]", "pass_configs must be a dict .* not a list"),
    ("string", "'tl.disable_tma_lower'", "pass_configs must be a dict .* not a str"),
    ("int", "3", "pass_configs must be a dict .* not a int"),
    ("unknown-key", "{'tl.no_such_thing': True}", "unknown pass config 'tl.no_such_thing'"),
    ("key-not-string", "{1: True}", "pass config keys are strings"),
    ("switch-no", "{'tl.disable_warp_specialized': 'no'}", "tl.disable_warp_specialized is a switch: True or False, "
                                                           "not 'no'"),
    ("switch-string-true", "{'tw.disable_wgmma': 'True'}", "is a switch"),
    ("switch-two", "{'tl.disable_tma_lower': 2}", "is a switch"),
    ("switch-none", "{'tw.disable_persistent': None}", "is a switch"),
    ("switch-tile-barriers", "{'tw.ws_tile_barriers': 'per tile'}", "tw.ws_tile_barriers is a switch"),
    ("switch-gemm-overlap", "{'tw.gemm_overlap': 'yes'}", "tw.gemm_overlap is a switch"),
    ("check-mode", "{'tw.barrier_check': 'loud'}", "tw.barrier_check must be 'error', 'warn' or 'off'"),
    ("check-bool", "{'tw.barrier_check': True}", "tw.barrier_check must be 'error', 'warn' or 'off'"),
    ("timeout-string", "{'tw.debug_barrier_timeout': 'soon'}", "is a time limit in seconds"),
    ("timeout-negative", "{'tw.debug_barrier_timeout': -1}", "is a time limit in seconds"),
    ("timeout-true", "{'tw.debug_barrier_timeout': True}", "is a time limit in seconds"),
    ("timeline-string", "{'tw.timeline': 'all'}", "tw.timeline is True .every block records., k .every k-th block, "
                                                   "or tile of a persistent kernel. or False, not 'all'"),
    ("timeline-negative", "{'tw.timeline': -2}", "tw.timeline is True"),
    ("timeline-capacity-zero", "{'tw.timeline': True, 'tw.timeline_capacity': 0}",
     "tw.timeline_capacity is the number of events each recording thread keeps"),
    ("timeline-capacity-float", "{'tw.timeline_capacity': 2.5}", "tw.timeline_capacity is the number of events"),
    ("timeline-with-debug", "{'tw.timeline': True, 'tw.debug_barrier_timeout': 1.0}",
     "tw.timeline and tw.debug_barrier_timeout cannot be combined"),
]

TARGETS = [
    ("word", "'hopper'", "cannot interpret target 'hopper'"),
    ("rocm", "{'kind': 'rocm'}", "unsupported target kind 'rocm'"),
    ("arch", "{'kind': 'cuda', 'arch': 'sm_42'}", "unsupported arch 'sm_42'"),
    ("arch-string", "'sm_42'", "unsupported arch 'sm_42'"),
    ("number", "90", "cannot interpret target 90"),
    ("arch-number", "{'arch': 90}", "unsupported arch 90"),
]

CASES = check_unique(
    [call(line, match, f"not-a-kernel-{name}") for name, line, match in NOT_KERNELS]
    + [call(f"tw.lower(main, target=SM90, out_idx={v})", m, f"lower-out-idx-{name}") for name, v, m in OUT_IDX]
    + [call(f"tw.compile(main, target=SM90, out_idx={v}, load_device=False)", m, f"compile-out-idx-{name}")
       for name, v, m in OUT_IDX]
    + [call(f"tw.lower(main, target=SM90, pass_configs={v})", m, f"pass-configs-{name}") for name, v, m in PASS_CONFIGS]
    + [call(f"tw.PassContext(config={v})", m, f"pass-context-{name}") for name, v, m in PASS_CONFIGS[:4]]
    + [call(f"tw.lower(main, target={v})", m, f"target-{name}") for name, v, m in TARGETS]
    + [
        call("tw.jit(out_idx='x')(lambda: main)()", "out_idx names the output parameters", "jit-out-idx"),
        Bad("dsl-at-module-level", '''
            import tileworkbench.language as T
            s = T.alloc_shared((128,), "float16")  # <-
            ''', "can only be used inside a @T.prim_func kernel"),
        Bad("thread-binding-before-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                tx = T.get_thread_binding()  # <-
                with T.Kernel(1, threads=128):
                    A[tx] = 1.0
            ''', r"T.get_thread_binding\(\) is only known inside `with T.Kernel"),
        Bad("block-binding-before-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                b = T.get_block_binding(0)  # <-
                with T.Kernel(1, threads=128):
                    A[b] = 1.0
            ''', r"T.get_block_binding\(\) is only known inside"),
        Bad("swizzle-before-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                T.use_swizzle(4)  # <-
                with T.Kernel(1, threads=128):
                    A[0] = 1.0
            ''', r"T.use_swizzle is only known inside"),
        Bad("block-binding-out-of-range", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(2, 2, threads=128):
                    b = T.get_block_binding(5)  # <-
                    A[b] = 1.0
            ''', r"T.get_block_binding\(5\): the grid has 2 dimension\(s\)"),
        Bad("block-binding-negative", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(2, threads=128):
                    b = T.get_block_binding(-1)  # <-
                    A[b] = 1.0
            ''', r"T.get_block_binding\(-1\)"),
        Bad("block-binding-string", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(2, threads=128):
                    b = T.get_block_binding("x")  # <-
                    A[b] = 1.0
            ''', "T.get_block_binding: dim must be a number, not the string 'x'"),
        Bad("thread-binding-y", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(2, threads=128):
                    t = T.get_thread_binding(1)  # <-
                    A[t] = 1.0
            ''', r"only threadIdx.x exists; declare threads=\(x, y\) for more"),
        Bad("alloc-before-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                s = T.alloc_shared((128,), "float32")  # <-
                with T.Kernel(1, threads=128):
                    T.copy(A, s)
            ''', "must be inside `with T.Kernel"),
        Bad("store-after-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    A[1] = 2.0
                A[0] = 1.0  # <-
            ''', "must be inside `with T.Kernel"),
        Bad("block-var-after-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(4, threads=128) as bx:
                    A[1] = 2.0
                y = bx + 1  # <-
            ''', "must be inside `with T.Kernel"),
        Bad("copy-after-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    A[1] = 2.0
                T.copy(A, B)  # <-
            ''', "must be inside `with T.Kernel"),
        Bad("if-before-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32"), n: T.int32):
                if n > 3:  # <-
                    A[0] = 1.0
                with T.Kernel(1, threads=128):
                    A[1] = 2.0
            ''', "must be inside `with T.Kernel"),
        Bad("no-kernel", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):  # <-
                x = 1
            ''', r"must contain `with T.Kernel\(...\)`"),
        Bad("nested-kernels", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    A[0] = 1.0
                    with T.Kernel(1, threads=128):  # <-
                        A[1] = 1.0
            ''', r"`with T.Kernel\(...\)` inside a kernel: kernels run one after another"),
        Bad("lowering-a-kernel-sequence", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    A[0] = 1.0
                with T.Kernel(1, threads=128):
                    A[1] = 1.0
            ''', r"main runs 2 kernel\(s\) one after another .* lower each of them"),
        Bad("tir-parallel-from-a-start", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    for i in T.parallel(4, 8):  # <-
                        A[i] = 1.0
            ''', r"a parallel loop from a start other than 0 is not supported"),
        Bad("thread-binding-part-of-the-block", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    tx = T.thread_binding(0, 64, thread="threadIdx.x")  # <-
                    A[tx] = 1.0
            ''', r"the block has 128 thread\(s\) along threadIdx.x"),
        Bad("thread-binding-unknown-axis", '''
            @T.prim_func
            def main(A: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128):
                    tx = T.thread_binding(0, 128, thread="blockIdx.x")  # <-
                    A[tx] = 1.0
            ''', r"thread is one of threadIdx.x, threadIdx.y, threadIdx.z"),
        Bad("builder-size-shaping-a-workspace", '''
            n = T.dynamic("n")

            @T.prim_func
            def main(A: T.Tensor((n,), "float32")):
                w = T.alloc_global((n,), "float32")  # <-
                with T.Kernel(1, threads=128):
                    w[0] = A[0]
                with T.Kernel(1, threads=128):
                    A[0] = w[0]
            ''', r"T.alloc_global: dimension 0 must be a constant integer, not a int32 kernel value \(n\)"),
        Bad("builder-passed-uncalled", '''
            def build(n):
                @T.prim_func
                def main(A: T.Tensor((n,), "float32")):
                    with T.Kernel(1, threads=128):
                        A[0] = 1.0
                return main

            def run():
                tw.lower(build, target=SM90)  # <-
            ''', "build is a builder: it defines the kernel main and returns it. Call it"),
    ]
)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_misused_api_is_a_compile_error_at_the_calling_line(case):
    check_bad(case)
