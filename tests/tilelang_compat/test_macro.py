"""``@T.macro``: kernel code in helpers, inlined where the kernel calls them. FlashAttention written
with macros, as TileLang's pipelined attention examples write it, compiles to exactly the kernel
the inline version does; errors inside a macro point at the macro's own line."""

import pytest  # no `from __future__ import annotations`: the kernels' annotations name closure values

import tileworkbench as tilelang
import tileworkbench.language as T
from tileworkbench.examples.tilelang_programs import attention

BLOCK_M = BLOCK_N = 128
DIM = 128
SCALE = (1.0 / DIM) ** 0.5 * 1.44269504
ACC = T.float32


@T.macro
def mma0(K, Q_shared, K_shared, acc_s, k, bx, by, bz, seq_len):
    T.copy(K[bz, by, k * BLOCK_N : (k + 1) * BLOCK_N, :], K_shared)
    for i, j in T.Parallel(BLOCK_M, BLOCK_N):
        acc_s[i, j] = T.if_then_else(k * BLOCK_N + j >= seq_len, -T.infinity(acc_s.dtype), 0)
    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)


@T.macro
def softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
    T.copy(scores_max, scores_max_prev)
    T.fill(scores_max, -T.infinity(ACC))
    T.reduce_max(acc_s, scores_max, dim=1, clear=False)
    for i in T.Parallel(BLOCK_M):
        scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
    for i in T.Parallel(BLOCK_M):
        scores_scale[i] = T.exp2(scores_max_prev[i] * SCALE - scores_max[i] * SCALE)
    for i, j in T.Parallel(BLOCK_M, BLOCK_N):
        acc_s[i, j] = T.exp2(acc_s[i, j] * SCALE - scores_max[i] * SCALE)
    T.reduce_sum(acc_s, scores_sum, dim=1)
    for i in T.Parallel(BLOCK_M):
        logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
    T.copy(acc_s, acc_s_cast)


@T.macro
def rescale(acc_o, scores_scale):
    for i, j in T.Parallel(BLOCK_M, DIM):
        acc_o[i, j] *= scores_scale[i]


@T.macro
def mma1(V, V_shared, acc_s_cast, acc_o, k, by, bz):
    T.copy(V[bz, by, k * BLOCK_N : (k + 1) * BLOCK_N, :], V_shared)
    T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)


def with_macros(batch, heads, seq_len):
    shape = [batch, heads, seq_len, DIM]
    dtype = T.float16

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, BLOCK_M), heads, batch, threads=256) as (bx, by, bz):
            Q_shared = T.alloc_shared([BLOCK_M, DIM], dtype)
            K_shared = T.alloc_shared([BLOCK_N, DIM], dtype)
            V_shared = T.alloc_shared([BLOCK_N, DIM], dtype)
            O_shared = T.alloc_shared([BLOCK_M, DIM], dtype)
            acc_s = T.alloc_fragment([BLOCK_M, BLOCK_N], ACC)
            acc_s_cast = T.alloc_fragment([BLOCK_M, BLOCK_N], dtype)
            acc_o = T.alloc_fragment([BLOCK_M, DIM], ACC)
            scores_max = T.alloc_fragment([BLOCK_M], ACC)
            scores_max_prev = T.alloc_fragment([BLOCK_M], ACC)
            scores_scale = T.alloc_fragment([BLOCK_M], ACC)
            scores_sum = T.alloc_fragment([BLOCK_M], ACC)
            logsum = T.alloc_fragment([BLOCK_M], ACC)

            T.copy(Q[bz, by, bx * BLOCK_M : (bx + 1) * BLOCK_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(ACC))
            for k in T.Pipelined(T.ceildiv(seq_len, BLOCK_N), num_stages=2):
                mma0(K, Q_shared, K_shared, acc_s, k, bx, by, bz, seq_len)
                softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                rescale(acc_o, scores_scale)
                mma1(V, V_shared, acc_s_cast, acc_o, k, by, bz)
            for i, j in T.Parallel(BLOCK_M, DIM):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * BLOCK_M : (bx + 1) * BLOCK_M, :])

    return main


def _kernel_code(func) -> list:
    src = tilelang.lower(func, out_idx=[3]).device_source
    return [line for line in src[src.index("// ---- kernel ----"):].splitlines() if ".py" not in line]


def test_attention_written_with_macros_is_the_inline_kernel_byte_for_byte():
    inline = attention.flash_attention.fn(1, 4, 1024, DIM, False, block_M=BLOCK_M, block_N=BLOCK_N,
                                          num_stages=2, threads=256)
    assert _kernel_code(with_macros(1, 4, 1024)) == _kernel_code(inline)


@T.macro
def bad_copy(src, dst):
    T.copy(src[0:64], dst)  # a 64-element slice into a 32-element tile


@T.macro
def returns_a_value(x, y):
    return x


def _uses(helper):
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((32,), T.float32)
            helper(A, s)

    return main


def test_an_error_inside_a_macro_points_at_the_macro_line():
    with pytest.raises(tilelang.CompileError) as info:
        tilelang.lower(_uses(bad_copy))
    assert info.value.loc.text.strip().startswith("T.copy(src[0:64], dst)")
    assert info.value.loc.file.endswith("test_macro.py")


def test_a_macro_returning_a_value_is_refused():
    with pytest.raises(tilelang.CompileError, match="the T.macro returns_a_value returns a value"):
        tilelang.lower(_uses(returns_a_value))


def test_a_macro_called_outside_a_kernel_says_so():
    with pytest.raises(tilelang.CompileError, match="can only be called inside a kernel"):
        rescale(None, None)


@T.macro
def doubled_into(src: T.SharedBuffer((64,), "float32"), dst: T.FragmentBuffer((64,), "float32")):
    for i in T.Parallel(64, annotations={"a hint": True}):
        dst[i] = src[i] * 2


def test_buffer_annotations_on_macro_parameters_take_and_check_their_buffers():
    """``T.SharedBuffer`` / ``T.FragmentBuffer`` / ``T.LocalBuffer`` annotate a macro's parameters
    (TileLang's); each call checks the buffer it passes: scope, type, shape."""
    import numpy as np

    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            s = T.alloc_shared((64,), "float32")
            f = T.alloc_fragment((64,), "float32")
            T.copy(A, s)
            doubled_into(s, f)
            T.copy(f, B)

    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    tilelang.compile(main, target="cpu")(a, b)
    assert np.array_equal(b, a * 2)

    with pytest.raises(tilelang.CompileError, match="takes a shared buffer of float32; f is a fragment buffer"):
        @T.prim_func
        def fragment_for_shared(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                f = T.alloc_fragment((64,), "float32")
                doubled_into(f, f)
    with pytest.raises(tilelang.CompileError, match="takes a fragment buffer of float32; h is a fragment buffer of "
                                                    "float16"):
        @T.prim_func
        def wrong_type(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                s = T.alloc_shared((64,), "float32")
                h = T.alloc_fragment((64,), "float16")
                doubled_into(s, h)
    with pytest.raises(tilelang.CompileError, match="takes a buffer of shape \\(64,\\); t is \\(32,\\)"):
        @T.prim_func
        def wrong_shape(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                t = T.alloc_shared((32,), "float32")
                f = T.alloc_fragment((64,), "float32")
                doubled_into(t, f)
