"""The CPU interpreter (``compile(..., target="cpu")``): numbers, on the CPU, against float64
numpy references on random inputs. It runs the IR after the tile-level passes, so every GEMM
variant below runs its real pipeline (cp.async groups, TMA loads on versioned barriers, the
producer and consumers of a warp-specialised persistent block side by side), and a wait that can
never complete is an error naming its barrier, slot, parity, iteration and line."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.bench.gemm import candidate_kernels, spec_kernels
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.examples import ALL_EXAMPLES
from tileworkbench.examples import edge_cases
from tileworkbench.interpreter.values import storage_dtype

SHAPES = [(256, 256, 256), (200, 136, 72)]


def _random(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _close(out, ref, dtype):
    # the result is rounded to its type once: half an ulp of the largest value, plus accumulation order
    ulp = {"float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype] * np.abs(ref).max()
    assert np.abs(out.astype(np.float64) - ref).max() <= ulp + 1e-3 * np.abs(ref).max()


def _gemm_cases():
    for M, N, K in SHAPES:
        for dtype in ("float16", "bfloat16"):
            for c in candidate_kernels(M, N, K, dtype):
                yield pytest.param(c, (M, N, K), dtype, id=f"{c.name} {M}x{N}x{K} {dtype}")
        for c in spec_kernels(M, N, K):
            yield pytest.param(c, (M, N, K), "float16", id=f"{c.name} {M}x{N}x{K}")


@pytest.mark.parametrize("candidate, shape, dtype", list(_gemm_cases()))
def test_every_gemm_variant_matches_float64(candidate, shape, dtype):
    M, N, K = shape
    kernel = tw.compile(candidate.build(), out_idx=[2], target="cpu", pass_configs=candidate.pass_configs)
    assert kernel.interpreted
    rng = np.random.default_rng(M + N + K)
    a, b = _random(rng, (M, K), storage_dtype(kernel.params[0].dtype)), _random(rng, (K, N), storage_dtype(kernel.params[1].dtype))
    _close(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64), dtype)


def test_the_examples_match_numpy():
    rng = np.random.default_rng(7)
    add = tw.compile(ALL_EXAMPLES["elementwise_add"](), target="cpu")
    a, b, c = (_random(rng, (1024, 1024), storage_dtype(p.dtype)) for p in add.params)
    add(a, b, c)
    assert np.array_equal(c, (a.astype(np.float32) + b.astype(np.float32)).astype(c.dtype))
    ragged = tw.compile(ALL_EXAMPLES["matmul_bf16_ragged"](), out_idx=[2], target="cpu")
    x, y = _random(rng, (1000, 770), storage_dtype(ragged.params[0].dtype)), _random(rng, (770, 1030), storage_dtype(ragged.params[1].dtype))
    _close(ragged(x, y), x.astype(np.float64) @ y.astype(np.float64), "bfloat16")


def test_a_timeline_kernel_runs_and_says_the_interpreter_records_no_timeline():
    from tileworkbench.examples.gemm import matmul

    rng = np.random.default_rng(3)
    kernel = tw.compile(matmul(256, 256, 256, 128, 128, 64, num_stages=2, threads=128), out_idx=[2], target="cpu",
                        pass_configs={"tw.timeline": True})
    a, b = (_random(rng, (256, 256), np.float16) for _ in range(2))
    _close(kernel(a, b), a.astype(np.float64) @ b.astype(np.float64), "float16")
    with pytest.raises(KernelRuntimeError, match="CPU interpreter, which records no timeline.*GPU"):
        kernel.timeline()


def test_the_interpreter_is_chosen_by_the_environment_and_takes_torch_cpu_tensors(monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    from tileworkbench.examples.tilelang_programs import gemm

    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, 192, dtype=torch.float16)
    c = gemm.matmul(a, b, 128, 64, 32)
    assert isinstance(c, torch.Tensor) and c.shape == (256, 192)
    _close(c.numpy(), a.double().numpy() @ b.double().numpy(), "float16")


def test_warp_specialisation_by_hand_and_dynamic_sizes_run(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    from tileworkbench.examples.tilelang_programs import dynamic_shape, warp_specialize as ws

    rng = np.random.default_rng(3)
    a, b = _random(rng, (256, 256), np.float16), _random(rng, (256, 256), np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for c in (ws.matmul_ws(a, b, 128, 128, 64), ws.matmul_ws(a, b, 128, 128, 64, num_stages=2, producer=1),
              ws.matmul_barrier_pipe(a, b, 128, 128, 64), ws.matmul_split_n(a, b, 128, 128, 64),
              ws.matmul_loops_in_scopes(a, b, 128, 128, 64)):  # the loader's scope runs ahead of the gemm's
        _close(c, ref, "float16")
    x, y = _random(rng, (200, 136), np.float16), _random(rng, (136, 72), np.float16)
    _close(dynamic_shape.matmul_dynamic_mnk(x, y, **dynamic_shape.CONFIG), x.astype(np.float64) @ y.astype(np.float64),
           "float16")


def test_flash_attention_matches_float64(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    from tileworkbench.examples.tilelang_programs import attention

    rng = np.random.default_rng(4)
    q, k, v = (_random(rng, (1, 2, 256, 64), np.float16) for _ in range(3))
    out = attention.flash_attention(1, 2, 256, 64, True)(q, k, v)
    qf, kf, vf = (x.astype(np.float64) for x in (q, k, v))
    s = qf @ kf.transpose(0, 1, 3, 2) / 8.0
    s = np.where(np.tril(np.ones((256, 256), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ vf
    assert np.abs(out.astype(np.float64) - ref).max() < 2e-3


def tile_by_tile(parity=lambda k: k % 2, copy_first=False):
    """Four tiles of A through one shared tile into B: a TMA load, the arrive, the wait on
    ``parity(k)``, the copy out (before the wait with ``copy_first``)."""
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((256, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            bar = T.alloc_barrier(arrive_count=128)
            for k in T.serial(4):
                T.tma_copy(A[k * 64, 0], s, barrier=bar)
                T.barrier_arrive(bar)
                if copy_first:
                    T.copy(s, B[k * 64, 0])  # the data may not be there yet
                T.barrier_wait(bar, parity(k))
                if not copy_first:
                    T.copy(s, B[k * 64, 0])

    return main


def test_a_wait_that_can_never_complete_is_named():
    # the phase after the one this arrive completes
    kernel = tw.compile(tile_by_tile(parity=lambda k: (k + 1) % 2), target="cpu",
                        pass_configs={"tw.barrier_check": "off"})
    a, b = np.ones((256, 64), np.float16), np.zeros((256, 64), np.float16)
    with pytest.raises(KernelRuntimeError, match=r"deadlock in block \(0,\): the wait on bar\[0\] for parity 1 at "
                                                 r"line \d+ \(k=0\) can never complete"):
        kernel(a, b)


def test_wrong_arguments_are_refused():
    kernel = tw.compile(ALL_EXAMPLES["matmul_fp16"](), out_idx=[2], target="cpu")
    with pytest.raises(KernelRuntimeError, match="argument A should have shape"):
        kernel(np.zeros((4, 4), np.float16), np.zeros((1024, 1024), np.float16))
    with pytest.raises(KernelRuntimeError, match=r"argument A should be float16"):
        kernel(np.zeros((1024, 1024), np.float32), np.zeros((1024, 1024), np.float16))


def test_a_read_before_the_tma_load_is_waited_for_is_a_race():
    kernel = tw.compile(tile_by_tile(copy_first=True), target="cpu", pass_configs={"tw.barrier_check": "off"})
    with pytest.raises(KernelRuntimeError, match=r"race: the read of s at line (\d+) comes before the TMA load into "
                                                 r"it at line \d+ is known to have landed: wait on bar\[0\] for its "
                                                 r"phase 0 \(parity 0\) first"):
        kernel(np.ones((256, 64), np.float16), np.zeros((256, 64), np.float16))


def test_the_same_kernel_waiting_first_copies_every_tile():
    a = np.random.default_rng(5).standard_normal((256, 64)).astype(np.float16)
    b = np.zeros((256, 64), np.float16)
    tw.compile(tile_by_tile(), target="cpu")(a, b)
    assert np.array_equal(a, b)


def test_the_interpreter_bench_checks_before_it_times():
    from tileworkbench.bench.interpreter import rows

    found = list(rows(256))
    assert {r["kernel"] for r in found} >= {"matmul_tma_copy s2", "matmul 128x128x64 s4 t256"}
    assert all(r["correct"] and r["seconds"] > 0 for r in found)


def test_an_interpreted_kernel_carries_its_sm90a_trace_labelled_as_the_interpreters():
    from tileworkbench.report.document import trace_document
    from tileworkbench.report.html import render_page

    kernel = tw.compile(ALL_EXAMPLES["matmul_fp16"](), out_idx=[2], target="cpu")
    assert kernel.trace.kernel["interpreted"] is True
    assert "__global__" in kernel.get_kernel_source()
    assert "run by the CPU interpreter, not a GPU" in render_page(trace_document(kernel))


def test_a_loader_that_refills_a_tile_the_gemm_may_still_read_is_a_race():
    """``T.ws``: the loader waits on its own barrier instead of the gemm's release, so nothing
    orders its next TMA load after the gemm's read of the tile."""
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.clear(acc)
            for ko in T.serial(4):
                with T.ws(0):
                    T.barrier_wait(ready, (ko + 1) % 2)  # should be `done`
                    T.tma_copy(A[by * 128, ko * 64], A_s, barrier=ready)
                    T.tma_copy(B[ko * 64, bx * 128], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(1):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, acc)
                    T.barrier_arrive(done)
            with T.ws(1):
                T.copy(acc, C[by * 128, bx * 128])

    kernel = tw.compile(main, target="cpu", pass_configs={"tw.barrier_check": "off"})
    a = np.ones((256, 256), np.float16)
    with pytest.raises(KernelRuntimeError, match=r"race: the TMA load at line \d+ overwrites A_s while the read of "
                                                 r"it at line \d+ by another role may still be running"):
        kernel(a, a, np.zeros((256, 256), np.float16))


def test_jit_keeps_interpreted_and_gpu_kernels_apart(monkeypatch):
    from tileworkbench.examples.tilelang_programs import gemm

    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    cpu = gemm.matmul.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32)
    monkeypatch.delenv("TILEWORKBENCH_INTERPRET")
    gpu = gemm.matmul.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32)
    assert getattr(cpu, "interpreted", False) and not getattr(gpu, "interpreted", False)


def _spec_kernels():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[1] / "spec" / "test_tma_copy.py"
    spec = importlib.util.spec_from_file_location("tw_spec_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("M, N", [(128, 256), (100, 224)])
def test_fp4_tiles_go_through_tma_and_back_bit_for_bit(M, N):
    """The spec's FP4 kernels, which the H200 cannot run (FP4 TMA is sm_100's): packed bytes in,
    the same bytes out (a partial tile stored up to the tensor's edge); an unpacked tile loads."""
    spec = _spec_kernels()
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (M, N // 2), dtype=np.uint8)
    b = np.zeros_like(a)
    tw.compile(spec.fp4_tma_copy_roundtrip(M=M, N=N), target="cpu")(a, b)
    np.testing.assert_array_equal(b, a)
    tw.compile(spec.fp4_tma_copy_unpacked_smem_load(M=M, N=N), target="cpu")(a)
    with pytest.raises(KernelRuntimeError, match=r"argument A should have shape \(128, 128\) \(FP4: two values a "
                                                 r"byte\), got \(128, 256\)"):
        tw.compile(spec.fp4_tma_copy_roundtrip(), target="cpu")(np.zeros((128, 256), np.uint8), b)


def test_fp4_bytes_unpack_to_their_values_low_nibble_first():
    from tileworkbench.interpreter.values import pack_fp4, unpack_fp4

    raw = np.array([[0x71, 0xF0]], np.uint8)  # (0.5, 6.0), (0.0, -6.0)
    values = unpack_fp4(raw)
    np.testing.assert_array_equal(values.astype(np.float32), [[0.5, 6.0, 0.0, -6.0]])
    np.testing.assert_array_equal(pack_fp4(values), raw)


def test_a_padded_strided_tensor_goes_through_tma_and_a_contiguous_one_is_refused():
    """``T.StridedTensor`` rows 40 floats apart, 32 used: a TMA load reads the rows from their real
    stride and a TMA store writes them there, leaving the padding; the wrong strides are refused, as
    the GPU refuses them."""
    load, store = _spec_kernels()._padded_programs()
    rng = np.random.default_rng(6)
    padded = rng.standard_normal((2, 40)).astype(np.float32)
    out = np.zeros((2, 32), np.float32)
    tw.compile(load, target="cpu")(padded[:, :32], out)
    np.testing.assert_array_equal(out, padded[:, :32])
    target = np.full((2, 40), -1.0, np.float32)
    tw.compile(store, target="cpu")(out * 2, target[:, :32])
    np.testing.assert_array_equal(target[:, :32], padded[:, :32] * 2)
    assert (target[:, 32:] == -1.0).all()
    with pytest.raises(KernelRuntimeError, match=r"argument A has strides \(32, 1\) \(elements\), the kernel expects "
                                                 r"\(40, 1\)"):
        tw.compile(load, target="cpu")(np.zeros((2, 32), np.float32), out)
    with pytest.raises(KernelRuntimeError, match=r"argument B has strides \(1, 2\) \(elements\), the kernel expects \(32, 1\)"):
        tw.compile(load, target="cpu")(padded[:, :32], np.zeros((32, 2), np.float32).T)


def _guarded(form):
    """B[i] = A[i] where i < 100 (A has 100 elements, B 128), written as an ``if``, a ``?:`` or an
    ``and``; ``past`` reads one element past A where its guard still holds."""
    @T.prim_func
    def main(A: T.Tensor((100,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                if form == "if":
                    if i < 100:
                        B[i] = A[i]
                elif form == "select":
                    B[i] = T.if_then_else(i < 100, A[i], -1.0)
                elif form == "and":
                    B[i] = T.if_then_else(i < 100 and A[i] > 0, 1.0, 0.0)
                else:
                    if i < 101:
                        B[i] = A[i]

    return main


@pytest.mark.parametrize("form", ["if", "select", "and"])
def test_a_guarded_read_reads_only_where_its_guard_holds(form):
    # the generated C++ reads A only where i < 100 (an if, a ?: and && evaluate one side); the
    # interpreter used to evaluate both sides for every iteration and report a read out of bounds
    a = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    out = np.full(128, 7.0, np.float32)
    tw.compile(_guarded(form), target="cpu")(a, out)
    expected = {"if": np.concatenate([a, np.full(28, 7.0)]), "select": np.concatenate([a, np.full(28, -1.0)]),
                "and": np.concatenate([(a > 0).astype(np.float32), np.zeros(28)])}[form]
    assert np.array_equal(out, expected.astype(np.float32))


def test_a_read_past_the_end_where_its_guard_holds_is_still_an_error():
    unguarded = {tw.PassConfigKey.TL_DISABLE_SAFE_MEMORY_ACCESS: True}  # no guard of the compiler's own
    with pytest.raises(KernelRuntimeError, match=r"reads A out of bounds: index 100 of dimension 0 \(size 100\)"):
        tw.compile(_guarded("past"), target="cpu", pass_configs=unguarded)(np.ones(100, np.float32),
                                                                           np.zeros(128, np.float32))
    out = np.full(128, 7.0, np.float32)
    tw.compile(_guarded("past"), target="cpu")(np.ones(100, np.float32), out)  # guarded: A[100] reads as 0
    assert np.array_equal(out[98:], np.array([1, 1, 0] + [7] * 27, np.float32))


def test_a_division_a_condition_leaves_out_does_not_happen():
    @T.prim_func
    def main(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32"), C: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = T.if_then_else(A[i] != 0, 100 // A[i], -1)
                C[i] = 100 // A[i]

    a = np.arange(128, dtype=np.int32) % 5 - 2
    b, c = np.zeros(128, np.int32), np.zeros(128, np.int32)
    with pytest.raises(KernelRuntimeError, match="integer division by zero"):  # C's, unguarded
        tw.compile(main, target="cpu")(a, b, c)
    assert np.array_equal(b[a != 0], 100 // a[a != 0]) and (b[a == 0] == -1).all()  # B was written first


def test_an_element_every_iteration_names_is_stored_only_where_the_if_holds():
    """Found comparing the two CPU interpreters: under an ``if`` of ``T.Parallel`` iterations that
    holds for none, a store to one fixed element (no loop variable in its index or value) was
    made anyway."""

    @T.prim_func
    def main(A: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(4):
                if i > 5:  # never
                    A[0] = 0.0
                if i == 3:  # one iteration
                    A[1] = 7.0

    a = np.ones(2, np.float32)
    tw.compile(main, target="cpu")(a)
    assert a.tolist() == [1.0, 7.0]


def test_a_copy_between_global_tensors_writes_only_where_both_ends_lie_inside():
    """As the generated code (and TileLang's safe-memory legalisation) does: a global store whose
    value reads outside its tensor does not happen. The interpreter used to store the zeros a tile
    would hold there (found comparing it with the thread-level interpreter on random programs)."""
    from tileworkbench.interpreter.threads import ThreadKernel

    @T.prim_func
    def main(A: T.Tensor((4, 128), "float16"), B: T.Tensor((64, 100), "float16")):
        with T.Kernel(1, threads=128):
            T.copy(A[1, 79], B[10:30, 66:90])  # rows 1..20 of A: only 1..3 exist

    rng = np.random.default_rng(2)
    a, b = _random(rng, (4, 128), np.float16), _random(rng, (64, 100), np.float16)
    want = b.copy()
    want[10:13, 66:90] = a[1:4, 79:103]
    tile_level, thread_level = b.copy(), b.copy()
    tw.compile(main, target="cpu")(a, tile_level)
    ThreadKernel.of(tw.lower(main))(a, thread_level)
    assert np.array_equal(tile_level, want) and np.array_equal(thread_level, want)


def test_a_cast_to_a_narrow_integer_keeps_its_low_bits_and_cp_async_between_global_tensors_is_a_plain_copy():
    """Both found comparing the two interpreters on random grammar programs: C's ``(unsigned char)x``
    wraps (a thread-level scalar the scalarising pass made kept -3 where the array held 253), and
    the generated code copies global to global at once whatever the instruction asked (the tile
    level waited for a cp_async_wait that never came)."""
    from tileworkbench.interpreter.threads import ThreadKernel

    @T.prim_func
    def main(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32"), C: T.Tensor((1,), "float16"),
             D: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=32):
            t = T.alloc_local((1,), "uint8")
            for i in T.serial(4):
                t[0] = A[i]
                t[0] = t[0] * 2
                B[i] = t[0] + 1
            T.copy(C, D, prefer_instruction="cp_async")

    a = np.array([-3, 5, 200, -128], np.int32)
    want = ((a.astype(np.int64) % 256) * 2 % 256 + 1).astype(np.int32)
    c = np.array([1.5], np.float16)
    for run in (tw.compile(main, target="cpu"), ThreadKernel.of(tw.lower(main))):
        b, d = np.zeros(4, np.int32), np.zeros(1, np.float16)
        run(a, b, c, d)
        assert np.array_equal(b, want) and d[0] == 1.5


def test_floats_become_integers_as_the_gpu_converts_them():
    """``cvt.rzi``: towards zero, saturated, NaN to 0 (numpy's cast gives the lowest integer); a
    scalar int32 keeps 32 bits when assigned (found comparing both interpreters on grammar programs)."""
    from tileworkbench.interpreter.threads import run_at_thread_level

    @T.prim_func
    def convert(A: T.Tensor((6,), "float32"), B: T.Tensor((6,), "int32"), D: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(6):
                B[i] = T.Cast("int32", A[i])
            x = T.alloc_var("int32")
            x = 1 << 30
            x = x * 4  # 2**32 wraps to 0 in 32 bits
            D[0] = x

    a = np.array([np.nan, np.inf, -np.inf, 3e9, -2.7, 300.5], np.float32)
    want_b = [0, 2**31 - 1, -(2**31), 2**31 - 1, -2, 300]
    for run in (lambda *x: tw.compile(convert, target="cpu")(*x), lambda *x: run_at_thread_level(convert, *x)):
        b, d = np.zeros(6, np.int32), np.full(1, 7, np.int32)
        run(a, b, d)
        assert b.tolist() == want_b and d.tolist() == [0]



@pytest.mark.parametrize("source", ["float16", "float32", "float64"])
def test_floats_become_integers_saturated_in_both_interpreters(source):
    """A float into any integer type: towards zero, saturated, NaN to 0 (C leaves those undefined and
    the GPU's own answers differ by type; the generated code converts through ``tw::to_integer``;
    the GPU test: tests/gpu/test_math_calls_gpu.py). Found by the interpreters' agreement property:
    float16 -1.5 copied into uint8 gave 255 on the tile level (numpy's cast) and 0 on the thread level."""
    from tileworkbench.interpreter.threads import run_at_thread_level

    convert = edge_cases.float_to_integer_conversions(source)
    a, want = edge_cases.conversion_inputs(source), edge_cases.conversions_expected(source)
    for run in (lambda *x: tw.compile(convert, target="cpu")(*x), lambda *x: run_at_thread_level(convert, *x)):
        outs = {name: np.full(len(values), 7, values.dtype) for name, values in want.items()}
        run(a, *outs.values())
        for name, got in outs.items():
            assert got.tolist() == want[name].tolist(), name


@T.prim_func
def _scaled_copy(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32"), n: T.int32):  # noqa: F821
    with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
        for i in T.Parallel(64):
            if bx * 64 + i < n:
                C[bx * 64 + i] = A[bx * 64 + i] * 3


def test_an_output_left_out_before_a_scalar_keeps_the_scalar_s_value():
    """The outputs a call leaves out take no argument: a scalar after one is the next argument
    (the interpreter paired them by position, lost ``n`` and could not size ``C``)."""
    kernel = tw.compile(_scaled_copy, out_idx=[1], target="cpu")
    a = np.random.default_rng(8).standard_normal(100).astype(np.float32)
    np.testing.assert_array_equal(kernel(a, 100), a * 3)


def _fill_from_a_thread_value(dst_scope: str):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64, 4), "float32")):
        with T.Kernel(1, threads=64) as (bx,):
            tx = T.get_thread_binding()
            v = T.alloc_local((1,), "float32")
            w = T.alloc_local((4,), "float32") if dst_scope == "local" else T.alloc_shared((4,), "float32")
            v[0] = A[tx]
            T.fill(w, v[0])
            for j in T.serial(4):
                B[tx, j] = w[j] * (j + 1)

    return tw.compile(main, target="cpu")


def test_a_fill_of_a_threads_own_array_takes_each_threads_own_value():
    a = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    b = np.zeros((64, 4), np.float32)
    _fill_from_a_thread_value("local")(a, b)  # was a numpy broadcast error from inside the interpreter
    np.testing.assert_array_equal(b, a[:, None] * np.arange(1, 5, dtype=np.float32))


def test_a_fill_of_a_shared_tile_with_values_the_threads_hold_apart_is_named_not_guessed():
    a = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    with pytest.raises(KernelRuntimeError, match="w .shared. with one value for every thread"):
        _fill_from_a_thread_value("shared")(a, np.zeros((64, 4), np.float32))
    same = np.full(64, 2.5, np.float32)  # every thread holds the same value: one fill
    b = np.zeros((64, 4), np.float32)
    _fill_from_a_thread_value("shared")(same, b)
    np.testing.assert_array_equal(b, np.tile(2.5 * np.arange(1, 5, dtype=np.float32), (64, 1)))
