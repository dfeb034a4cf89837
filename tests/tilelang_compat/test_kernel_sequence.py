"""Several ``with T.Kernel(...)`` blocks and ``T.alloc_global`` workspaces in one prim_func (flash
decoding's split and combine), on the CPU: one kernel per block, each taking the function's
parameters and then the workspaces; the call binds inputs and outputs once; misuse is refused."""

import pytest  # no `from __future__ import annotations`: the kernels' annotations name closure values

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs import flash_decoding


def two_steps(n):
    """A doubles into the workspace; the second kernel reads it back reversed, across blocks, so
    only the kernels' order makes it right."""

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        doubled = T.alloc_global((n,), T.float32)
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                doubled[bx * 128 + i] = A[bx * 128 + i] * 2.0
        with T.Kernel(n // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = doubled[n - 1 - (bx * 128 + i)] + 1.0

    return main


def test_each_kernel_block_is_a_kernel_taking_the_parameters_then_the_workspaces():
    seq = two_steps(1024)
    assert type(seq).__name__ == "KernelSequence"
    assert [p.name for p in seq.params] == ["A", "B"]
    assert [w.name for w in seq.workspaces] == ["doubled"]
    assert [k.name for k in seq.kernels] == ["main_0", "main_1"]
    for kernel in seq.kernels:
        assert [p.name for p in kernel.params] == ["A", "B", "doubled"]
    kernel = tw.compile(seq, out_idx=[1], load_device=False)
    assert [p["name"] for p in kernel.params] == ["A", "B"] and [p["name"] for p in kernel.workspaces] == ["doubled"]
    src = kernel.get_kernel_source()
    assert "kernel 1 of 2: main_0_kernel" in src and "kernel 2 of 2: main_1_kernel" in src
    assert "float* __restrict__ doubled" in src


def test_flash_decoding_compiles_to_a_split_and_a_combine_kernel(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    kernel = flash_decoding.CASES["flash_decoding"]["compile"]()
    assert [k.name for k in kernel.kernels] == ["main_0_kernel", "main_1_kernel"]
    assert [p["name"] for p in kernel.workspaces] == ["glse", "Output_partial"]
    split, combine = (k.get_kernel_source() for k in kernel.kernels)
    assert "wgmma_gemm_rs" in split and "Output_partial[" in split
    assert "wgmma" not in combine.split("// ---- kernel ----")[1]


def test_lowering_a_sequence_says_to_lower_its_kernels():
    with pytest.raises(tw.CompileError, match="runs 2 kernel\\(s\\) one after another"):
        tw.lower(two_steps(256))


def test_alloc_global_inside_a_kernel_is_refused():
    with pytest.raises(tw.CompileError, match="call it before the `with T.Kernel"):
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                w = T.alloc_global((128,), T.float32)
                A[0] = w[0]


def fused_two_steps(A, B, block=64):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    B: T.Tensor((N,), T.float32)
    mid = T.empty((N,), T.float32)
    with T.Kernel(N // block, threads=64) as bx:
        start = bx * block
        for i in T.Parallel(block):
            mid[start + i] = A[start + i] * 2.0
    with T.Kernel(N // block, threads=64) as bx:
        start = (N // block - 1 - bx) * block
        for i in T.Parallel(block):
            B[bx * block + i] = mid[start + i] + 1.0
    return mid


def test_the_t_const_style_runs_its_kernel_blocks_one_after_another():
    """TileLang's fused MoE: a @jit function of the current style with two T.Kernel blocks, the
    second assigning a name the first did (each kernel's names are its own: before, the second's
    `start = ...` assigned the first kernel's variable, undefined in the second's code)."""
    import numpy as np

    a = np.random.default_rng(16).standard_normal(256).astype(np.float32)
    b = np.zeros(256, np.float32)
    mid = tw.jit(target="cpu")(fused_two_steps)(a, b)
    assert np.array_equal(mid, a * 2)
    assert np.array_equal(b, (a * 2).reshape(4, 64)[::-1].ravel() + 1)
    kernel = tw.jit(target="sm_90a")(fused_two_steps).compile(N=256)
    src = kernel.get_kernel_source()
    assert "kernel 1 of 2" in src and "kernel 2 of 2" in src
    from tileworkbench.backend.nvrtc import nvrtc_version

    if nvrtc_version() is not None:  # each kernel's code compiles (a variable of the other's would not)
        assert kernel.kernels[1].record["cubin"] is not None


@pytest.mark.parametrize("shape, match", [((), "T.alloc_global: a buffer needs at least one dimension"),
                                          ((128, 0), "T.alloc_global: dimension 1"),
                                          ((128, 1.5), "T.alloc_global: dimension 1")])
def test_a_workspace_of_a_bad_shape_is_refused_at_its_line(shape, match):
    with pytest.raises(tw.CompileError, match=match) as info:
        @T.prim_func
        def main(A: T.Tensor((128,), T.float32)):
            w = T.alloc_global(shape, T.float32)
            with T.Kernel(1, threads=128):
                A[0] = w[0]
    assert "T.alloc_global(shape, T.float32)" in info.value.loc.text


def test_each_part_of_a_sequence_records_its_own_timeline():
    kernel = tw.compile(two_steps(1024), out_idx=[1], load_device=False, pass_configs={"tw.timeline": True})
    assert all(k.trace.timeline["plan"]["every"] == 1 for k in kernel.kernels)
    with pytest.raises(tw.KernelRuntimeError, match="has not run yet"):
        kernel.timeline(part=1)
    with pytest.raises(tw.KernelRuntimeError, match="part is 0 to 1, not 2"):
        kernel.timeline(part=2)


def test_a_name_assigned_in_two_kernel_blocks_of_a_prim_func_is_each_kernel_s_own():
    import numpy as np

    @T.prim_func
    def main(A: T.Tensor((256,), T.float32), B: T.Tensor((256,), T.float32)):
        mid = T.alloc_global((256,), T.float32)
        with T.Kernel(4, threads=64) as bx:
            start = bx * 64
            for i in T.Parallel(64):
                mid[start + i] = A[start + i] * 3.0
        with T.Kernel(4, threads=64) as bx:
            start = (3 - bx) * 64
            for i in T.Parallel(64):
                B[bx * 64 + i] = mid[start + i]

    names = [[s.var.name for s in _lets(k.body)] for k in main.kernels]
    assert names == [["start"], ["start_1"]]  # a variable of each kernel's own, no assignment to the other's
    a, b = np.random.default_rng(17).standard_normal(256).astype(np.float32), np.zeros(256, np.float32)
    tw.compile(main, target="cpu")(a, b)
    assert np.array_equal(b, (a * 3).reshape(4, 64)[::-1].ravel())


def _lets(stmt):
    from tileworkbench.ir import nodes as ir
    from tileworkbench.ir.visitor import collect

    return collect(stmt, ir.LetStmt)
