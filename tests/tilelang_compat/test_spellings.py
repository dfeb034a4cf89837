"""TileLang's other spellings of things this compiler has: ``T.Tensor[(M, N), dtype]`` (a
subscript, in a kernel's signature and in the current style's body, its shape holding
``T.dynamic`` sizes), ``T.fill(s[0], v)`` (one element), TIR's ``T.parallel`` and
``T.thread_binding``, and a Python local with a type hint. Both CPU interpreters against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tilelang
import tileworkbench.language as T

from .interpreters import on_both_interpreters
from .kernel_files import main_with

@T.prim_func
def shifted(A: T.Tensor[(4, 32), T.float32], Count: T.Tensor[(2,), T.int32], B: T.Tensor[(4, 32), T.float32]):
    with T.Kernel(4, threads=32) as bx:
        flags = T.alloc_shared((2,), "int32")
        T.fill(flags[1], bx + 7)  # one element
        T.fill(flags[0], 0)
        for j in T.Parallel(32):
            B[bx, j] = A[bx, j] + flags[1]
        if bx == 3:
            Count[0] = flags[1]
            Count[1] = flags[0]


@on_both_interpreters
def test_a_subscripted_tensor_annotation_and_a_one_element_fill(run):
    a = np.random.default_rng(4).standard_normal((4, 32)).astype(np.float32)
    count, b = np.full(2, -1, np.int32), np.zeros((4, 32), np.float32)
    run(shifted, a, count, b)
    np.testing.assert_array_equal(b, a + np.arange(7, 11, dtype=np.float32)[:, None])
    assert list(count) == [10, 0]


@tilelang.jit
def row_sums(X):
    rows, cols = T.dynamic("rows"), T.const("cols")
    X: T.Tensor[(rows, cols), T.float32]
    S = T.empty((rows,), T.float32)
    with T.Kernel(rows, threads=32) as bx:
        acc = T.alloc_fragment((1, cols), T.float32)
        total = T.alloc_fragment((1,), T.float32)
        T.copy(X[bx, 0], acc)
        T.reduce_sum(acc, total, dim=1)
        for i in T.Parallel(1):
            S[bx + i] = total[i]
    return S


def test_a_subscripted_annotation_in_the_current_style_with_a_dynamic_size():
    kernel = row_sums.compile(cols=64)
    assert [p["name"] for p in kernel.params][:2] == ["X", "rows"] and kernel.record["sizes"] == {"rows": [0, 0, 1]}


@T.prim_func
def tir_spellings(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32), C: T.Tensor((128,), T.int32)):
    """TIR's spellings TileLang's examples use: ``for i in T.parallel(n)`` (block mean pooling) and
    ``tx = T.thread_binding(0, threads, thread="threadIdx.x")`` (logits cleaning)."""
    with T.Kernel(1, threads=128):
        tx = T.thread_binding(0, 128, thread="threadIdx.x")
        for i in T.parallel(128):
            B[i] = A[127 - i] * 2
        C[tx] = tx * 3


@on_both_interpreters
def test_tir_spellings(run):
    a = np.random.default_rng(20).standard_normal(128).astype(np.float32)
    b, c = np.zeros(128, np.float32), np.zeros(128, np.int32)
    run(tir_spellings, a, b, c)
    assert np.array_equal(b, a[::-1] * 2) and np.array_equal(c, np.arange(128) * 3)


def test_a_thread_binding_over_other_threads_than_the_block_s_is_refused(tmp_path):
    with pytest.raises(tilelang.CompileError, match="the block has 128 thread\\(s\\) along threadIdx.x"):
        main_with(tmp_path, 'A: T.Tensor((4,), "float32")', 'tx = T.thread_binding(0, 64, thread="threadIdx.x")\n'
                  '        A[0] = tx')


@tilelang.jit
def annotated_python_local(X, scale_name: str = "double"):
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((N,), T.float32)
    factor: float = 2.0 if scale_name == "double" else 1.0  # a Python value with a type hint
    with T.Kernel(1, threads=32):
        for i in T.Parallel(N):
            Y[i] = X[i] * factor
    return Y


def test_a_python_local_with_a_type_hint_is_a_python_value():
    kernel = annotated_python_local.compile(N=64)
    assert "* 2" in kernel.get_kernel_source().split('extern "C"')[1]


def test_a_named_barrier_for_the_whole_block_is_the_block_barrier_and_one_for_part_of_it_is_refused(tmp_path):
    body = ("s = T.alloc_shared((128,), 'float32')\n        tx = T.get_thread_binding()\n"
            "        s[tx] = A[tx]\n        T.sync_threads({})\n        B[tx] = s[127 - tx]")
    signature = 'A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")'
    folders = {name: tmp_path / name for name in ("named", "plain", "part")}
    for folder in folders.values():
        folder.mkdir()
    named, plain = (main_with(folders[name], signature, body.format(args)) for name, args in
                    (("named", "3, 128"), ("plain", "")))
    a = np.arange(128, dtype=np.float32)
    for kernel in (named, plain):
        b = np.zeros(128, np.float32)
        tilelang.compile(kernel, target="cpu")(a, b)
        assert np.array_equal(b, a[::-1])
    with pytest.raises(tilelang.CompileError, match=r"T.sync_threads\(3, 64\): a named barrier for 64 threads where "
                                                    r"the block's 128 threads run it is not supported"):
        main_with(folders["part"], signature, body.format("3, 64"))


@tilelang.jit
def prefix_sums_from(X, first: int = 2, by_name: bool = True):
    """TileLang 0.1.15 names T.Pipelined's bounds (``start=``, ``stop=``, as DeepSeek's NSA
    backward does); Python's print in the body runs while the kernel is built."""
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty((1,), T.float32)
    print("building for", N, "from", first)
    with T.Kernel(1, threads=32):
        acc = T.alloc_local((1,), T.float32)
        acc[0] = 0
        if by_name:
            for k in T.Pipelined(start=first, stop=N, num_stages=0):
                acc[0] = acc[0] + X[k]
        else:
            for k in T.Pipelined(first, N, num_stages=0):
                acc[0] = acc[0] + X[k]
        Y[0] = acc[0]
    return Y


def test_pipelined_bounds_by_name_and_a_print_while_building(capsys):
    on_cpu = tilelang.jit(target="cpu")(prefix_sums_from.fn)
    named = on_cpu.compile(N=64, first=5)
    assert capsys.readouterr().out == "building for 64 from 5\n"  # once, at the build
    positional = on_cpu.compile(N=64, first=5, by_name=False)
    assert capsys.readouterr().out == "building for 64 from 5\n"
    x = np.random.default_rng(45).standard_normal(64).astype(np.float32)
    for kernel in (named, positional):
        np.testing.assert_allclose(kernel(x), [x[5:].sum()], rtol=1e-5)
    assert capsys.readouterr().out == ""  # nothing when it runs
    body = lambda k: k.get_kernel_source().split('extern "C"')[1]  # noqa: E731
    assert body(prefix_sums_from.compile(N=64, first=5)) == body(prefix_sums_from.compile(N=64, first=5, by_name=False))


def test_pipelined_refuses_annotations_that_are_not_a_dict(tmp_path):
    with pytest.raises(tilelang.CompileError, match="T.Pipelined: annotations must be a dict"):
        main_with(tmp_path, 'A: T.Tensor((4,), "float32")',
                  'for k in T.Pipelined(4, annotations=3):\n            A[k] = 1.0')
