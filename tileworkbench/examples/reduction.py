"""B[i] = sum_j A[i, j]: a row reduction through a fragment and T.reduce_sum."""

import tileworkbench.language as T


def row_sum(M, N, block_M, dtype="float32", threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            A_frag = T.alloc_fragment((block_M, N), "float32")
            sums = T.alloc_fragment((block_M,), "float32")
            T.copy(A[bx * block_M, 0], A_frag)
            T.reduce_sum(A_frag, sums, dim=1)
            T.copy(sums, B[bx * block_M])

    return main
