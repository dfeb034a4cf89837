"""FP4 kernels the CPU tests (tests/test_fp4_values.py) and the GPU tests
(tests/gpu/test_fp4_values_gpu.py) both run: here, so the GPU's need no ml_dtypes."""

import textwrap

_QUANTIZE_HEAD = """import tileworkbench.language as T


@T.prim_func
def main(X: T.Tensor((64, 32), "bfloat16"), Q: T.Tensor((64, 32), T.float4_e2m1fn)):
    with T.Kernel(2, threads=128) as bx:
        x_shared = T.alloc_shared((32, 32), "bfloat16")
        x_local = T.alloc_fragment((32, 32), "bfloat16")
        y_local = T.alloc_fragment((32, 32), T.float4_e2m1fn)
        y_shared = T.alloc_shared((32, 32), T.float4_e2m1fn)
"""
_QUANTIZE_STEPS = """T.copy(X[bx * 32, 0], x_shared, disable_tma=True)
T.copy(x_shared, x_local)
for i, j in T.Parallel(32, 32):
    y_local[i, j] = T.clamp(x_local[i, j], -6.0, 6.0)
T.copy(y_local, y_shared)
T.copy(y_shared, Q[bx * 32, 0])
"""
QUANTIZE = _QUANTIZE_HEAD + textwrap.indent(_QUANTIZE_STEPS, " " * 8)
# DeepSeek V4's act_quant stages its input through a pipelined loop of one step: x_local is then
# copied from a stage of the stack x_shared becomes ([stage, 32, 32]), which once kept it (and
# y_local, computed from it) one element a thread, so y_local could not be stored in pairs
QUANTIZE_STAGED = (_QUANTIZE_HEAD + "        for _ in T.Pipelined(1, num_stages=2):\n"
                   + textwrap.indent(_QUANTIZE_STEPS, " " * 12))

# C = A @ B rounded to FP4, stored from the gemm's accumulator a byte a pair (tw::store_pair_e2m1)
GEMM_TO_FP4 = """import tileworkbench.language as T


@T.prim_func
def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 256), "float16"), C: T.Tensor((256, 256), T.float4_e2m1fn)):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((128, 64), "float16")
        B_s = T.alloc_shared((64, 128), "float16")
        C_l = T.alloc_fragment((128, 128), "float32")
        T.copy(A[by * 128, 0], A_s)
        T.copy(B[0, bx * 128], B_s)
        T.gemm(A_s, B_s, C_l, clear_accum=True)
        T.copy(C_l, C[by * 128, bx * 128])
"""
