"""TileLang's current front door, on the CPU: ``@jit`` on a kernel written with ``T.const`` sizes,
tensors annotated in the body and ``T.empty`` outputs; ``f.compile(...)`` and direct calls (through
the real host launcher on a runtime that launches nothing); the names TileLang programs import."""

from __future__ import annotations

import re

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.jit import kernel as kernel_module

from tests.robustness.harness import DryRuntime, FakeGpuArray

SM90 = "sm_90a"


@tilelang.jit(target=SM90)
def matmul(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        a_tile = T.alloc_shared((block_M, block_K), dtype)
        b_tile = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], a_tile)
            T.copy(B[k * block_K, bx * block_N], b_tile)
            T.gemm(a_tile, b_tile, acc)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


@tilelang.jit(target=SM90)
def add_and_scale(X, Y, block, scale: float = 2.0):
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y: T.Tensor((N,), T.float32)
    S = T.empty((N,), T.float32)
    D = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        for i in T.Parallel(block):
            S[bx * block + i] = X[bx * block + i] + Y[bx * block + i]
            D[bx * block + i] = (X[bx * block + i] - Y[bx * block + i]) * scale
    return D, S


class Tensor(FakeGpuArray):
    """A fake GPU array with the ``dtype`` a torch tensor or CuPy array has."""

    def __init__(self, shape, dtype="float16"):
        super().__init__(shape, {"float16": "<f2", "float32": "<f4"}[dtype], ptr=1 << 24)
        self.dtype = dtype


@pytest.fixture
def dry(monkeypatch):
    """Kernels launch through their host launcher on a DryRuntime; outputs are fake arrays."""
    runtimes = []

    def load(self):
        runtime = DryRuntime(self.record["smem_bytes"])
        runtimes.append(runtime)
        self.bind_runtime(runtime)

    monkeypatch.setattr(kernel_module.Kernel, "_load", load)
    monkeypatch.setattr(kernel_module, "_allocate", lambda param, like, form=None: Tensor(param["shape"], param["dtype"]))
    return runtimes


def test_compile_takes_the_sizes_and_the_parameters():
    kernel = matmul.compile(M=256, N=384, K=512, block_M=128, block_N=128, block_K=32)
    assert [p["name"] for p in kernel.params] == ["A", "B", "C"]
    assert kernel.out_idx == [2]
    assert [p["shape"] for p in kernel.params] == [[256, 512], [512, 384], [256, 384]]
    assert "tw::wgmma_gemm_ss" in kernel.get_kernel_source()


def test_the_same_values_give_the_same_kernel_and_others_another():
    first = matmul.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32)
    assert matmul.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32) is first
    assert matmul.compile(M=512, N=256, K=256, block_M=128, block_N=128, block_K=32) is not first


def test_a_call_with_tensors_compiles_for_their_shapes_and_returns_the_output(dry):
    a, b = Tensor((256, 128)), Tensor((128, 384))
    c = matmul(a, b, block_M=128, block_N=128, block_K=32)
    assert isinstance(c, Tensor) and c.shape == (256, 384) and c.dtype == "float16"
    assert len(dry) == 1 and len(dry[0].launches) == 1
    launches = sum(len(r.launches) for r in dry)
    matmul(Tensor((256, 128)), Tensor((128, 384)), block_M=128, block_N=128, block_K=32)
    assert sum(len(r.launches) for r in dry) == launches + 1  # the same kernel again, no new compile
    assert len(dry) == 1


def test_a_positional_call_made_before_goes_straight_to_its_kernel(dry, monkeypatch):
    from tileworkbench.jit import decorator

    full_path = []
    real = decorator.JitFunction._kernel
    monkeypatch.setattr(decorator.JitFunction, "_kernel", lambda self, *a: full_path.append(1) or real(self, *a))
    a, b = Tensor((256, 128)), Tensor((128, 384))
    first = matmul(a, b, 128, 128, 32)
    assert full_path == [1]
    again = matmul(Tensor((256, 128)), Tensor((128, 384)), 128, 128, 32)  # same shapes, dtypes and values
    assert full_path == [1] and isinstance(again, Tensor) and again.shape == first.shape == (256, 384)
    matmul(Tensor((512, 128)), Tensor((128, 384)), 128, 128, 32)  # another shape: the full path
    with pytest.raises(CompileError, match="not the float 128.0"):  # not served the kernel of 128 (== 128.0)
        matmul(a, b, 128.0, 128, 32)
    matmul(a, b, 128, 128, block_K=32)  # keywords: another form, once
    matmul(Tensor((256, 128)), B=Tensor((128, 384)), block_M=128, block_N=128, block_K=32)
    again = matmul(a, B=b, block_M=128, block_N=128, block_K=32)  # a tensor by keyword too
    assert len(full_path) == 5 and again.shape == (256, 384)
    with pytest.raises(CompileError, match="takes 7 parameters"):  # its checks stay the full path's
        matmul(a, b, 128, 128, 32, T.float16, T.float32, 1)


def test_a_call_with_a_value_that_is_no_key_takes_the_full_path(dry):
    from tileworkbench.jit import decorator

    assert decorator._call_form((Tensor((8,)), [1, 2]), {}) is None
    assert decorator._call_form((Tensor((8,)),), {"block": [1]}) is None
    assert decorator._call_form((Tensor((8,)), 1), {}) != decorator._call_form((Tensor((8,)), True), {})
    assert decorator._call_form((Tensor((8,)),), {"a": 1, "b": 2}) == decorator._call_form((Tensor((8,)),),
                                                                                          {"b": 2, "a": 1})


def test_outputs_come_back_in_the_order_of_the_return(dry):
    d, s = add_and_scale(Tensor((1024,), "float32"), Tensor((1024,), "float32"), block=256)
    kernel = next(iter(add_and_scale.kernels.values()))
    assert [p["name"] for p in kernel.params] == ["X", "Y", "D", "S"]
    assert d.shape == s.shape == (1024,)


def test_a_default_and_a_keyword_value_reach_the_kernel():
    plain = add_and_scale.compile(N=512, block=128)
    doubled = add_and_scale.compile(N=512, block=128, scale=3.0)
    assert "2.0f" in plain.get_kernel_source() and "3.0f" in doubled.get_kernel_source()


def test_a_size_without_a_value_is_named():
    with pytest.raises(CompileError, match=r"dimension 0 is M, which has no value: pass M=\.\.\. to compile\(\)"):
        matmul.compile(N=256, K=256, block_M=128, block_N=128, block_K=32)


def test_a_value_for_nothing_is_named():
    with pytest.raises(CompileError, match="matmul has no parameter or T.const size named 'Q'"):
        matmul.compile(M=256, N=256, K=256, Q=1, block_M=128, block_N=128, block_K=32)


def test_a_tensor_of_the_wrong_rank_is_named(dry):
    with pytest.raises(CompileError, match=r"A is declared with 2 dimension\(s\) but the tensor passed has shape \(256,\)"):
        matmul(Tensor((256,)), Tensor((128, 384)), block_M=128, block_N=128, block_K=32)


def test_compile_with_tensors_compiles_for_their_shapes_and_runs_nothing(dry):
    """TileLang's ``f.compile(a, b, ...)``: the Kernel a call with those tensors would run."""
    kernel = matmul.compile(Tensor((256, 128)), Tensor((128, 384)), block_M=128, block_N=128, block_K=32)
    assert [p["shape"] for p in kernel.params] == [[256, 128], [128, 384], [256, 384]]
    assert kernel is matmul.compile(M=256, N=384, K=128, block_M=128, block_N=128, block_K=32)
    assert dry == []  # nothing launched
    c = kernel(Tensor((256, 128)), Tensor((128, 384)))
    assert c.shape == (256, 384)


def test_compile_with_some_tensors_names_the_others():
    with pytest.raises(CompileError, match="tensors given for A but not for B"):
        matmul.compile(Tensor((256, 128)), K=128, N=384, block_M=128, block_N=128, block_K=32)


def test_an_undeclared_tensor_parameter_is_named():
    @tilelang.jit(target=SM90)
    def forgets(A, B):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        C = T.empty((N,), T.float32)
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                C[i] = A[i]
        return C

    with pytest.raises(CompileError, match="parameter 'B' is a tensor .* but the body never declares it"):
        forgets.compile(N=128)


def test_returning_an_input_is_refused():
    @tilelang.jit(target=SM90)
    def returns_input(A):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        with T.Kernel(1, threads=128):
            for i in T.Parallel(N):
                A[i] = A[i] * 2.0
        return A

    with pytest.raises(CompileError, match="returns the tensors it made with T.empty"):
        returns_input.compile(N=128)


def test_out_idx_with_outputs_of_its_own_is_refused():
    with pytest.raises(CompileError, match="names them itself; out_idx is for builders"):
        tilelang.jit(out_idx=[2])(matmul.fn)


def test_a_builder_under_jit_still_compiles_what_it_returns():
    from tileworkbench.examples import matmul as builder

    jitted = tilelang.jit(out_idx=[2], target=SM90)(builder)
    kernel = jitted(256, 256, 256, 128, 128, 32, "float16", "float16", 2, 128)
    assert kernel.out_idx == [2] and jitted(256, 256, 256, 128, 128, 32, "float16", "float16", 2, 128) is kernel
    assert jitted.compile(256, 256, 256, 128, 128, 32, "float16", "float16", 2, 128) is kernel


def test_the_names_tilelang_programs_import():
    from tileworkbench.autotuner import AutoTuner, autotune
    from tileworkbench.profiler import do_bench
    from tileworkbench.utils.tensor import TensorSupplyType, get_tensor_supply, torch_assert_close

    assert tilelang.cdiv(1000, 128) == 8 and tilelang.cdiv(1024, 128) == 8
    assert tilelang.TensorSupplyType is TensorSupplyType and TensorSupplyType.Normal.name == "Normal"
    assert tilelang.autotune is autotune and callable(do_bench) and callable(get_tensor_supply)
    assert callable(torch_assert_close) and AutoTuner is not None
    assert T.Serial is T.serial and T.dtype("bfloat16") is T.bfloat16
    assert int(T.GemmWarpPolicy.FullRow) == 1
    assert tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER.value == "tl.disable_tma_lower"


def test_tvm_is_refused_with_a_reason():
    with pytest.raises(ImportError, match="tileworkbench.tvm is not supported: tileworkbench has no TVM underneath"):
        from tileworkbench import tvm  # noqa: F401


@pytest.mark.parametrize("name", ["reduce_absmax_all", "comm_reducer", "call_intrin", "tvm_thread_allreduce"])
def test_tilelang_names_we_lack_are_compile_errors_that_say_so(name):
    from tileworkbench.language.unsupported import UNSUPPORTED

    @tilelang.jit(target=SM90)
    def uses(A):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        with T.Kernel(1, threads=128):
            getattr(T, name)
            A[0] = 1.0

    with pytest.raises(CompileError, match=f"T.{name} is not supported by tileworkbench") as info:
        uses.compile(N=128)
    assert "getattr(T, name)" in str(info.value) and UNSUPPORTED[name].split(" (")[0] in str(info.value)


def test_a_tilelang_name_we_lack_written_as_an_attribute_says_why_at_its_line():
    """``T.gemm_sp(...)`` (TileLang's 2:4 sparse GEMM example): the parser's attribute lookup once
    turned such a name into a bare "has no attribute" (``T.sync_grid`` was the case then; it is
    supported now)."""

    @tilelang.jit(target=SM90)
    def uses(A):
        N = T.const("N")
        A: T.Tensor((N,), T.float32)
        with T.Kernel(1, threads=128):
            T.gemm_sp(A, A, A, A)
            A[0] = 1.0

    with pytest.raises(CompileError, match=r"T.gemm_sp is not supported by tileworkbench: .*TileLang 0.1.15 has "
                                           r"it") as info:
        uses.compile(N=128)
    assert "T.gemm_sp(A, A, A, A)" in str(info.value)


def test_an_unknown_name_stays_an_attribute_error():
    assert not hasattr(T, "no_such_thing")


def test_a_layout_annotated_on_a_shared_tile_is_taken_as_the_hint_it_is():
    def gemm(annotate):
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((128, 64), "float16")
                B_s = T.alloc_shared((64, 128), "float16")
                acc = T.alloc_fragment((128, 128), "float32")
                if annotate:
                    T.annotate_layout({A_s: tilelang.layout.make_swizzled_layout(A_s),
                                       B_s: tilelang.layout.make_swizzled_layout(B_s)})
                T.clear(acc)
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.gemm(A_s, B_s, acc)
                T.copy(acc, C)

        return main

    def kernel(func):
        return tilelang.lower(func, target=SM90).device_source.split("// ---- kernel ----")[1]

    assert kernel(gemm(True)) == kernel(gemm(False))  # the compiler swizzles its shared tiles anyway


@pytest.mark.parametrize("scope", ["fragment", "global"])
def test_a_layout_annotated_on_a_fragment_or_tensor_is_refused(scope):
    with pytest.raises(tilelang.CompileError, match=f"T.annotate_layout on {scope} buffer"):
        @T.prim_func
        def main(A: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128):
                frag = T.alloc_fragment((128, 64), "float32")
                T.annotate_layout({frag if scope == "fragment" else A: None})


def test_a_torch_tensors_address_comes_from_data_ptr():
    from tileworkbench.jit import decorator

    class TorchLike:
        __module__ = "torch"

        def data_ptr(self):
            return 0x1000

        @property
        def __cuda_array_interface__(self):
            raise AssertionError("built on each ask: not what the address is read from")

    assert decorator._address(TorchLike()) == 0x1000
    assert decorator._address(Tensor((8,))) == 1 << 24  # others: their __cuda_array_interface__


def test_every_tilelang_name_we_lack_says_so_and_still_reads_as_missing():
    from tileworkbench.tilelang_names import NAMES, VERSION
    from tileworkbench.language.unsupported import UnsupportedName

    assert VERSION == "0.1.15" and len(NAMES) > 700
    lacking = [name for name in sorted(NAMES) if not hasattr(T, name)]  # hasattr: a missing attribute, no raise
    assert 500 < len(lacking) < len(NAMES)
    for name in lacking:
        with pytest.raises(UnsupportedName) as info:
            getattr(T, name)
        assert isinstance(info.value, CompileError) and isinstance(info.value, AttributeError)
        assert f"T.{name} is not supported by tileworkbench: " in str(info.value)
        assert "TileLang 0.1.15 has it" in str(info.value)


@pytest.mark.parametrize("name, why", [
    ("tvm_mma_sync", "a TVM construct"), ("call_packed", "a TVM construct"),
    ("tcgen05_mma", "a Blackwell (sm_100) construct"), ("alloc_tmem", "a Blackwell (sm_100) construct"),
    ("float16x4", "vector dtypes (a dtype with lanes) are not supported yet"),
    ("ptx_ldmatrix", "not supported yet"), ("ieee_add", "not supported yet")])
def test_why_a_tilelang_name_is_missing_follows_from_its_kind(name, why):
    with pytest.raises(CompileError, match=re.escape(f"T.{name} is not supported by tileworkbench: {why}")):
        getattr(T, name)


def test_a_name_neither_has_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="and TileLang 0.1.15's tilelang.language has none either") as info:
        T.no_such_thing_anywhere
    assert not isinstance(info.value, CompileError)
    with pytest.raises(AttributeError):
        T.__wrapped__  # Python's own dunders stay plain


def test_importing_a_name_we_lack_keeps_the_reason():
    # Python words an AttributeError raised under "from m import x" as "cannot import name" alone
    with pytest.raises(ImportError, match=r"cannot import name 'alloc_tmem' from 'tileworkbench.language': .*"
                                          r"T.alloc_tmem is not supported by tileworkbench: a Blackwell"):
        from tileworkbench.language import alloc_tmem  # noqa: F401
    with pytest.raises(ImportError, match="and TileLang 0.1.15's tilelang.language has none either"):
        from tileworkbench.language import no_such_thing_anywhere  # noqa: F401
    from tileworkbench.language import copy, gemm  # what we have still imports

    assert copy is T.copy and gemm is T.gemm

@pytest.mark.parametrize("name, says", [("cache", "disable_cache()"), ("logger", 'logging.getLogger("tileworkbench")'),
                                        ("libinfo", "__version__"), ("runtime_library_dirs", "runtime libraries")])
def test_tilelang_top_level_names_we_lack_are_import_errors_that_say_so(name, says):
    with pytest.raises(ImportError, match=f"tileworkbench.{name} is not supported") as info:
        getattr(tilelang, name)
    assert says in str(info.value)


@pytest.mark.parametrize("statement, says", [
    ("from tileworkbench.utils import deprecated", "tilelang.utils.deprecated has no counterpart"),
    ("from tileworkbench.profiler import bench", "tilelang.profiler.bench has no counterpart"),
    ("from tileworkbench.autotuner import grouped_compile", "tilelang.autotuner.grouped_compile"),
    ("from tileworkbench.jit import par_compile", "tilelang.jit.par_compile has no counterpart"),
    ("from tileworkbench.layout import make_wgmma_swizzled_layout", "tilelang.layout.make_wgmma_swizzled_layout"),
    ("from tileworkbench.utils.tensor import is_float8_dtype", "tilelang.utils.tensor.is_float8_dtype")])
def test_tilelang_module_names_we_lack_are_import_errors_that_name_them(statement, says):
    with pytest.raises(ImportError, match=re.escape(says)) as info:
        exec(statement, {})
    assert "is not supported" in str(info.value)


def test_what_tilelang_offers_in_its_modules_and_we_have_too():
    from tileworkbench.jit import JITKernel, compile as jit_compile, jit as jit_decorator
    from tileworkbench.profiler import get_tensor_supply, torch_assert_close
    from tileworkbench.utils import TensorSupplyType, torch_assert_close as utils_close

    assert jit_decorator is tilelang.jit and jit_compile is tilelang.compile and JITKernel is tilelang.JITKernel
    assert utils_close is torch_assert_close and TensorSupplyType is tilelang.TensorSupplyType
    assert callable(get_tensor_supply)
    with pytest.raises(ImportError, match="cannot import name 'nothing_at_all'"):  # neither has it: Python's own words
        exec("from tileworkbench.utils import nothing_at_all", {})
    from tileworkbench.jit import kernel  # noqa: F401  (submodules still import through the package)


@tilelang.jit
def halves_added(X, block):
    N = T.const("N")
    half = N // 2  # arithmetic on a size before the annotation that gives it (TileLang's split-K)
    X: T.Tensor((N,), "float16")
    Y = T.empty((half,), "float16")
    with T.Kernel(T.ceildiv(half, block), threads=128) as bx:
        for i in T.Parallel(block):
            Y[bx * block + i] = X[bx * block + i] + X[half + bx * block + i]
    return Y


@tilelang.jit
def grouped_rows(X, groups, block):
    rows, width = T.const("rows, width")
    per_group = rows // groups  # before the annotation, which names its shape (TileLang's NSA decode)
    x_shape = [rows, width]
    X: T.Tensor(x_shape, "float16")
    Y = T.empty((per_group, width), "float16")
    with T.Kernel(T.ceildiv(per_group, block), threads=128) as bx:
        for i, j in T.Parallel(block, width):
            Y[bx * block + i, j] = X[(bx * block + i) * groups, j]
    return Y


def test_a_size_from_an_annotation_that_names_its_shape_list(dry):
    kernel = grouped_rows.compile(Tensor((512, 64)), groups=4, block=64)
    assert [p["shape"] for p in kernel.params] == [[512, 64], [128, 64]]
    assert kernel is grouped_rows.compile(rows=512, width=64, groups=4, block=64)


@tilelang.jit
def rows_per_head(X, Y, heads=4):
    rows, width = T.const("rows, width")
    X: T.Tensor[[rows * heads, width], T.float32]  # no size alone here: `rows` comes from Y's annotation
    Y: T.Tensor[[rows, width], T.float32]
    with T.Kernel(rows, threads=128) as bx:
        for j in T.Parallel(width):
            Y[bx, j] = X[bx * heads, j]


def test_a_size_first_named_in_an_expression_takes_a_later_annotations_value(dry):
    kernel = rows_per_head.compile(Tensor((512, 64), "float32"), Tensor((128, 64), "float32"))
    assert [p["shape"] for p in kernel.params] == [[512, 64], [128, 64]]
    assert kernel is rows_per_head.compile(rows=128, width=64)


def test_get_kernel_source_compiles_for_the_arguments_as_compile_does(dry):
    source = halves_added.get_kernel_source(Tensor((1024,)), block=128)
    assert source == halves_added.compile(N=1024, block=128).get_kernel_source() and "__global__" in source
    assert dry == []  # nothing launched


@tilelang.jit
def windowed(X, W, block):
    N, K = T.const("N, K")
    KH, KW = K, K  # one size under two more names (TileLang's convolution)
    OUT = N - K + 1
    X: T.Tensor((N, N), "float32")
    W: T.Tensor((KH, KW), "float32")
    Y = T.empty((OUT, OUT), "float32")
    with T.Kernel(T.ceildiv(OUT, block), threads=128) as bx:
        for i, j in T.Parallel(block, OUT):
            if bx * block + i < OUT:
                Y[bx * block + i, j] = X[bx * block + i, j] * W[KH - 1, KW - 1]
    return Y


def test_arithmetic_on_a_size_before_its_annotation_uses_the_tensors_value(dry):
    kernel = halves_added.compile(Tensor((1024,)), block=128)
    assert [p["shape"] for p in kernel.params] == [[1024], [512]]
    assert kernel is halves_added.compile(N=1024, block=128)
    with pytest.raises(CompileError, match="N has no value yet"):
        halves_added.compile(block=128)


def test_a_size_bound_to_more_names_is_one_size(dry):
    kernel = windowed.compile(Tensor((64, 64), "float32"), Tensor((3, 3), "float32"), block=64)
    assert [p["shape"] for p in kernel.params] == [[64, 64], [3, 3], [62, 62]]
    assert "W[8]" in kernel.get_kernel_source()  # W[KH - 1, KW - 1]: the last of 3 x 3


def test_a_size_named_twice_in_one_annotation_takes_one_value(dry):
    """``W: T.Tensor((KH, KW))`` with KH and KW the same size: a 3 x 5 tensor is refused, not
    compiled for a K of 3 in one place and 5 in another."""
    x, w = Tensor((64, 64), "float32"), Tensor((3, 5), "float32")
    with pytest.raises(CompileError, match=r"W has shape \(3, 5\), but its annotation's sizes make it \(3, 3\)"):
        windowed.compile(x, w, block=64)
    with pytest.raises(tilelang.KernelRuntimeError, match=r"W"):
        windowed(x, w, block=64)


def test_dtypes_are_strings_of_their_names_and_t_dtype_reads_other_libraries_types():
    import types

    import numpy as np

    assert isinstance(T.bfloat16, str) and T.bfloat16 == "bfloat16" and str(T.float16) == "float16"
    module = types.SimpleNamespace(bfloat16="torch's bfloat16")
    assert getattr(module, T.bfloat16) == "torch's bfloat16"  # getattr(torch, dtype), as TileLang's examples do
    FakeTorchDtype = type("dtype", (), {"__module__": "torch", "__str__": lambda self: "torch.float16"})
    assert T.dtype(FakeTorchDtype()) is T.float16
    assert T.dtype(np.float32) is T.float32 and T.dtype(np.dtype("int8")) is T.int8
    assert (T.dtype(int), T.dtype(float), T.dtype(bool)) == (T.int32, T.float32, T.bool)
    with pytest.raises(CompileError, match="T.dtype: unknown data type list"):
        T.dtype([1])


def test_a_profiler_runs_its_kernel_as_func(dry):
    kernel = matmul.compile(M=128, N=640, K=96, block_M=128, block_N=128, block_K=32)  # sizes no other test uses
    profiler = kernel.get_profiler()
    assert profiler.func is kernel
    c = profiler.func(Tensor((128, 96)), Tensor((96, 640)))
    assert c.shape == (128, 640) and len(dry) == 1 and len(dry[0].launches) == 1
