"""``T.atomic_add`` / ``atomic_max`` / ``atomic_min`` on the CPU: what they lower to, the
barriers around shared atomics, and the errors (at the kernel line) for what they do not do."""

from __future__ import annotations

import pytest

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.errors import CompileError

SM90 = "sm_90a"


def _kernel(target_decl: str, add: str):
    """A kernel whose threads add into ``target_decl``'s buffer ``acc`` with the statement ``add``
    (each may be several lines)."""
    target_decl, add = (text.replace("\n", "\n        ") for text in (target_decl, add))
    source = f'''
@tilelang.jit(target=SM90)
def k(A):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    S = T.empty((1,), T.float32)
    with T.Kernel(1, threads=128):
        t = T.get_thread_binding(0)
        {target_decl}
        {add}  # <-
        S[0] = A[0]
    return S
'''
    scope = {"tilelang": tilelang, "T": T, "SM90": SM90}
    import linecache

    name = f"<atomic {abs(hash(source))}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    exec(compile(source, name, "exec"), scope)
    return scope["k"]


def test_a_shared_atomic_add_is_fenced_from_the_plain_accesses_around_it():
    k = _kernel("acc = T.alloc_shared((4,), T.float32)\nacc[t % 4] = 0.0",
                "T.atomic_add(acc[t % 4], A[t])\nA[t] = acc[t % 4]")
    src = k.compile(N=128).get_kernel_source()
    body = src[src.find('extern "C"'):]
    store, add, read = body.index("acc[(t % 4)] = 0.0f"), body.index("atomicAdd((&acc["), body.index("A[t] = acc[")
    assert "__syncthreads" in body[store:add] and "__syncthreads" in body[add:read]


def test_a_global_atomic_add_is_one_call():
    src = _kernel("pass", "T.atomic_add(A[t % 2], 1.0)").compile(N=128).get_kernel_source()
    assert "atomicAdd((&A[(t % 2)]), 1.0f);" in src


@pytest.mark.parametrize("decl, add, message", [
    ('acc = T.alloc_shared((4,), T.int8)', "T.atomic_add(acc[0], 1)", "T.atomic_add on int8 \\(acc\\) is not supported"),
    ('acc = T.alloc_fragment((128,), T.float32)', "T.atomic_add(acc[0], 1.0)", "global or shared memory; acc is a fragment"),
    ('acc = T.alloc_shared((4,), T.float32)', "T.atomic_add(acc[0:2], 1.0)", "adds to one element"),
    ('acc = T.alloc_shared((4,), T.float32)', "T.atomic_add(acc[0], 1.0, memory_order='acquire')", "only the relaxed update"),
    ('acc = T.alloc_shared((4,), T.float64)', "T.atomic_max(acc[0], 1.0)", "T.atomic_max on float64 \\(acc\\) is not supported"),
    ('acc = T.alloc_fragment((128,), T.float32)', "T.atomic_min(acc[0], 1.0)", "global or shared memory; acc is a fragment"),
    ('acc = T.alloc_shared((4,), T.float32)', "T.atomic_add(acc[0], 1.0, scope='gpu')", "unsupported keyword"),
])
def test_what_atomic_add_does_not_do_is_a_compile_error_at_its_line(decl, add, message):
    with pytest.raises(CompileError, match=message) as info:
        _kernel(decl, add).compile(N=128)
    assert "# <-" in str(info.value)


@pytest.mark.parametrize("op, call", [("max", "tw::atomic_max"), ("min", "tw::atomic_min")])
def test_a_float_max_or_min_goes_through_our_bitwise_atomic(op, call):
    src = _kernel("pass", f"T.atomic_{op}(A[t % 2], A[t])").compile(N=128).get_kernel_source()
    assert f"{call}((&A[(t % 2)]), A[t]);" in src


def test_an_integer_max_is_cudas_own_and_a_shared_one_is_ordered_as_a_write():
    k = _kernel("acc = T.alloc_shared((4,), T.int32)\nacc[t % 4] = 0",
                "T.atomic_max(acc[t % 4], t)\nA[t] = acc[t % 4]")
    body = k.compile(N=128).get_kernel_source()
    body = body[body.find('extern "C"'):]
    update, read = body.index("atomicMax((&acc["), body.index("A[t] = ")
    assert "__syncthreads" in body[update:read]  # the read after the update waits for every thread's


def _accumulate_gemm(transposed: bool):
    """C (float32) += A @ B by atomic adds from a wgmma accumulator, straight or into C's transpose."""

    @tilelang.jit(target=SM90)
    def k(A, B, C):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((K, N), T.float16)
        C: T.Tensor((M, N), T.float32)
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), T.float16)
            B_s = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(A[by * 64, 0], A_s)
            T.copy(B[0, bx * 64], B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                if transposed:
                    T.atomic_add(C[bx * 64 + j, by * 64 + i], acc[i, j])
                else:
                    T.atomic_add(C[by * 64 + i, bx * 64 + j], acc[i, j])

    return k.compile(M=128, N=128, K=64)


def test_neighbouring_float32_atomic_adds_from_an_accumulator_go_two_at_a_time():
    from tileworkbench.backend import nvrtc

    kernel = _accumulate_gemm(transposed=False)
    src = kernel.get_kernel_source()
    assert src.count("tw::atomic_add_pair(") == 1 and "atomicAdd((&C[" not in src
    assert "atomicAdd(reinterpret_cast<float2*>(p)" in src  # the 8-byte atomic of sm_90
    assert nvrtc.compile_check(src, SM90, kernel.name).spills_bytes == 0
    # the pair is one 8-byte access: the launcher checks C's alignment for it
    assert "rt.tensor('C', C, shape=(128, 128), dtype='float32', strides=(128, 1), align=8)" in kernel.get_host_source()


def test_atomic_adds_whose_pair_is_not_neighbours_in_the_tensor_stay_one_element_each():
    src = _accumulate_gemm(transposed=True).get_kernel_source()
    assert "tw::atomic_add_pair((" not in src and "atomicAdd((&C[" in src
