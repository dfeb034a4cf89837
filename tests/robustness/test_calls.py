"""Calls that do not match the kernel: wrong arity, dtype, shape, strides, alignment, host memory,
scalars out of range. Each is a KernelRuntimeError saying what is wrong and what to do, raised by
the generated host launcher's checks before anything reaches the GPU (here a runtime that checks
and launches nothing, so they run without one)."""

import pytest

from .harness import Bad, KernelRuntimeError, check_bad, check_unique, ids

COPY = '''
@T.prim_func
def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16"), n: T.int32):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((128, 64), "float16")
        T.copy(A, s)
        T.copy(s, B)

kernel = tw.compile(main, target=SM90, load_device=False)
a = FakeGpuArray((128, 64))
b = FakeGpuArray((128, 64))
'''

TMA = '''
@T.prim_func
def main(A: T.Tensor((256, 128), "float16"), B: T.Tensor((256, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((128, 64), "float16")
        m = T.alloc_barrier(128)
        T.tma_copy(A[0, 0], s, barrier=m)
        T.barrier_arrive(m)
        T.barrier_wait(m, 0)
        T.copy(s, B[0, 0])

kernel = tw.compile(main, target=SM90, load_device=False)
'''


class _HostDLPack:
    """Stands for any DLPack exporter whose data is in host memory."""


def call(setup, line, match, id_):
    return Bad(id_, setup + f"\ndef run():\n    {line}\n", match, error=KernelRuntimeError)


CALLS = [
    ("too-few", "dry_call(kernel, a)", "main_kernel takes 3 inputs \\(A, B, n\\) or all 3 arguments; got 1"),
    ("too-many", "dry_call(kernel, a, b, 3, 4)", "takes 3 inputs .* got 4"),
    ("dtype", "dry_call(kernel, FakeGpuArray((128, 64), '<f4'), b, 3)",
     "argument 'A' has dtype float32, the kernel expects float16"),
    ("shape", "dry_call(kernel, FakeGpuArray((64, 128)), b, 3)",
     "argument 'A' has shape \\(64, 128\\), the kernel expects \\(128, 64\\)"),
    ("strides", "dry_call(kernel, FakeGpuArray((128, 64), strides=(2, 256)), b, 3)",
     "argument 'A' has strides \\(1, 128\\), the kernel expects \\(64, 1\\)"),
    ("misaligned-vector", "dry_call(kernel, FakeGpuArray((128, 64), ptr=(1 << 20) + 2), b, 3)",
     "argument 'A' must be 16-byte aligned for the vector and bulk copies"),
    ("numpy", "dry_call(kernel, np.zeros((128, 64), np.float16), b, 3)",
     "argument 'A' is a numpy array, in host memory; kernels take GPU arrays: pass cupy.asarray\\(A\\)"),
    ("list", "dry_call(kernel, [[0.0] * 64] * 128, b, 3)", "argument 'A' is a list, not a GPU array"),
    ("none", "dry_call(kernel, None, b, 3)", "argument 'A' is None, not a GPU array"),
    ("number-for-tensor", "dry_call(kernel, 1.5, b, 3)", "argument 'A' is the float 1.5, not a GPU array"),
    ("object", "dry_call(kernel, object(), b, 3)", "argument 'A' \\(object\\) is not a GPU array"),
    ("host-dlpack", "dry_call(kernel, HostDLPack(), b, 3)", "argument 'A' \\(HostDLPack\\) is not in GPU memory "
                                                            "\\(DLPack device type 1\\)"),
    ("scalar-string", "dry_call(kernel, a, b, 'three')", "argument 'n' is a int32 scalar, not str 'three'"),
    ("scalar-float", "dry_call(kernel, a, b, 2.5)", "argument 'n' is a int32 scalar; 2.5 is not an integer"),
    ("scalar-overflow", "dry_call(kernel, a, b, 2**40)", "argument 'n': 1099511627776 does not fit int32"),
    ("scalar-array", "dry_call(kernel, a, b, a)", "argument 'n' is a int32 scalar, not FakeGpuArray"),
    ("keywords", "dry_call(kernel, a, b, n=3)", "main_kernel takes its arguments by position \\(A, B, n\\), not by "
                                                "keyword \\(n\\)"),
]

HOST_DLPACK = '''
class HostDLPack:
    def __dlpack__(self, stream=None):
        raise AssertionError("never exported")

    def __dlpack_device__(self):
        return (1, 0)
'''

CASES = check_unique(
    [call(COPY + HOST_DLPACK, line, match, f"call-{name}") for name, line, match in CALLS]
    + [
        call(TMA, "dry_call(kernel, FakeGpuArray((256, 128), ptr=(1 << 20) + 8), FakeGpuArray((256, 64)))",
             "argument 'A' starts at address 0x100008, which is not a multiple of 16 bytes; the kernel moves it "
             "with TMA \\(A_desc\\)", "call-misaligned-tma"),
        call(TMA, "dry_call(kernel, FakeGpuArray((256, 128), '<i2'), FakeGpuArray((256, 64)))",
             "argument 'A' has dtype int16, the kernel expects float16", "call-tma-dtype"),
        call(TMA.replace("(256, 128)", "(256, 64)"),
             "dry_call(kernel, FakeGpuArray((256, 64), ptr=(1 << 20) + 8), FakeGpuArray((256, 64)))",
             "argument 'A' must be 16-byte aligned", "call-misaligned-bulk-copy"),
    ]
)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_call_that_does_not_match_is_a_runtime_error_before_launch(case):
    check_bad(case)


def test_a_matching_call_reaches_the_launch():
    """The dry runtime is the real launcher: a call that matches launches, once, on the kernel's grid."""
    from .harness import run

    case = Bad("call-ok", COPY + "\ndef run():\n    return dry_call(kernel, a, b, 3)\n", "")
    runtime = run(case)
    assert runtime.launches == [("main_kernel", (1, 1, 1), (128, 1, 1))]
