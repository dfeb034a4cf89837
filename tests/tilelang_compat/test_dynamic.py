"""``T.dynamic`` sizes (TileLang's dynamic-shape GEMM): one compiled kernel for every size. The
sizes become scalar parameters a call reads from the tensors' shapes; the code keeps partial tiles
inside the tensors at any size (masked loads and stores, 64-bit offsets where the sizes could make
them large) and moves no row with TMA whose stride the sizes decide; what is refused."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.examples.tilelang_programs import dynamic_shape as example

SM90 = {"kind": "cuda", "arch": "sm_90a"}


def kernel_part(src: str) -> str:
    return src.split("// ---- kernel ----")[1]


@pytest.fixture
def no_cache(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")


def test_the_sizes_are_scalar_parameters_read_from_the_tensors(no_cache):
    kernel = example.CASES["gemm_dynamic"]["compile"]()
    assert [p["name"] for p in kernel.params] == ["A", "B", "m", "n", "k", "C"]
    # A's rows, B's columns, A's columns (each taken as it is: divided by 1)
    assert kernel.record["sizes"] == {"m": [0, 0, 1], "n": [1, 1, 1], "k": [0, 1, 1]}
    assert kernel.params[5]["dims"] == ["m", "n"]
    a, b, c = np.zeros((1000, 520), np.float16), np.zeros((520, 300), np.float16), np.zeros((1000, 300), np.float16)
    full, outputs = kernel._with_sizes((a, b, c), None)
    assert full[2:5] == [1000, 300, 520] and outputs[0] is c


def test_one_kernel_serves_every_size(no_cache):
    f = example.matmul_dynamic_mnk
    first = f._kernel(dict(example.CONFIG), {"A": ((1000, 520), "float16"), "B": ((520, 300), "float16")})
    again = f._kernel(dict(example.CONFIG), {"A": ((64, 128), "float16"), "B": ((128, 4096), "float16")})
    assert first is again
    other = f._kernel(dict(example.CONFIG, num_stages=2), {"A": ((64, 128), "float16"), "B": ((128, 64), "float16")})
    assert other is not first  # another configuration is another kernel


def test_partial_tiles_are_masked_at_any_size(no_cache):
    code = kernel_part(example.CASES["gemm_dynamic"]["compile"]().get_kernel_source())
    assert "int m,\n    int n,\n    int k," in code
    assert "(((by * 128) + i0) < m) && (((k_prologue * 32) + i1) < k)" in code  # A's tile, masked
    assert "long long" in code  # offsets like row * k may pass 2^31
    # C's rows are n elements apart, which may be no multiple of 16 bytes: no TMA store, masked stores
    assert "tma_store" not in code and "< n)" in code.split("cp_async_wait")[-1]


def test_a_wrong_call_names_what_it_takes(no_cache):
    kernel = example.CASES["gemm_dynamic"]["compile"]()
    with pytest.raises(KernelRuntimeError, match=r"takes 2 inputs \(A, B\) or all 3 arguments \(A, B, C\); its T.dynamic sizes \(m, n, k\)"):
        kernel._with_sizes((np.zeros((4, 4)),), None)


def test_the_profiler_asks_for_inputs_it_cannot_make(no_cache):
    kernel = example.CASES["gemm_dynamic"]["compile"]()
    with pytest.raises(KernelRuntimeError, match="A has T.dynamic dimensions"):
        kernel.get_profiler().inputs()


def test_a_size_no_input_shows_is_refused():
    @tilelang.jit(target=SM90)
    def orphan(A):
        n = T.dynamic("n")
        m = T.dynamic("m")
        A: T.Tensor((n,), T.float32)
        B = T.empty((m,), T.float32)
        with T.Kernel(1, threads=128):
            B[0] = A[0]
        return B

    with pytest.raises(tilelang.CompileError, match="T.dynamic size m is no dimension of an input tensor"):
        orphan.compile()


def test_a_size_declared_twice_or_inside_the_kernel_is_refused():
    @tilelang.jit(target=SM90)
    def twice(A):
        n = T.dynamic("n, n")
        A: T.Tensor((n,), T.float32)
        with T.Kernel(1, threads=128):
            A[0] = 1.0

    @tilelang.jit(target=SM90)
    def inside(A):
        A: T.Tensor((128,), T.float32)
        with T.Kernel(1, threads=128):
            n = T.dynamic("n")
            A[0] = n

    with pytest.raises(tilelang.CompileError, match="appears twice"):
        twice.compile()
    with pytest.raises(tilelang.CompileError, match="inside the kernel"):
        inside.compile()


def test_t_symbolic_is_the_same():
    assert T.symbolic is T.dynamic


def test_a_classic_kernel_may_shape_its_tensors_by_its_scalar_parameters():
    """Under ``from __future__ import annotations`` (this module's) the annotations are text the
    front end evaluates, after binding the scalar parameters: ``(n, 64)`` names ``n``."""
    @T.prim_func
    def main(A: T.Tensor((n, 64), "float32"), B: T.Tensor((n, 64), "float32"), n: T.int32):  # noqa: F821
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i, j in T.Parallel(128, 64):
                B[bx * 128 + i, j] = A[bx * 128 + i, j] * 2.0

    art = tilelang.lower(main, target=SM90)
    code = kernel_part(art.device_source)
    assert "int n) {" in code and "< n)" in code
    assert "grid = ((n + 128 - 1) // 128, 1, 1)" in art.host_source


def test_sizes_that_are_multiples_of_16_bytes_take_a_form_with_16_byte_copies(no_cache):
    sized = example.CASES["gemm_dynamic"]["compile"]()
    assert sized.multiple == 8  # float16: 8 elements are 16 bytes
    assert "tw::cp_async<16>" not in kernel_part(sized.get_kernel_source())  # any size: element by element
    aligned = sized.aligned()
    assert [p["name"] for p in aligned.params] == ["A", "B", "m_div8", "n_div8", "k_div8", "C"]
    assert aligned.record["sizes"]["k_div8"] == [0, 1, 8]
    code = kernel_part(aligned.get_kernel_source())
    assert "tw::cp_async<16>" in code and "((long long)(k_div8) * 8)" in code
    assert "align=16" in aligned.record["host_source"]  # the launcher checks the tensors' addresses
    a, b = np.zeros((1000, 512), np.float16), np.zeros((512, 256), np.float16)
    full, _ = aligned._with_sizes((a, b, np.zeros((1000, 256), np.float16)), None)
    assert full[2:5] == [125, 32, 64]
    with pytest.raises(KernelRuntimeError, match="compiled for sizes that are multiples of 8"):
        aligned._with_sizes((np.zeros((1001, 512), np.float16), b, np.zeros((1001, 256), np.float16)), None)


def test_a_call_takes_the_aligned_form_where_its_sizes_allow(no_cache):
    from tileworkbench.jit.decorator import SizedKernels

    class Form:  # stands in for a compiled form: says which one a call reached
        _fast = None  # no C launch path

        def __init__(self, name, record):
            self.name, self.record = name, record

        def __call__(self, *args):
            return self.name

        _call = __call__

        def refuse_to(self, dispatch):
            pass

    record = example.CASES["gemm_dynamic"]["compile"]().general.record
    sized = SizedKernels(Form("general", record), lambda m: Form("aligned", record), 8)
    b = np.zeros((512, 256), np.float16)
    assert sized(np.zeros((1000, 512), np.float16), b) == "aligned"
    assert sized(np.zeros((1001, 512), np.float16), b) == "general"
    assert sized(np.zeros((1000, 520), np.float16), np.zeros((520, 300), np.float16)) == "general"


def test_the_general_forms_guarded_copies_unroll_by_four_and_fit_the_registers(no_cache):
    # element by element behind bounds checks, unrolled in full the two 32-iteration copies held
    # 64 loads a stage: 255 registers and 2 KB of spills (resolve_int_arithmetic.GUARDED_UNROLL)
    from tileworkbench.backend.nvrtc import compile_check

    general = example.CASES["gemm_dynamic"]["compile"]().general
    code = kernel_part(general.get_kernel_source())
    assert code.count("#pragma unroll 4\n") == 4  # A's and B's copies, in the prologue and the steady state
    assert "if (((((by * 128) + i0) < m) && (((k_prologue * 32) + i1) < k))) {" in code  # still guarded
    built = compile_check(general.get_kernel_source(), "sm_90a", "gemm_dynamic.cu")
    assert built.spills_bytes == 0 and built.registers < 255
    # the aligned form's copies are 16-byte cp.async moves: unrolled in full as before
    aligned = kernel_part(example.CASES["gemm_dynamic"]["compile"]().aligned().get_kernel_source())
    assert "#pragma unroll 4" not in aligned


def test_loops_whose_guards_simplify_away_or_that_index_thread_arrays_unroll_in_full():
    from tileworkbench.examples import ALL_EXAMPLES

    # elementwise_add's bounds checks are proven true once its threads are placed
    code = kernel_part(tilelang.lower(ALL_EXAMPLES["elementwise_add"](), target="sm_90a").device_source)
    assert "#pragma unroll 4" not in code and "for (int it = 0; it < 32; ++it) {" in code

    @T.prim_func
    def ragged_rows(A: T.Tensor((1000, 64), "float32"), B: T.Tensor((1000, 64), "float32")):
        with T.Kernel(8, threads=128) as bx:
            frag = T.alloc_fragment((128, 64), "float32")
            T.copy(A[bx * 128, 0], frag)  # the last block's rows hang over: guarded loads into registers
            for i, j in T.Parallel(128, 64):
                frag[i, j] = frag[i, j] * 2.0
            T.copy(frag, B[bx * 128, 0])

    code = kernel_part(tilelang.lower(ragged_rows, target="sm_90a").device_source)
    assert "#pragma unroll 4" not in code  # a thread's array indexed by a loop not unrolled would leave registers


def test_a_warp_specialised_configuration_keeps_every_size_in_its_general_form(no_cache):
    """At block_K=64 the loop is warp-specialised, which loads by TMA, and TMA needs 16-byte row
    strides: the form for aligned sizes takes it; the form for any size, whose rows the call's K
    decides, keeps the cp.async pipeline, so it refuses no size (it had taken TMA too, and a call with
    an odd K would have failed at the launch), and compiling it no longer stops in the barrier
    simulation (which could not count the loop's trips: an internal error; it now walks them at a
    size it names)."""
    config = dict(example.CONFIG, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128)
    sized = example.matmul_dynamic_mnk._kernel(config, {"A": ((1000, 520), "float16"), "B": ((520, 300), "float16")})
    general = kernel_part(sized.general.get_kernel_source())
    aligned = kernel_part(sized.aligned().get_kernel_source())
    assert "producer warpgroup" not in general and "tma_load" not in general and "cp_async" in general
    assert "producer warpgroup" in aligned and "tma_load" in aligned
    assert sized.general.record["cubin"] is not None and sized.aligned().record["cubin"] is not None
    assert [f["code"] for f in sized.aligned().trace.findings] == ["simulated_at_size"]


def test_a_warp_specialised_dynamic_loop_is_simulated_at_a_size_and_its_protocol_checked():
    """The aligned form's trip count is set by the call's K: the simulation walks it at K = 1000
    (and says so), so the protocol is checked; dropping the consumer's releases is a deadlock it
    finds, as in a kernel of fixed sizes."""
    from tests.test_warp_specialize import _DropArrives
    from tileworkbench.analysis import simulate
    from tileworkbench.frontend.eager import parse_eager

    config = dict(example.CONFIG, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128)
    parsed = parse_eager(example.matmul_dynamic_mnk.fn, config, {"A": ((1000, 520), "float16"),
                                                                   "B": ((520, 300), "float16")}, size_multiple=8)
    art = tilelang.lower(parsed.func, target=SM90, out_idx=parsed.out_idx)
    sim = simulate(art)
    assert [f["code"] for f in sim.findings] == ["simulated_at_size"]
    assert "(m, n, k) are simulated at 1000" in sim.findings[0]["message"]
    assert sim.iterations == 16  # ceil(1000 / 64)

    broken = simulate(art.func.with_body(_DropArrives().visit(art.func.body)))  # the consumer's releases gone
    assert any(f["code"] == "wait_never_completes" and f["barrier"] == "stage_empty" for f in broken.findings)


def _varlen_rows(heads: int, dim: int, block: int = 32):
    """TileLang's varlen builders' shape: ``total = T.dynamic(...)`` in the builder, before the
    ``@T.prim_func``; its tensors' annotations name it, and so may its body."""
    total = T.dynamic("total_tokens")

    @T.prim_func
    def scale_rows(X: T.Tensor([total, heads, dim], "float32"), W: T.Tensor([heads], "float32"),
                   Count: T.Tensor([1], "int32"), Y: T.Tensor([heads, total, dim], "float32")):
        with T.Kernel(T.ceildiv(total, block), heads, threads=128) as (bx, by):
            for i, j in T.Parallel(block, dim):
                row = bx * block + i
                if row < total:
                    Y[by, row, j] = X[row, by, j] * W[by]
            if bx == 0 and by == 0:
                Count[0] = total

    return scale_rows


@pytest.mark.parametrize("out_idx", [-1, 3], ids=["counted from the end", "counted from the start"])
def test_a_size_declared_outside_the_kernel_is_a_parameter_after_the_tensors(no_cache, out_idx):
    kernel = tilelang.compile(_varlen_rows(4, 64), out_idx=out_idx, target="cpu")
    assert [p.name for p in kernel.params] == ["X", "W", "Count", "Y", "total_tokens"]
    assert kernel.func.attrs["dynamic_sizes"] == {"total_tokens": (0, 0, 1)}
    rng = np.random.default_rng(3)
    w = rng.standard_normal(4).astype(np.float32)
    for total in (70, 129):  # one kernel, two sizes; partial last tiles
        x = rng.standard_normal((total, 4, 64)).astype(np.float32)
        count = np.zeros(1, np.int32)
        y = kernel(x, w, count)
        assert count[0] == total
        np.testing.assert_allclose(y, np.transpose(x, (1, 0, 2)) * w[:, None, None], rtol=1e-6)


def test_a_size_declared_outside_compiles_for_sm_90a(no_cache):
    code = tilelang.lower(_varlen_rows(4, 64), target="sm_90a").kernel_source
    assert "int total_tokens" in kernel_part(code)


def test_a_size_declared_outside_only_inside_an_expression_is_refused():
    total = T.dynamic("total_plus_one")
    with pytest.raises(tilelang.CompileError, match=r"total_plus_one is no whole dimension of a tensor parameter"):
        @T.prim_func
        def shifted(X: T.Tensor([total - 1], "float32")):
            with T.Kernel(1, threads=32):
                X[0] = total


def _split_and_combine(heads: int = 4):
    """TileLang's sparse GQA decoding's shape: a size declared in the builder, two kernels (a split
    writing partial sums into a workspace, a combine reading them) and a workspace of constant shape."""
    seqlen = T.dynamic("max_cache_seqlen")

    @T.prim_func
    def main(K: T.Tensor([seqlen, heads], "float32"), Out: T.Tensor([heads], "float32")):
        partial = T.alloc_global([2, heads], "float32")
        with T.Kernel(2, threads=32) as split:
            acc = T.alloc_fragment([heads], "float32")
            T.clear(acc)
            for s in T.serial(T.ceildiv(seqlen, 2)):
                row = split * T.ceildiv(seqlen, 2) + s
                for h in T.Parallel(heads):
                    if row < seqlen:
                        acc[h] += K[row, h]
            for h in T.Parallel(heads):
                partial[split, h] = acc[h]
        with T.Kernel(1, threads=32):
            for h in T.Parallel(heads):
                Out[h] = partial[0, h] + partial[1, h]

    return main


def test_a_size_declared_outside_reaches_every_kernel_of_a_sequence(no_cache):
    seq = _split_and_combine()
    assert [p.name for p in seq.kernels[1].params] == ["K", "Out", "max_cache_seqlen", "partial"]
    kernel = tilelang.compile(seq, out_idx=-1, target="cpu")
    rng = np.random.default_rng(19)
    for n in (37, 64):
        k = rng.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(kernel(k), k.astype(np.float64).sum(0), rtol=1e-5)
    compiled = tilelang.compile(seq, out_idx=-1, target="sm_90a", load_device=False)
    assert [p["name"] for p in compiled.workspaces] == ["partial"] and compiled.out_idx == [1]
    assert all(k.record["sizes"] == {"max_cache_seqlen": [0, 0, 1]} for k in compiled.kernels)
