"""The C launch path (backend/fastcall.c, issue 18) without a GPU: the module builds, and a dry
launcher (function 0: it keeps each call's stream and parameter values instead of launching)
accepts exactly the tensors the Python launcher's fast branch accepts and hands everything else
back to it (to its fallback, the kernel's Python launcher; NotImplemented where it has none, as
most launchers here). A stand-in tensor type plays torch's part; the GPU tests
(tests/gpu/test_launch.py) run the same against torch and the driver."""

from __future__ import annotations

import inspect
import shutil
import sysconfig
from pathlib import Path

import pytest

from tileworkbench.backend import fastcall
from tileworkbench.errors import KernelRuntimeError

needs_compiler = pytest.mark.skipif(
    shutil.which("cc") is None and shutil.which("gcc") is None
    or not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists(),
    reason="no C compiler or no Python.h here: the C launch path is off and calls take the Python launcher")

HALF, FLOAT = object(), object()  # stand-ins for torch.float16 and torch.float32


class FakeTensor:
    """What the C path reads of a torch tensor: dtype, shape, stride(), get_device(), data_ptr(),
    and new_empty(shape, dtype=) for the outputs it makes."""

    made: list = []

    def __init__(self, shape, dtype=HALF, strides=None, device=0, ptr=0x10000):
        self.dtype, self.shape, self.device, self.ptr = dtype, tuple(shape), device, ptr
        self.strides = strides if strides is not None else tuple(
            _prod(shape[i + 1:]) for i in range(len(shape)))

    def stride(self):
        return self.strides

    def get_device(self):
        return self.device

    def is_contiguous(self):
        return self.strides == tuple(_prod(self.shape[i + 1:]) for i in range(len(self.shape)))

    def data_ptr(self):
        return self.ptr

    def new_empty(self, shape, dtype):
        out = FakeTensor(shape, dtype, device=self.device, ptr=0x90000 + 0x1000 * len(FakeTensor.made))
        FakeTensor.made.append(out)
        return out


class Broken(FakeTensor):
    pass


def _prod(items):
    out = 1
    for x in items:
        out *= x
    return out


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    fastcall._state.clear()
    loaded = fastcall.module(tmp_path_factory.mktemp("build"))
    assert loaded is not None, fastcall.why_not()
    yield loaded
    fastcall._state.clear()


def dry_launcher(mod, outputs=(2,), device=0, align=16, tensor_type=FakeTensor, maps=()):
    specs = tuple((FLOAT if i == 2 else HALF, (128, 64), (64, 1), align, i in outputs, None) for i in range(3))
    return mod.Launcher("main_kernel", 0, (4, 1, 1), (128, 1, 1), 1024, device, specs, maps, tensor_type,
                        lambda: 0, lambda d: 0x5000 + d, KernelRuntimeError, None)


@needs_compiler
def test_builds_once_and_reuses_the_module(tmp_path):
    fastcall._state.clear()
    first = fastcall.module(tmp_path)
    built = list((tmp_path / "fastcall").iterdir())
    assert first is not None and len(built) == 1 and built[0].name.startswith("tileworkbench_fastcall-")
    mtime = built[0].stat().st_mtime_ns
    fastcall._state.clear()
    assert fastcall.module(tmp_path) is not None
    assert built[0].stat().st_mtime_ns == mtime  # loaded, not built again
    fastcall._state.clear()


@needs_compiler
def test_a_new_build_replaces_the_builds_of_older_sources(tmp_path):
    import importlib.machinery

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    folder = tmp_path / "fastcall"
    folder.mkdir()
    older = folder / f"tileworkbench_fastcall-0123456789abcdef{suffix}"
    other_python = folder / "tileworkbench_fastcall-0123456789abcdef.cpython-399-elsewhere.so"
    older.write_bytes(b"an old build")
    other_python.write_bytes(b"another Python's build")
    fastcall._state.clear()
    assert fastcall.module(tmp_path) is not None
    assert not older.exists() and other_python.exists() and len(list(folder.glob(f"*{suffix}"))) == 1
    fastcall._state.clear()


@needs_compiler
def test_prepared_in_a_thread_and_waited_for(tmp_path):
    fastcall._state.clear()
    fastcall.prepare(tmp_path)
    fastcall.prepare(tmp_path)  # under way: nothing more
    assert fastcall.module(tmp_path) is not None  # waits for the thread's build
    assert len(list((tmp_path / "fastcall").glob("*.so"))) == 1
    fastcall._state.clear()


@needs_compiler
def test_a_process_forked_while_the_build_holds_the_lock_builds_for_itself(tmp_path):
    import os

    fastcall._state.clear()
    fastcall._lock.acquire()  # as prepare()'s thread holds it during a build
    fastcall._state["preparing"] = True
    try:
        child = os.fork()
        if child == 0:  # the child: no thread of its own will release the copy it got
            code = 0 if fastcall.module(tmp_path) is not None else 1
            os._exit(code)
        status = _wait(child, seconds=30)
    finally:
        fastcall._lock.release()
        fastcall._state.clear()
    assert status is not None, "the forked process hung on the lock it inherited"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _wait(pid: int, seconds: float):
    """The exit status of ``pid``, or None (and the process killed) if it runs past ``seconds``."""
    import os
    import signal
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@needs_compiler
def test_a_cache_folder_that_cannot_be_written_means_the_python_launcher(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    fastcall._state.clear()
    assert fastcall.module(blocker) is None  # <file>/fastcall cannot be made
    assert "could not be built into" in fastcall.why_not()
    fastcall._state.clear()


def test_an_unexpected_failure_turns_the_c_path_off_and_says_so(tmp_path, monkeypatch, caplog):
    def broken(build_dir):
        raise KeyError("a bug of ours")

    monkeypatch.setattr(fastcall, "_load", broken)
    fastcall._state.clear()
    with caplog.at_level("WARNING", logger="tileworkbench"):
        assert fastcall.module(tmp_path) is None
    assert fastcall.why_not() == "KeyError: 'a bug of ours'" and "failed to load" in caplog.text
    fastcall._state.clear()


def test_switched_off_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_FASTCALL", "0")
    fastcall._state.clear()
    assert fastcall.module(tmp_path) is None
    assert fastcall.why_not() == "TILEWORKBENCH_FASTCALL=0"
    fastcall._state.clear()


def test_no_compiler_means_the_python_launcher(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    fastcall._state.clear()
    with caplog.at_level("INFO", logger="tileworkbench"):
        assert fastcall.module(tmp_path) is None
    assert "could not build" in fastcall.why_not()
    assert "the C launch path is off" in caplog.text and "could not build" in caplog.text
    fastcall._state.clear()


@needs_compiler
def test_every_argument_passed(mod):
    launch = dry_launcher(mod)
    a, b, c = FakeTensor((128, 64), ptr=0x1000), FakeTensor((128, 64), ptr=0x2000), FakeTensor((128, 64), FLOAT,
                                                                                                ptr=0x3000)
    assert launch(a, b, c) is c
    assert launch.last_launch == (0x5000, (0x1000, 0x2000, 0x3000))


@needs_compiler
def test_outputs_made_like_the_first_input(mod):
    launch = dry_launcher(mod)
    FakeTensor.made.clear()
    a, b = FakeTensor((128, 64), ptr=0x1000, device=0), FakeTensor((128, 64), ptr=0x2000)
    out = launch(a, b)
    assert FakeTensor.made == [out] and out.dtype is FLOAT and out.shape == (128, 64)
    assert launch.last_launch == (0x5000, (0x1000, 0x2000, out.ptr))


@needs_compiler
def test_outputs_made_from_a_template_where_the_plan_gives_one(mod):
    FakeTensor.made.clear()
    template = FakeTensor((128, 64), FLOAT, strides=(0, 0))

    def empty_like(t):
        assert t is template
        return t.new_empty(t.shape, t.dtype)

    specs = tuple((FLOAT if i == 2 else HALF, (128, 64), (64, 1), 16, i == 2, template if i == 2 else None)
                  for i in range(3))
    launch = mod.Launcher("k", 0, (1, 1, 1), (32, 1, 1), 0, 0, specs, (), FakeTensor, lambda: 0, lambda d: 7,
                          KernelRuntimeError, empty_like)
    out = launch(FakeTensor((128, 64)), FakeTensor((128, 64)))
    assert FakeTensor.made == [out] and launch.last_launch[1][2] == out.ptr


@needs_compiler
def test_row_major_tensors_are_checked_by_is_contiguous(mod):
    class Contiguous(FakeTensor):
        def stride(self):
            raise AssertionError("a row-major parameter's strides are read through is_contiguous()")

        def is_contiguous(self):
            return self.strides == (64, 1)

    launch = dry_launcher(mod, tensor_type=Contiguous)
    a, b = Contiguous((128, 64)), Contiguous((128, 64))
    assert launch(a, b, Contiguous((128, 64), FLOAT)) is not NotImplemented
    assert launch(Contiguous((128, 64), strides=(1, 128)), b, Contiguous((128, 64), FLOAT)) is NotImplemented


@needs_compiler
def test_other_strides_are_compared_one_by_one(mod):
    specs = ((HALF, (128, 64), (1, 128), 16, False, None),)  # a column-major parameter
    launch = mod.Launcher("k", 0, (1, 1, 1), (32, 1, 1), 0, 0, specs, (), FakeTensor, lambda: 0, lambda d: 7,
                          KernelRuntimeError, None)
    assert launch(FakeTensor((128, 64), strides=(1, 128))) is None
    assert launch(FakeTensor((128, 64))) is NotImplemented


@needs_compiler
def test_outputs_in_the_middle_and_several(mod):
    launch = dry_launcher(mod, outputs=(0, 2))
    FakeTensor.made.clear()
    b = FakeTensor((128, 64), ptr=0x2000)
    first, last = launch(b)
    assert [first, last] == FakeTensor.made and first.dtype is HALF and last.dtype is FLOAT
    assert launch.last_launch[1] == (first.ptr, 0x2000, last.ptr)
    assert launch(first, b, last) == (first, last)


@needs_compiler
@pytest.mark.parametrize("bad", [
    dict(dtype=FLOAT), dict(shape=(128, 32)), dict(shape=(128, 64, 1)), dict(strides=(1, 128)), dict(device=1),
    dict(device=-1), dict(ptr=0x1008)])
def test_anything_else_goes_back_to_the_python_launcher(mod, bad):
    launch = dry_launcher(mod)
    fields = dict(shape=(128, 64), dtype=HALF, ptr=0x1000)
    fields.update(bad)
    a, b = FakeTensor(**fields), FakeTensor((128, 64), ptr=0x2000)
    assert launch(a, b) is NotImplemented
    assert launch(b, a) is NotImplemented
    assert launch.last_launch is None  # nothing launched


@needs_compiler
def test_other_types_counts_keywords_and_devices_go_back(mod):
    launch = dry_launcher(mod)
    a, b = FakeTensor((128, 64)), FakeTensor((128, 64))
    assert launch(Broken((128, 64)), b) is NotImplemented  # a subclass: the Python launcher decides
    assert launch(a) is NotImplemented
    assert launch(a, b, b, b) is NotImplemented
    assert launch(a, b, stream=1) is NotImplemented
    other_device = dry_launcher(mod, device=1)
    assert other_device(FakeTensor((128, 64), device=1), FakeTensor((128, 64), device=1)) is NotImplemented
    assert launch.last_launch is None


@needs_compiler
def test_an_explicit_stream_handle_with_every_argument(mod):
    launch = dry_launcher(mod)
    a, b, c = FakeTensor((128, 64), ptr=0x1000), FakeTensor((128, 64), ptr=0x2000), FakeTensor((128, 64), FLOAT)
    assert launch(a, b, c, stream=0x77) is c and launch.last_launch[0] == 0x77
    assert launch(a, b, c, stream=None) is c and launch.last_launch[0] == 0x5000  # None: torch's current stream
    assert launch(a, b, c, stream=object()) is NotImplemented  # a stream object: the Python launcher reads it
    assert launch(a, b, c, other=1) is NotImplemented
    assert launch(a, b, stream=0x77) is NotImplemented  # an output to make: made for the stream in Python
    assert launch.last_launch[0] == 0x5000  # nothing launched since


@needs_compiler
def test_what_it_does_not_take_goes_to_its_fallback_as_it_came(mod):
    launch = dry_launcher(mod)
    seen = []
    launch.fallback = lambda *args, **keywords: seen.append((args, keywords)) or "fallback"
    a, b, c = FakeTensor((128, 64), ptr=0x1000), FakeTensor((128, 64), ptr=0x2000), FakeTensor((128, 64), FLOAT)
    assert launch(a, b, c) is c and not seen  # taken
    odd = FakeTensor((64, 64))
    assert launch(odd, b) == "fallback" and seen[-1] == ((odd, b), {})
    assert launch(a, b, stream=object()) == "fallback" and seen[-1][1].keys() == {"stream"}
    assert launch(a, b, c, other=1) == "fallback" and seen[-1] == ((a, b, c), {"other": 1})
    launch.fallback = None
    assert launch(odd, b) is NotImplemented
    with pytest.raises(TypeError, match="callable"):
        launch.fallback = 3


@needs_compiler
def test_a_kernel_and_its_launcher_are_collected_together(mod):
    """The kernel holds its launcher and the launcher its fallback, the kernel's bound method: a
    cycle the collector must see through (the launcher takes part in garbage collection)."""
    import gc
    import weakref

    class Owner:
        def call(self, *args):
            return args

    owner = Owner()
    owner.launch = dry_launcher(mod)
    owner.launch.fallback = owner.call
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None


@needs_compiler
def test_an_attribute_that_raises_goes_back(mod):
    class Odd(FakeTensor):
        def data_ptr(self):
            raise RuntimeError("a meta tensor has no data")

    launch = dry_launcher(mod, tensor_type=Odd)
    assert launch(Odd((128, 64)), Odd((128, 64))) is NotImplemented


@needs_compiler
def test_outputs_without_an_input_to_follow_must_be_passed(mod):
    specs = ((FLOAT, (8,), (1,), 4, True, None),)
    launch = mod.Launcher("k", 0, (1, 1, 1), (32, 1, 1), 0, 0, specs, (), FakeTensor, lambda: 0, lambda d: 7,
                          KernelRuntimeError, None)
    assert launch() is NotImplemented
    out = FakeTensor((8,), FLOAT, ptr=0x40)
    assert launch(out) is out and launch.last_launch == (7, (0x40,))


@needs_compiler
def test_malformed_plans_are_refused(mod):
    def make(grid=(1, 1, 1), specs=(), maps=()):
        return mod.Launcher("k", 0, grid, (32, 1, 1), 0, 0, specs, maps, FakeTensor, int, int, KernelRuntimeError,
                            None)

    one = (HALF, (8,), (1,), 1, False, None)
    with pytest.raises(ValueError):
        make(grid=(1, 1))
    with pytest.raises(ValueError):  # shape and strides of different lengths
        make(specs=((HALF, (8, 8), (1,), 1, False, None),))
    with pytest.raises(ValueError):  # more parameters than a launcher holds
        make(specs=(one,) * 33)
    with pytest.raises(ValueError):  # a map of a tensor the kernel does not take
        make(specs=(one,), maps=((1, bytes),))
    assert make(specs=(one,), maps=((0, bytes),)) is not None


@needs_compiler
def test_a_tensor_map_is_encoded_again_only_when_its_address_changes(mod):
    asked = []

    def encode(address):
        asked.append(address)
        return address.to_bytes(8, "little") * 16

    launch = dry_launcher(mod, maps=((2, encode),))
    a, b = FakeTensor((128, 64), ptr=0x1000), FakeTensor((128, 64), ptr=0x2000)
    c, d = FakeTensor((128, 64), FLOAT, ptr=0x3000), FakeTensor((128, 64), FLOAT, ptr=0x4000)
    for out in (c, c, d, d, c):
        assert launch(a, b, out) is out
        assert launch.last_launch[1] == (0x1000, 0x2000, out.ptr, out.ptr.to_bytes(8, "little") * 16)
    assert asked == [0x3000, 0x4000, 0x3000]


@needs_compiler
def test_the_encoders_error_is_the_calls_error(mod):
    def refuse(address):
        raise KernelRuntimeError(f"argument 'C' starts at address {address:#x}, which is not a multiple of 16 bytes")

    launch = dry_launcher(mod, maps=((2, refuse),))
    FakeTensor.made.clear()
    with pytest.raises(KernelRuntimeError, match="not a multiple of 16 bytes"):
        launch(FakeTensor((128, 64)), FakeTensor((128, 64)))
    assert launch.last_launch is None
    short = dry_launcher(mod, maps=((2, lambda address: b"too short"),))
    with pytest.raises(TypeError, match="128 bytes"):
        short(FakeTensor((128, 64)), FakeTensor((128, 64)), FakeTensor((128, 64), FLOAT))


# ---- the plan codegen hands the C path ----------------------------------------------------------

def test_plan_holds_the_generated_launchers_checks():
    import tileworkbench as tw
    from tileworkbench.examples import matmul

    art = tw.lower(matmul(256, 128, 64, 128, 128, 32, "float16", "float32", 2, 128), out_idx=[2])
    plan = art.fast_plan
    assert plan["grid"] == [1, 2, 1] and plan["block"] == [128, 1, 1]
    assert plan["smem_bytes"] == art.func.attrs["smem_bytes"] > 0
    assert [(p["name"], p["dtype"], p["shape"], p["strides"]) for p in plan["params"]] == [
        ("A", "float16", [256, 64], [64, 1]), ("B", "float16", [64, 128], [128, 1]),
        ("C", "float32", [256, 128], [128, 1])]
    for p in plan["params"]:  # the same numbers the Python launcher checks
        assert (f"rt.tensor({p['name']!r}, {p['name']}, shape=({p['shape'][0]}, {p['shape'][1]}), "
                f"dtype={p['dtype']!r}, strides=({p['strides'][0]}, {p['strides'][1]}), align={p['align']})"
                in art.host_source)
    assert all(p["row_major"] for p in plan["params"])


def test_a_plan_says_which_tensors_are_not_row_major():
    import tileworkbench as tw
    import tileworkbench.language as T

    @T.prim_func
    def copy_columns(A: T.StridedTensor((256, 64), (1, 256), "float32"), B: T.Tensor((256, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i, j in T.Parallel(128, 64):
                B[bx * 128 + i, j] = A[bx * 128 + i, j]

    params = tw.lower(copy_columns).fast_plan["params"]
    assert [(p["strides"], p["row_major"]) for p in params] == [([1, 256], False), ([64, 1], True)]


def test_a_plan_names_each_tensor_map_and_its_fields():
    import tileworkbench as tw
    from tileworkbench.examples.gemm import matmul_tma_copy

    art = tw.lower(matmul_tma_copy(256, 256, 256, 128, 128, 32, "float16", "float16", "float32", 128, 2))
    maps = art.fast_plan["maps"]
    assert [m["name"] for m in maps] == [d.name for d in art.func.attrs["tma_descriptors"]] and maps
    names = [p["name"] for p in art.fast_plan["params"]]
    for m in maps:  # what the launcher encodes it with: its tensor, and its fields' constant
        assert (f"{m['name']} = rt.encode_tiled({m['name']!r}, {names[m['tensor']]}, {m['fields']})"
                in art.host_source)


def test_no_plan_where_the_c_path_cannot_launch():
    import tileworkbench as tw

    from tileworkbench.examples import matmul

    debug = tw.lower(matmul(256, 128, 64, 128, 128, 32, "float16", "float32", 2, 128),
                     pass_configs={"tw.debug_barrier_timeout": 1.0})
    assert debug.fast_plan is None


def test_no_plan_for_scalar_parameters():
    import tileworkbench as tw
    import tileworkbench.language as T

    @T.prim_func
    def scale(A: T.Tensor((256,), "float32"), s: T.float32):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = A[bx * 128 + i] * s

    assert tw.lower(scale).fast_plan is None


def test_a_persistent_kernels_plan_leaves_the_grid_to_the_runtime():
    import tileworkbench as tw
    from tileworkbench.examples import matmul

    art = tw.lower(matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), target="sm_90a")
    tiles = art.func.launch.persistent_tiles
    assert tiles == 32 and art.fast_plan["grid"] is None and art.fast_plan["persistent_tiles"] == tiles
    assert f"rt.persistent_blocks(KERNEL, {tiles}, BLOCK, SMEM_BYTES)" in art.host_source



# ---- a Kernel with a (dry) C path --------------------------------------------------------------

@needs_compiler
def test_a_kernel_call_goes_to_its_c_path_first_and_to_the_launcher_for_the_rest(mod):
    import tileworkbench as tw
    from tileworkbench.examples import matmul
    from tileworkbench.jit.kernel import _map_encoder

    from tests.robustness.harness import DryRuntime, FakeGpuArray

    kernel = tw.compile(matmul(1024, 1024, 1024, 128, 128, 32, "float16", "float16", 2, 128), out_idx=[2],
                        target="sm_90a", load_device=False)
    runtime = DryRuntime(kernel.record["smem_bytes"])
    kernel.bind_runtime(runtime)
    plan = kernel.record["fast_plan"]
    assert plan["maps"], "the example stores C by TMA: a tensor map the C path encodes through the runtime"
    encoders = [_map_encoder(runtime, m["name"], kernel._host_namespace[m["fields"]]) for m in plan["maps"]]
    specs, maps = fastcall.plan_arguments(plan, [HALF, HALF, HALF], {2}, encoders, lambda p, dtype: None)
    kernel.take_c_path(mod.Launcher(kernel.name, 0, tuple(plan["grid"]), tuple(plan["block"]), plan["smem_bytes"],
                                    0, specs, maps, FakeTensor, lambda: 0, lambda d: 0x5000, KernelRuntimeError, None))
    a, b, c = (FakeTensor((1024, 1024), ptr=(i + 1) << 30) for i in range(3))
    assert kernel(a, b, c) is c and not runtime.packed  # the C path took it
    stream, values = kernel._fast.last_launch
    assert stream == 0x5000 and values[:3] == (a.ptr, b.ptr, c.ptr) and values[3] == bytes(128)
    assert kernel(a, b, c, stream=0x9000) is c and kernel._fast.last_launch[0] == 0x9000
    made = kernel(a, b)  # made by new_empty (no template here), launched by C
    assert made.shape == (1024, 1024) and kernel._fast.last_launch[1][2] == made.ptr and not runtime.packed
    assert kernel.__call__ is kernel._fast  # a call taken by C runs no Python frame
    assert list(inspect.signature(kernel).parameters) == ["args", "stream", "keywords"]
    arrays = [FakeGpuArray((1024, 1024), ptr=(i + 1) << 30) for i in range(3)]
    kernel(*arrays)  # not torch tensors: the generated launcher, on the dry runtime
    assert len(runtime.packed) == 1
    with pytest.raises(KernelRuntimeError, match="has shape"):  # its checks and messages, unchanged
        kernel(FakeGpuArray((1024, 512), ptr=1 << 30), *arrays[1:])


@needs_compiler
def test_calls_keep_no_references_they_should_not(mod):
    import sys
    import weakref

    launch = dry_launcher(mod, maps=((2, lambda address: bytes(128)),))
    a, b, c = FakeTensor((128, 64), ptr=0x1000), FakeTensor((128, 64), ptr=0x2000), FakeTensor((128, 64), FLOAT)
    counts = [sys.getrefcount(t) for t in (a, b, c)]
    FakeTensor.made.clear()
    for _ in range(1000):
        assert launch(a, b, c) is c
        launch(a, b)
        launch(a, FakeTensor((8,)))  # handed back
    assert [sys.getrefcount(t) for t in (a, b, c)] == counts
    made = weakref.ref(FakeTensor.made[-1])
    FakeTensor.made.clear()
    assert made() is None  # the launcher holds no made output


def test_a_launcher_that_cannot_be_made_leaves_the_kernel_on_its_python_launcher(monkeypatch, caplog):
    import sys
    import types

    import tileworkbench as tw
    from tileworkbench.examples import matmul
    from tileworkbench.jit.kernel import _c_launcher

    from tests.robustness.harness import DryRuntime

    kernel = tw.compile(matmul(256, 256, 256, 128, 128, 32, "float16", "float16", 2, 128), out_idx=[2],
                        target="sm_90a", load_device=False)
    runtime = DryRuntime(kernel.record["smem_bytes"])
    kernel.bind_runtime(runtime)
    runtime.function = lambda name: types.SimpleNamespace(ptr=0)
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # a torch with no dtypes: a failure
    monkeypatch.setattr(fastcall, "module", lambda build_dir: object())
    with caplog.at_level("WARNING", logger="tileworkbench"):
        assert _c_launcher(kernel, runtime) is None
    assert "no C launch path" in caplog.text
