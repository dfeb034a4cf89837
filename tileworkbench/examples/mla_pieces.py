"""Pieces of DeepSeek's MLA kernels in miniature: small programs with what those kernels need of
the compiler, for its tests (CPU, golden passes, GPU) to run against numpy."""

import tileworkbench.language as T


def halves_staged(split=2, rows=64, cols=64, by_gemm=True, guarded=True):
    """DeepSeek's sparse MLA backward in miniature: an accumulator ``acc = A^T @ B`` (``rows x
    cols``, by a gemm or, for the thread-level interpreter, by hand) stored a ``1/split`` of its
    rows at a time through a float32 ``T.view`` of ``B``'s half-precision tile, whose bytes the
    gemm no longer needs (the view lies over them, as in TileLang: ``share_view_storage``, with
    ``verify_shared_views`` checking that no value passes between the names); each part is read
    at ``acc[i + s * part, j]`` under ``if i < part`` (``rebase_shifted_nests``). ``Out = 2 * A^T @ B``; ``guarded=False`` drops the ``if``, so a read
    may leave the fragment (refused)."""
    part = rows // split

    @T.prim_func
    def main(A: T.Tensor((64, rows), "float16"), B: T.Tensor((64, cols), "float16"),
             Out: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((64, rows), "float16")
            b_s = T.alloc_shared((64, cols), "float16")
            stage = T.view(b_s, shape=[part, cols], dtype="float32")
            acc = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            if by_gemm:
                T.gemm(a_s, b_s, acc, transpose_A=True, clear_accum=True)
            else:
                T.clear(acc)
                for k in T.serial(64):
                    for i, j in T.Parallel(rows, cols):
                        acc[i, j] += T.Cast("float32", a_s[k, i]) * T.Cast("float32", b_s[k, j])
            for s in range(split):
                if guarded:
                    for i, j in T.Parallel(rows, cols):
                        if i < part:
                            stage[i, j] = acc[i + s * part, j] * 2.0
                else:
                    for i, j in T.Parallel(rows, cols):
                        stage[i % part, j] = acc[i + s * part, j]
                for i, j in T.Parallel(part, cols):
                    Out[i + s * part, j] = stage[i, j]

    return main


def dq_and_dkv_steps(steps=4, dtype="bfloat16"):
    """The sparse MLA backward's step in miniature, short of registers as it is: each step a wgmma
    gemm adds ``P[s] @ KV[s]`` (64 x 512 float32, two m64n256 instructions side by side: 256
    registers a thread of 128) into dQ's accumulator, then two mma.sync gemms (32 rows: too few for
    wgmma) compute ``dKV[s] = P[s]^T @ Q + P[s]^T @ dO`` into a 128-register accumulator of their
    own. Together they need more registers than a thread has (``isolate_starved_wgmmas``);
    ``dQ = sum_s P[s] @ KV[s]``."""

    @T.prim_func
    def main(P: T.Tensor((steps, 64, 32), dtype), KV: T.Tensor((steps, 32, 512), dtype),
             Q: T.Tensor((64, 512), dtype), dO: T.Tensor((64, 512), dtype), dQ: T.Tensor((64, 512), "float32"),
             dKV: T.Tensor((steps, 32, 512), "float32")):
        with T.Kernel(1, threads=128):
            p_s = T.alloc_shared((64, 32), dtype)
            kv_s = T.alloc_shared((32, 512), dtype)
            q_s = T.alloc_shared((64, 512), dtype)
            do_s = T.alloc_shared((64, 512), dtype)
            acc_dq = T.alloc_fragment((64, 512), "float32")
            acc_dkv = T.alloc_fragment((32, 512), "float32")
            T.copy(Q, q_s)
            T.copy(dO, do_s)
            T.clear(acc_dq)
            for s in T.serial(steps):
                T.copy(P[s, :, :], p_s)
                T.copy(KV[s, :, :], kv_s)
                T.gemm(p_s, kv_s, acc_dq)
                T.gemm(p_s, q_s, acc_dkv, transpose_A=True, clear_accum=True)
                T.gemm(p_s, do_s, acc_dkv, transpose_A=True)
                T.copy(acc_dkv, dKV[s, :, :])
            T.copy(acc_dq, dQ)

    return main
