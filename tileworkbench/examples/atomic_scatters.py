"""Rows of a shared tile added atomically into the rows of a float32 tensor an index table picks
(DeepSeek's sparse MLA backward adds each key block's dKV so): with ``T.atomic_addx4`` and with
``T.atomic_add`` in a ``T.Parallel`` loop. Both become float4 atomics (``tw::atomic_add_x4``)
where the neighbours line up; rows the table sends outside the tensor are skipped (the bounds
guard). ``Out[Idx[i]] += scale * Src[i]``, summed over ``i`` (``start``: the column the adds
begin at, which decides whether four neighbours can be one vector)."""

import tileworkbench.language as T


def scatter_rows(rows=16, cols=64, out_rows=40, by_fours=True, start=0, scale=2.0):
    width = cols - start

    @T.prim_func
    def main(Src: T.Tensor((rows, cols), "float32"), Idx: T.Tensor((rows,), "int32"),
             Out: T.Tensor((out_rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), "float32")
            T.copy(Src, s)
            for i, j in T.Parallel(rows, cols):
                s[i, j] = s[i, j] * scale
            if by_fours:
                for i, j in T.Parallel(rows, width // 4):
                    T.atomic_addx4(Out[Idx[i], start + j * 4], s[i, start + j * 4])
            else:
                for i, j in T.Parallel(rows, width):
                    T.atomic_add(Out[Idx[i], start + j], s[i, start + j])

    return main
