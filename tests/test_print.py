"""``T.print``: an expression printed by each thread that reaches it, a buffer by one thread (a
fragment gathered in shared memory first), a message alone; the same lines from both CPU
interpreters and the generated ``printf`` (format escaped, NVRTC compiles); what it refuses."""

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level
from tileworkbench.jit.lower import lower


@T.prim_func
def printing(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4,), "int32")):
    with T.Kernel(2, threads=64) as bx:
        s = T.alloc_shared((4, 8), "float32")
        f = T.alloc_fragment((4, 8), "float32")
        T.copy(A, s)
        T.copy(A, f)
        T.print(s, msg="tile")
        T.print(f, warp_id=1)
        tx = T.get_thread_binding()
        if tx < 2:
            T.print(tx * 10 + bx, msg='x "%d"')
        if tx == 5:
            T.print(msg="hello")


def expected() -> list[str]:
    lines = []
    for b in range(2):
        lines += [f"tile[{i}, {j}] = {i * 8 + j} (block ({b}) thread 0)" for i in range(4) for j in range(8)]
        lines += [f"f[{i}, {j}] = {i * 8 + j} (block ({b}) thread 32)" for i in range(4) for j in range(8)]
        lines += [f'x "%d" = {t * 10 + b} (block ({b}) thread {t})' for t in range(2)]
        lines.append(f"hello (block ({b}) thread 5)")
    return lines


A = np.arange(32, dtype=np.float32).reshape(4, 8)


def test_both_interpreters_print_the_same_lines(capsys):
    run_at_thread_level(printing, A, np.zeros(4, np.int32))
    by_threads = capsys.readouterr().out.splitlines()
    tw.compile(printing, target="cpu")(A, np.zeros(4, np.int32))
    by_tiles = capsys.readouterr().out.splitlines()
    assert by_threads == expected()
    assert by_tiles == expected()


def test_the_generated_printf():
    source = lower(printing, target="cuda").kernel_source
    calls = [line.strip() for line in source.splitlines() if "printf(" in line]
    assert calls[0].startswith('printf("tile[%lld, %lld] = %g (block (%d) thread %d)\\n", (long long)(')
    assert calls[2].startswith('printf("x \\"%%d\\" = %lld (block (%d) thread %d)\\n"')
    assert source.count("printf(") == 4


def test_the_kernel_compiles_for_sm_90a():
    pytest.importorskip("cuda.bindings")
    from tileworkbench.backend.nvrtc import compile_check, nvrtc_version

    if nvrtc_version() is None:
        pytest.skip("NVRTC cannot be loaded here")
    compile_check(lower(printing, target="cuda").kernel_source, "sm_90a")


def test_what_it_refuses():
    with pytest.raises(CompileError, match="needs something to print"):
        @T.prim_func
        def nothing(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.print()
    with pytest.raises(CompileError, match="thread 128, past the block's 64 threads"):
        @T.prim_func
        def too_far(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=64):
                s = T.alloc_shared((4,), "float32")
                T.print(s, warp_group_id=1)
