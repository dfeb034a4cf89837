"""C launchers for ``T.dynamic`` kernels, one per set of sizes (jit/sized_launch.py), without a GPU:
the call recorder notes what the generated launcher decided, the plan for those sizes is the
static plan's form with the sizes as constants, and a dry C launcher made from it passes the
kernel exactly what the Python launcher passed (pointers, sizes, grid) and hands other sizes back.
The kernel keeps a bounded set of them and makes the last its entry. tests/gpu/test_launch.py runs
them on the H200."""

from __future__ import annotations

import pytest

from tests.robustness.harness import DryRuntime, FakeGpuArray
from tests.test_fastcall import FakeTensor, needs_compiler
from tests import test_fastcall
from tileworkbench.backend import fastcall
from tileworkbench.errors import KernelRuntimeError
from tileworkbench.examples.tilelang_programs import dynamic_shape as example
from tileworkbench.jit import kernel as kernel_mod, sized_launch

mod = test_fastcall.mod  # the built C launch path module


@pytest.fixture
def gemm(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    general = example.CASES["gemm_dynamic"]["compile"]().general  # the Kernel for any sizes
    kernel = kernel_mod.Kernel(general.record, general.out_idx, load_device=False)  # its own: no launchers kept
    kernel.bind_runtime(DryRuntime(kernel.record["smem_bytes"]))
    return kernel


def recorded_call(kernel, m, n, k):
    """The Python launcher's call of (m x k) @ (k x n) through a recorder: (recorder, runtime)."""
    a = FakeGpuArray((m, k), ptr=0x100000)
    b = FakeGpuArray((k, n), ptr=0x200000)
    c = FakeGpuArray((m, n), ptr=0x300000)
    full, _ = kernel._with_sizes((a, b, c), None)
    recorder = sized_launch.CallRecorder(kernel._runtime)
    kernel._launch(recorder, *full, stream=0)
    return recorder, kernel._runtime


def test_the_recorded_call_becomes_a_plan_for_its_sizes(gemm):
    recorder, runtime = recorded_call(gemm, 1000, 300, 520)
    plan, layout, maps = sized_launch.sized_plan(recorder, set(gemm.out_idx))
    assert [p["shape"] for p in plan["params"]] == [[1000, 520], [520, 300], [1000, 300]]
    assert [p["strides"] for p in plan["params"]] == [[520, 1], [300, 1], [300, 1]]
    assert all(p["row_major"] for p in plan["params"]) and plan["outputs"] == [2]
    assert layout == (0, 1, (1000, 4), (300, 4), (520, 4), 2)  # the sizes as 4-byte constants, in place
    assert tuple(plan["grid"]) == tuple(runtime.launches[-1][1]) == (3, 8, 1)  # what the launcher launched
    assert plan["block"] == [128, 1, 1] and plan["smem_bytes"] == gemm.record["smem_bytes"] and maps == []


@needs_compiler
def test_a_launcher_for_the_sizes_passes_what_the_python_launcher_passed(gemm, mod):
    for m, n, k in ((1000, 300, 520), (64, 4096, 128), (1, 1, 1)):
        recorder, runtime = recorded_call(gemm, m, n, k)
        plan, layout, _ = sized_launch.sized_plan(recorder, set(gemm.out_idx))
        half = object()
        specs, _ = fastcall.plan_arguments(plan, [half, half, half], set(plan["outputs"]), [], lambda p, d: None)
        launch = mod.Launcher("k", 0, tuple(plan["grid"]), tuple(plan["block"]), plan["smem_bytes"], 0, specs, (),
                              FakeTensor, lambda: 0, lambda d: 0x5000, KernelRuntimeError, None)
        launch.interleave(layout)
        a = FakeTensor((m, k), dtype=half, ptr=0x100000)
        b = FakeTensor((k, n), dtype=half, ptr=0x200000)
        c = FakeTensor((m, n), dtype=half, ptr=0x300000)
        assert launch(a, b, c) is c
        args, _ = runtime.packed[-1]
        assert launch.last_launch[1] == tuple(int(x) for x in args)  # pointers and sizes, in the kernel's order
        other = FakeTensor((m + 1, k), dtype=half, ptr=0x100000)  # other sizes: the Python launcher's
        assert launch(other, b, FakeTensor((m + 1, n), dtype=half, ptr=0x300000)) is NotImplemented


@needs_compiler
def test_interleave_takes_every_tensor_once_in_order(mod):
    launch = test_fastcall.dry_launcher(mod)
    with pytest.raises(ValueError, match="tensor 1 where tensor 0 comes"):
        launch.interleave((1, 0, 2))
    with pytest.raises(ValueError, match="2 of the 3 tensors"):
        launch.interleave((0, (5, 4), 1))
    with pytest.raises(ValueError, match="does not fit 4 bytes"):
        launch.interleave((0, (1 << 40, 4), 1, 2))
    with pytest.raises(ValueError, match="4 or 8 bytes"):
        launch.interleave((0, (5, 2), 1, 2))
    launch.interleave((0, (-7, 4), 1, (1 << 40, 8), 2))
    a, b, c = (FakeTensor((128, 64), ptr=0x1000), FakeTensor((128, 64), ptr=0x2000),
               FakeTensor((128, 64), test_fastcall.FLOAT, ptr=0x3000))
    assert launch(a, b, c) is c and launch.last_launch[1] == (0x1000, -7, 0x2000, 1 << 40, 0x3000)


def test_no_plan_where_fixed_sizes_cannot_stand_for_the_call(gemm):
    recorder, _ = recorded_call(gemm, 64, 64, 64)
    recorder.others.append("debug_record")  # a debug record, a timeline buffer: not in a fixed plan
    assert sized_launch.sized_plan(recorder, set(gemm.out_idx)) is None
    recorder, _ = recorded_call(gemm, 64, 64, 64)
    recorder.params[2] = ("scalar", 0.5, "float32")  # a float scalar is a value of the call, not a size
    assert sized_launch.sized_plan(recorder, set(gemm.out_idx)) is None
    assert sized_launch.sized_plan(sized_launch.CallRecorder(None), set()) is None  # nothing launched


def test_the_kernel_keeps_a_launcher_per_set_of_sizes_and_enters_the_last(gemm, monkeypatch):
    made = []

    class Launcher:  # what _sized_c_launcher would make: the C path's stand-in
        def __init__(self, sizes):
            self.sizes = sizes

    def fake_launcher(kernel, runtime, recorder):
        sizes = tuple(value for kind, value, *_ in recorder.params if kind == "scalar")
        made.append(sizes)
        return Launcher(sizes)

    monkeypatch.setattr(kernel_mod, "_sized_wanted", lambda kernel, full, stream: True)
    monkeypatch.setattr(kernel_mod, "_sized_c_launcher", fake_launcher)
    monkeypatch.setattr(sized_launch, "SIZED_KEPT", 2)

    def call(m, n, k):
        gemm._call(FakeGpuArray((m, k)), FakeGpuArray((k, n)), FakeGpuArray((m, n)))

    call(64, 32, 16)  # sizes seen once: no launcher made
    assert made == [] and gemm._fast is None
    call(64, 32, 16)  # the second call of them makes one
    assert made == [(64, 32, 16)] and gemm.__call__.sizes == (64, 32, 16) and gemm._fast is gemm.__call__
    call(64, 32, 16)  # kept: the call is launched by the Python launcher, no new plan
    call(128, 32, 16)
    call(128, 32, 16)
    call(64, 32, 16)
    assert made == [(64, 32, 16), (128, 32, 16)] and gemm.__call__.sizes == (64, 32, 16)
    call(256, 32, 16)
    call(256, 32, 16)  # a third set: the oldest kept is dropped
    assert list(gemm._sized) == [(128, 32, 16), (256, 32, 16)]
    assert len(gemm._runtime.launches) == 8  # every call launched once, by the Python launcher


def test_sizes_whose_every_call_differs_make_no_launcher():
    called = {}
    assert [sized_launch.called_before(called, (m, 32, 16)) for m in range(sized_launch.CALLED_KEPT + 8)] == \
        [False] * (sized_launch.CALLED_KEPT + 8)
    assert len(called) == sized_launch.CALLED_KEPT  # the oldest forgotten
    assert sized_launch.called_before(called, (sized_launch.CALLED_KEPT + 7, 32, 16))
    assert not sized_launch.called_before(called, (0, 32, 16))  # forgotten: a first call again


def test_on_unless_switched_off(gemm, monkeypatch):
    monkeypatch.setenv(sized_launch.ENV, "0")
    assert not sized_launch.enabled()
    assert not kernel_mod._sized_wanted(gemm, [FakeGpuArray((4, 4))], None)
    monkeypatch.delenv(sized_launch.ENV, raising=False)
    assert sized_launch.enabled()
    assert not kernel_mod._sized_wanted(gemm, [FakeGpuArray((4, 4)), None, 4, 4, 4, None], None)  # not torch tensors


def test_the_launch_benchmark_times_the_dynamic_gemm_three_ways(tmp_path, monkeypatch):
    from tileworkbench.bench import launch as bench

    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    monkeypatch.delenv(sized_launch.ENV, raising=False)
    rows = bench._dynamic_rows(tmp_path, None, None, None)  # compiled here; called on the GPU only
    assert [name.split("c), ")[1] for name in rows] == ["as called (C per size on)",
                                                       "its form for any sizes (C per size on)", "Python launcher"]
    monkeypatch.setenv(sized_launch.ENV, "0")
    assert [name.split("c), ")[1] for name in bench._dynamic_rows(tmp_path, None, None, None)][:2] == [
        "as called (C per size off)", "its form for any sizes (C per size off)"]


def test_after_an_aligned_call_the_next_goes_straight_to_its_c_launcher(monkeypatch):
    """``SizedKernels`` (the form for any sizes and the one for aligned sizes, as users call a T.dynamic
    kernel): after a call the aligned form took, a call is its C launcher for those sizes (no
    Python dispatch in front), and what that launcher refuses comes back to the dispatcher."""
    from tileworkbench.jit.decorator import SizedKernels

    monkeypatch.setenv("TILEWORKBENCH_DISABLE_CACHE", "1")
    compiled = example.CASES["gemm_dynamic"]["compile"]()
    forms = {}
    for name, form in (("general", compiled.general), ("aligned", compiled.aligned())):
        forms[name] = kernel_mod.Kernel(form.record, form.out_idx, load_device=False)
        forms[name].bind_runtime(DryRuntime(form.record["smem_bytes"]))
    taken = []

    class Launcher:  # the C launcher's stand-in: takes its sizes' calls, hands back the rest
        def __init__(self, form, sizes):
            self.form, self.shapes, self.fallback = form, sizes, None

        def __call__(self, a, b, c):
            if (a.shape, b.shape) != self.shapes:
                return self.fallback(a, b, c)
            taken.append((self.form, a.shape))
            return c

    monkeypatch.setattr(kernel_mod, "_sized_wanted", lambda kernel, full, stream: True)
    monkeypatch.setattr(kernel_mod, "_sized_c_launcher", lambda kernel, runtime, recorder: Launcher(
        "aligned" if kernel is forms["aligned"] else "general",
        tuple(tuple(recorder.params[i][1]["shape"]) for i in (0, 1))))
    sized = SizedKernels(forms["general"], lambda multiple: forms["aligned"], 8)
    assert sized.__call__ == sized._dispatch  # nothing taken yet

    def call(m, n, k):
        return sized(FakeGpuArray((m, k)), FakeGpuArray((k, n)), FakeGpuArray((m, n)))

    call(64, 32, 16)  # aligned: the aligned form's Python launcher (sizes seen once: no launcher yet)
    assert sized.__call__ == sized._dispatch and forms["aligned"]._fast is None
    call(64, 32, 16)  # again: the Python launcher, which now leaves its C launcher
    assert sized.__call__ is forms["aligned"]._fast and forms["aligned"]._fast.fallback == sized._dispatch
    assert len(forms["aligned"]._runtime.launches) == 2 and taken == []
    call(64, 32, 16)
    assert taken == [("aligned", (64, 16))]  # straight to the C launcher
    call(1001, 32, 16)  # refused by it (other sizes, not multiples of 8): the dispatcher, the general form
    assert len(forms["general"]._runtime.launches) == 1 and sized.__call__ == sized._dispatch
    for _ in range(3):  # aligned again, other sizes: a launcher for them at their second call
        call(128, 32, 16)
    assert taken[-1] == ("aligned", (128, 16)) and len(forms["aligned"]._runtime.launches) == 4

