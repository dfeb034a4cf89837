"""Launches as torch ops (issue 18), on the H200: the caller's stream (ordering respected, results
right), an explicit ``stream=``, CUDA graph capture and replay with torch and with CuPy, what
cannot be captured refused clearly, and the kernel as a torch operator inside ``torch.compile``
with no graph break. Inputs are random; results checked against float32."""

import pytest

import tileworkbench as tw
from tileworkbench.examples import matmul
from tileworkbench.testing import gpu_marks

pytestmark = gpu_marks(9, 0)
N = 256


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def gemm():
    return tw.compile(matmul(N, N, N, 128, 128, 32, "float16", "float16", 2, 128), out_idx=[2])


def _inputs(torch):
    return [torch.randn(N, N, device="cuda", dtype=torch.float16) for _ in range(2)]


def _close(torch, c, a, b):
    ref = a.float() @ b.float()
    return float((c.float() - ref).norm() / ref.norm()) < 2e-3


def test_a_launch_goes_on_torchs_current_stream_after_what_is_queued_there(torch, gemm):
    a, b = _inputs(torch)
    fresh = torch.randn(N, N, device="cuda", dtype=torch.float16)
    c = torch.full((N, N), float("nan"), device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()  # non-blocking: nothing orders it with the default stream
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # the copy below lands well after a launch elsewhere would run
        a.copy_(fresh)
        gemm(a, b, c)
    side.synchronize()
    assert _close(torch, c, fresh, b)


def test_two_streams_ordered_by_an_event(torch, gemm):
    a, b = _inputs(torch)
    first, second = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(first):
        torch.cuda._sleep(20_000_000)
        c = gemm(a, b)  # allocated and computed on the first stream
        done = torch.cuda.Event()
        done.record()
    with torch.cuda.stream(second):
        torch.cuda.current_stream().wait_event(done)
        d = gemm(c, b)  # reads the first stream's result
    torch.cuda.synchronize()
    assert _close(torch, c, a, b) and _close(torch, d, c, b)


def _late_copy_on_a_side_stream(torch):
    """(a, b, fresh, c, side): ``a`` becomes ``fresh`` on ``side`` well after any launch elsewhere
    would have run; ``c`` is NaN."""
    a, b = _inputs(torch)
    fresh = torch.randn(N, N, device="cuda", dtype=torch.float16)
    c = torch.full((N, N), float("nan"), device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        a.copy_(fresh)
    return a, b, fresh, c, side


def test_an_explicit_stream_wins_over_the_current_one(torch, gemm):
    a, b, fresh, c, side = _late_copy_on_a_side_stream(torch)
    gemm(a, b, c, stream=side)  # the current stream is the default one; the kernel waits on side's queue
    out = gemm(a, b, stream=side)  # its output allocated for side, where it is written
    side.synchronize()
    assert _close(torch, c, fresh, b) and _close(torch, out, fresh, b)


def test_a_torch_graph_captures_and_replays_the_kernel(torch, gemm):
    a, b = _inputs(torch)
    c = torch.empty(N, N, device="cuda", dtype=torch.float16)
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):  # what torch asks before a capture: one call outside it
        gemm(a, b, c)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(a, b, c)
        out = gemm(a, b)  # an output allocated inside the capture, from torch's graph pool
    for _ in range(3):  # new inputs at the same addresses, replayed
        a.copy_(torch.randn(N, N, device="cuda", dtype=torch.float16))
        graph.replay()
        torch.cuda.synchronize()
        assert _close(torch, c, a, b) and _close(torch, out, a, b)


def test_a_cupy_graph_captures_and_replays_the_kernel(gemm):
    cupy = pytest.importorskip("cupy")
    a, b = (cupy.random.standard_normal((N, N), dtype=cupy.float32).astype(cupy.float16) for _ in range(2))
    c = cupy.empty((N, N), dtype=cupy.float16)
    gemm(a, b, c)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        gemm(a, b, c)
        graph = stream.end_capture()
    a[...] = cupy.random.standard_normal((N, N), dtype=cupy.float32).astype(cupy.float16)
    cupy.cuda.Device().synchronize()
    graph.launch(stream)
    stream.synchronize()
    ref = a.astype(cupy.float32) @ b.astype(cupy.float32)
    assert float(cupy.linalg.norm(c.astype(cupy.float32) - ref) / cupy.linalg.norm(ref)) < 2e-3
    with stream:  # an output CuPy would allocate inside the capture: refused before anything is captured
        stream.begin_capture()
        with pytest.raises(tw.KernelRuntimeError, match="inside a CuPy graph capture"):
            gemm(a, b)
        stream.end_capture()


def test_a_debug_mode_kernel_is_refused_inside_a_capture(torch):
    debug = tw.compile(matmul(N, N, N, 128, 128, 64, "float16", "float16", 2, 128), out_idx=[2],
                       pass_configs={"tw.debug_barrier_timeout": 2.0, tw.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})
    a, b = _inputs(torch)
    assert _close(torch, debug(a, b), a, b)  # outside a capture it runs
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(tw.KernelRuntimeError, match="cannot be captured in a CUDA graph"):
        with torch.cuda.graph(graph):
            debug(a, b)


def test_the_kernel_as_a_torch_op_compiles_without_a_graph_break(torch, gemm):
    op = gemm.as_torch_op("tileworkbench_tests::gemm256")
    assert gemm.as_torch_op("tileworkbench_tests::gemm256") is op  # registered once
    a, b = _inputs(torch)
    assert _close(torch, op(a, b), a, b)
    torch.library.opcheck(op, (a, b), test_utils=("test_schema", "test_faketensor"))

    def scaled(x, y):
        return op(x, y) * 2

    compiled = torch.compile(scaled, fullgraph=True, backend="aot_eager")  # a graph break would raise
    out = compiled(a, b)
    ref = 2 * (a.float() @ b.float())
    assert float((out.float() - ref).norm() / ref.norm()) < 2e-3


@pytest.fixture
def c_path(gemm):
    from tileworkbench.backend import fastcall

    if gemm._fast is None:
        pytest.skip(f"the C launch path is off here: {fastcall.why_not()}")
    return gemm._fast


def _c_alone(c_path, *args, **keywords):
    """The C path's own answer to a call: what it returns where it takes the call, NotImplemented
    where it would hand it to the Python launcher (its fallback, left out for the call)."""
    fallback = c_path.fallback
    c_path.fallback = None
    try:
        return c_path(*args, **keywords)
    finally:
        c_path.fallback = fallback


def _handed_back(c_path, *args) -> bool:
    return _c_alone(c_path, *args) is NotImplemented


def test_the_c_launch_path_takes_torch_calls(torch, gemm, c_path):
    a, b = _inputs(torch)
    c = torch.full((N, N), float("nan"), device="cuda", dtype=torch.float16)
    assert gemm.__call__ is c_path  # a call of the kernel enters the C path, no Python frame first
    assert _c_alone(c_path, a, b, c) is c  # taken, not handed back
    out = _c_alone(c_path, a, b)
    torch.cuda.synchronize()
    assert _close(torch, c, a, b) and _close(torch, out, a, b)
    assert out.dtype == torch.float16 and out.shape == (N, N) and out.device == a.device
    assert c_path.repeat_last(10) > 0  # the benchmark's floor: the last launch again, from C
    torch.cuda.synchronize()
    assert _close(torch, out, a, b)


BAD_ARGUMENTS = [
    (lambda t, a: a.float(), "has dtype float32, the kernel expects float16"),
    (lambda t, a: a[:, : N // 2], r"has shape \(256, 128\)"),
    (lambda t, a: a.t(), "has strides"),
    (lambda t, a: a.cpu(), "is a CPU tensor"),
    (lambda t, a: t.empty(N * N + 1, device="cuda", dtype=t.float16)[1:].view(N, N), "must be 16-byte aligned"),
]


@pytest.mark.parametrize("bad, message", BAD_ARGUMENTS)
def test_the_c_path_hands_bad_arguments_to_the_python_checks(torch, gemm, c_path, bad, message):
    a, b = _inputs(torch)
    wrong = bad(torch, a)
    assert _handed_back(c_path, wrong, b)
    with pytest.raises(tw.KernelRuntimeError, match=message):
        gemm(wrong, b)


def test_torch_tensors_are_read_through_dlpacks_exchange_api(torch, gemm, c_path):
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no DLPack exchange API: tensors are read by their attributes")
    assert c_path.tensor_reader == "dlpack"
    a, b = _inputs(torch)
    storage = torch.randn(N * N + 8, device="cuda", dtype=torch.float16)
    shifted = storage[8:].view(N, N)  # 16 bytes into its storage: the address read must count that
    a.requires_grad_(True)  # read alike (the attributes do not look at it either)
    for x, y in ((shifted, b), (a, shifted)):
        out = _c_alone(c_path, x, y)
        torch.cuda.synchronize()
        assert out is not NotImplemented and _close(torch, out, x.detach(), y.detach())


def test_both_readers_take_and_refuse_the_same_tensors(torch, gemm, c_path):
    from tileworkbench.jit.kernel import _c_launcher

    by_attributes = _c_launcher(gemm, gemm._runtime, exchange_api=False)
    assert by_attributes.tensor_reader == "attributes"
    a, b = _inputs(torch)
    row = torch.randn(1, N, device="cuda", dtype=torch.float16)
    odd_stride_row = row.as_strided((N, N), (0, 1))  # broadcast rows: not row-major, refused by both
    for x in [a, *(bad(torch, a) for bad, _ in BAD_ARGUMENTS), odd_stride_row]:
        verdicts = {reader.tensor_reader: _c_alone(reader, x, b) is NotImplemented
                    for reader in (c_path, by_attributes)}
        assert len(set(verdicts.values())) == 1, (x.shape, x.stride(), x.dtype, x.device, verdicts)
    torch.cuda.synchronize()


def test_a_dynamic_kernel_takes_the_c_path_for_each_set_of_sizes(torch, monkeypatch):
    from tileworkbench.backend import fastcall
    from tileworkbench.examples.tilelang_programs import dynamic_shape as example
    from tileworkbench.jit import cache, sized_launch

    monkeypatch.delenv(sized_launch.ENV, raising=False)  # on by default
    kernel = example.matmul_dynamic_mnk.compile(**example.CONFIG).general  # the form for any sizes
    if fastcall.module(cache.cache_dir()) is None:
        pytest.skip(f"the C launch path is off here: {fastcall.why_not()}")
    for m, n, k in ((1000, 300, 520), (64, 4096, 128), (1000, 300, 520), (257, 129, 33)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        first = kernel(a, b)  # the Python launcher, or this size's launcher again
        second = kernel(a, b)  # a second call of these sizes leaves their launcher
        launcher = kernel._sized[(m, n, k)]
        assert kernel.__call__ is launcher  # the next call of these sizes enters C
        out = _c_alone(launcher, a, b)
        assert out is not NotImplemented and out.shape == (m, n)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
        assert _c_alone(launcher, a, b, c) is c
        torch.cuda.synchronize()
        for result in (first, second, out, c):
            assert _close(torch, result, a, b), (m, n, k)
        other = torch.randn(m + 1, k, device="cuda", dtype=torch.float16)
        assert _c_alone(launcher, other, b) is NotImplemented  # other sizes: the Python launcher's
    with pytest.raises(tw.KernelRuntimeError, match="dtype float32"):
        kernel(a.float(), b)  # through this size's C launcher, refused with the Python launcher's words



def test_a_dynamic_kernel_as_called_enters_its_aligned_forms_c_launcher(torch, monkeypatch):
    from tileworkbench.backend import fastcall
    from tileworkbench.examples.tilelang_programs import dynamic_shape as example
    from tileworkbench.jit import cache, sized_launch

    monkeypatch.delenv(sized_launch.ENV, raising=False)
    kernel = example.matmul_dynamic_mnk.compile(**example.CONFIG)  # both forms, as users call it
    if fastcall.module(cache.cache_dir()) is None:
        pytest.skip(f"the C launch path is off here: {fastcall.why_not()}")
    for m, n, k in ((512, 256, 128), (512, 256, 128), (1000, 300, 520), (512, 256, 128), (64, 4096, 128)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        for _ in range(2):  # a set of sizes gets its launcher at its second call
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
            assert kernel(a, b, c) is c
            torch.cuda.synchronize()
            assert _close(torch, c, a, b), (m, n, k)
        aligned = (m, n, k) != (1000, 300, 520)
        assert (kernel.__call__ is kernel.aligned()._fast) == aligned  # the entry: this size's launcher, or the dispatcher
    with pytest.raises(tw.KernelRuntimeError, match="dtype float32"):
        kernel(a.float(), b)  # refused by the C launcher, worded by the aligned form's Python launcher

def test_the_c_path_launches_on_a_stream_handle(torch, gemm, c_path):
    a, b, fresh, c, side = _late_copy_on_a_side_stream(torch)
    assert _c_alone(c_path, a, b, c, stream=side.cuda_stream) is c  # taken: the handle is an int
    side.synchronize()
    assert _close(torch, c, fresh, b)


def test_cupy_arrays_take_the_python_launcher(gemm, c_path):
    cupy = pytest.importorskip("cupy")
    a, b = (cupy.random.standard_normal((N, N), dtype=cupy.float32).astype(cupy.float16) for _ in range(2))
    assert _handed_back(c_path, a, b)
    c = gemm(a, b)
    ref = a.astype(cupy.float32) @ b.astype(cupy.float32)
    assert float(cupy.linalg.norm(c.astype(cupy.float32) - ref) / cupy.linalg.norm(ref)) < 2e-3


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_threads_launching_the_same_kernel_keep_their_own_arguments(torch, gemm, framework):
    """Both launch paths let the GIL go in the driver call while another thread may pack its own
    arguments for the same kernel: each thread's results must be its own (torch: the C path; CuPy:
    the Python launcher)."""
    import threading

    if framework == "cupy":
        cupy = pytest.importorskip("cupy")
    work = []
    for _ in range(4):
        a, b = _inputs(torch)
        c = torch.full((N, N), float("nan"), device="cuda", dtype=torch.float16)
        work.append((a, b, c) if framework == "torch" else tuple(cupy.asarray(t) for t in (a, b, c)))
    torch.cuda.synchronize()
    errors = []

    def hammer(args):
        try:
            for _ in range(300):
                gemm(*args)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(args,)) for args in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors, errors[:1]
    for a, b, c in work:
        a, b, c = (torch.as_tensor(t, device="cuda") for t in (a, b, c))
        assert _close(torch, c, a, b)


def test_the_c_path_launches_a_persistent_kernel_on_the_runtimes_blocks(torch, c_path):
    persistent = tw.compile(matmul(1024, 1024, 1024, 128, 256, 64, "float16", "float16", 3, 256), out_idx=[2])
    assert persistent.record["fast_plan"]["grid"] is None and persistent._fast is not None
    a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.float16) for _ in range(2))
    out = persistent._fast(a, b)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    assert float((out.float() - ref).norm() / ref.norm()) < 2e-3
