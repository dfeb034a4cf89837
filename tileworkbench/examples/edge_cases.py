"""Kernels at the edges the compiler once got wrong (issue 15), shared by their CPU tests on the
generated code and their GPU tests against float64: a copy whose extent is known only at run
time, two gemm forms accumulating into one fragment, and tensors past 2^31 elements."""

import tileworkbench.language as T


def run_time_extent_copy(n_blocks=8, tile=128):
    """Block ``bx`` copies the first ``16 bx + 8`` elements of its tile of A into a shared tile
    filled with -1, then the whole tile to B: B holds A's elements there and -1 after them."""

    @T.prim_func
    def main(A: T.Tensor((n_blocks * tile,), "float32"), B: T.Tensor((n_blocks * tile,), "float32")):
        with T.Kernel(n_blocks, threads=128) as bx:
            s = T.alloc_shared((tile,), "float32")
            T.fill(s, -1.0)
            n = bx * 16 + 8
            T.copy(A[bx * tile:bx * tile + n], s[0:n])
            T.copy(s, B[bx * tile:bx * tile + tile])

    return main


def two_gemm_forms(M=128, N=128, K=64):
    """S = P @ Q + P @ R^T: one accumulator, one gemm with B stored K x N, one with B stored N x K."""

    @T.prim_func
    def main(P: T.Tensor((M, K), "float16"), Q: T.Tensor((K, N), "float16"), R: T.Tensor((N, K), "float16"),
             S: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            bt = T.alloc_shared((N, K), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(P, a)
            T.copy(Q, b)
            T.copy(R, bt)
            T.clear(c)
            T.gemm(a, b, c)
            T.gemm(a, bt, c, transpose_B=True)
            T.copy(c, S)

    return main


def big_tensor_copy(n=65536, tile=128):
    """B = A for n x n float16 tensors, a tile at a time through shared memory (threads' copies):
    at n = 65536 (2^32 elements, 8 GiB) the element offsets pass 2^31."""

    @T.prim_func
    def main(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16")):
        with T.Kernel(n // tile, n // tile, threads=128) as (bx, by):
            s = T.alloc_shared((tile, tile), "float16")
            T.copy(A[by * tile, bx * tile], s)
            T.copy(s, B[by * tile, bx * tile])

    return main


def long_vector_add(n=2**31 + 1000, block=1024):
    """Y = X + 1 for float16 vectors of n elements, guarded element by element: past 2^31 both the
    index and the guard need 64 bits."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(T.ceildiv(n, block), threads=256) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = X[bx * block + i] + 1.0

    return main


def mixed_gemm_forms(M=128, N=64):
    """S = U @ V + P @ Q into one accumulator, with K = 48 for the first gemm (96-byte rows:
    mma.sync only) and K = 64 for the second (wgmma could take it alone)."""

    @T.prim_func
    def main(P: T.Tensor((M, 64), "float16"), Q: T.Tensor((64, N), "float16"), U: T.Tensor((M, 48), "float16"),
             V: T.Tensor((48, N), "float16"), S: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, 64), "float16")
            b = T.alloc_shared((64, N), "float16")
            u = T.alloc_shared((M, 48), "float16")
            v = T.alloc_shared((48, N), "float16")
            c = T.alloc_fragment((M, N), "float32")
            T.copy(P, a)
            T.copy(Q, b)
            T.copy(U, u)
            T.copy(V, v)
            T.clear(c)
            T.gemm(u, v, c)
            T.gemm(a, b, c)
            T.copy(c, S)

    return main
