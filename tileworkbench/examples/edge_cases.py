"""Kernels at the edges the compiler once got wrong, shared by their CPU tests on the generated code
and their GPU tests against float64: a copy whose extent is known only at run time, two gemm forms
accumulating into one fragment, and tensors past 2^31 elements (issue 15); a tile's copies and
its gemm inside an ``if`` on a mask (block-sparse GEMM: no barrier stood between them), and a
synchronous TMA copy that a mask skips in some iterations (its wait took the phase from the
iteration index and passed on an old phase); a one-stage warp-specialised loop with work after its
gemm, whose tiles the epilogue's shared-memory budget counted as none; ``T.Parallel`` loops
reading and writing global tensors on tiles that hang over the tensors' edges (the last blocks
wrote past the end of the output); TileLang's persistent GEMM walk in the forms that may and may not
become a grid of its tiles; thread-local arrays that carry values only within a loop iteration
(which become scalars) beside one that carries them across loops; floats converted to integers
(C leaves NaN and out-of-range values undefined; ours saturate, NaN to 0); a fragment seen through
``T.reshape`` with its heads summed in runs; eight reductions whose scratch tiles would not fit side by side."""

import numpy as np

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


def masked_block_gemm(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32):
    """Block-sparse C = A @ B: tile (by, bx) adds A's and B's k-th tiles only where
    ``mask[by, bx, k]`` is set; copies and gemm inside the ``if`` (threads' copies, no pipeline)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             mask: T.Tensor((M // block_M, N // block_N, K // block_K), "int32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.serial(K // block_K):
                if mask[by, bx, k] != 0:
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def masked_tma_copy(tiles=16, rows=64, cols=64):
    """Tile ``k`` of A goes to Y through shared memory by a synchronous TMA copy, only where
    ``mask[k]`` is set (Y keeps what it held elsewhere); one block walks the tiles."""

    @T.prim_func
    def main(A: T.Tensor((tiles * rows, cols), "float16"), mask: T.Tensor((tiles,), "int32"),
             Y: T.Tensor((tiles * rows, cols), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), "float16")
            for k in T.serial(tiles):
                if mask[k] != 0:
                    T.copy(A[k * rows, 0], s, prefer_instruction="tma")
                    T.copy(s, Y[k * rows, 0])

    return main


def triangular_tma_copy(tiles=8, rows=64, cols=64):
    """For i in range(tiles), for j in range(i): tile i - 1 - j of A is copied (synchronous TMA)
    to row block i of Y's panel j. The inner loop's extent changes, so the copies' count is no
    product of extents."""

    @T.prim_func
    def main(A: T.Tensor((tiles * rows, cols), "float16"), Y: T.Tensor((tiles * rows, tiles * cols), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), "float16")
            for i in T.serial(tiles):
                for j in T.serial(i):
                    T.copy(A[(i - 1 - j) * rows, 0], s, prefer_instruction="tma")
                    T.copy(s, Y[i * rows, j * cols])

    return main


def scaled_batch_gemm(stages, batch=4, size=512):
    """C[b] = the sum over K tiles of 0.5 * (A[b] tile @ B[b] tile): work after the gemm in the
    pipelined loop (so one stage is warp-specialised too, with a barrier pair per tile) and a
    batch along the grid's z (so no persistent tile loop)."""

    @T.prim_func
    def main(A: T.Tensor((batch, size, size), "float16"), B: T.Tensor((batch, size, size), "float16"),
             C: T.Tensor((batch, size, size), "float16")):
        with T.Kernel(size // 128, size // 128, batch, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            S = T.alloc_fragment((128, 128), "float32")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            for k in T.Pipelined(size // 64, num_stages=stages):
                T.copy(A[bz, by * 128, k * 64], A_s)
                T.copy(B[bz, k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, S, clear_accum=True)
                for i, j in T.Parallel(128, 128):
                    acc[i, j] += S[i, j] * 0.5
            T.copy(acc, C[bz, by * 128, bx * 128])

    return main


def overhanging_tiles(M=1000, N=200, block_M=64, block_N=64):
    """``C = 2 A + 1`` and the row sums ``S`` of ``2 A``, tile by tile, with ``T.Parallel`` loops
    straight between the global tensors and a fragment, on a grid whose last tiles hang over both
    edges of A: what lies outside A reads as zero (so it adds nothing to a row sum) and nothing is
    written outside C or S."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
             S: T.Tensor((M, T.ceildiv(N, block_N)), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            twice = T.alloc_fragment((block_M, block_N), "float32")
            row_sums = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, block_N):
                twice[i, j] = A[by * block_M + i, bx * block_N + j] * 2.0
            T.reduce_sum(twice, row_sums, dim=1)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = twice[i, j] + 1.0
            for i in T.Parallel(block_M):
                S[by * block_M + i, bx] = row_sums[i]

    return main


def collatz_steps(n=1024):
    """Each thread counts the Collatz steps of its element down to 1: a ``while`` loop whose trip
    count differs from thread to thread, on TileLang's kernel variables (``x = T.alloc_var(...)``,
    then ``x = ...`` assigns it)."""

    @T.prim_func
    def main(X: T.Tensor((n,), "int32"), steps: T.Tensor((n,), "int32")):
        with T.Kernel(n // 128, threads=128) as bx:
            x = T.alloc_var(T.int32)
            count = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            x = X[bx * 128 + tx]
            count = 0
            while x != 1:
                x = T.if_then_else(x % 2 == 0, x // 2, 3 * x + 1)
                count = count + 1
            steps[bx * 128 + tx] = count

    return main


def loop_temporaries(blocks=4, per_thread=8):
    """Each thread holds ``per_thread`` values of X and, element by element: adds its neighbour
    lane's value (a shuffle through a per-element array, as TileLang's Hadamard does), adds an
    offset kept in an array filled by an earlier loop, and rounds three times the value to float16
    through a float16 array, adding one. The first and last arrays carry values only within an
    iteration (``scalarize_loop_temporaries`` makes them scalars); the offsets cross loops (kept).
    Y[t * per_thread + j] = fp16(3 * (x + x_neighbour + j / 2)) + 1, x = X[t * per_thread + j],
    the neighbour thread ``t ^ 1``."""
    n = blocks * 128 * per_thread

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            tx = T.get_thread_binding()
            vals = T.alloc_local((per_thread,), "float32")
            partner = T.alloc_local((per_thread,), "float32")
            offsets = T.alloc_local((per_thread,), "float32")
            rounded = T.alloc_local((per_thread,), "float16")
            base = (bx * 128 + tx) * per_thread
            for j in T.serial(per_thread):
                vals[j] = X[base + j]
                offsets[j] = j * 0.5
            for j in T.serial(per_thread):
                partner[j] = T.tvm_warp_shuffle(0xFFFFFFFF, vals[j], tx ^ 1, 32, 32)
                vals[j] = vals[j] + partner[j]
            for j in T.serial(per_thread):
                vals[j] = vals[j] + offsets[j]
                rounded[j] = vals[j] * 3.0
                Y[base + j] = rounded[j] + 1.0

    return main


def masked_scores(n=256, block=64, op=">=", shift=0):
    """Out[r, c] = 1 where ``r OP c + shift`` else 0, written tile by tile through a fragment with
    ``T.if_then_else`` (causal attention's mask): most tiles decide it alike for every element,
    which ``split_uniform_selects`` decides once per tile."""

    @T.prim_func
    def main(Out: T.Tensor((n, n), "float32")):
        with T.Kernel(n // block, n // block, threads=128) as (bx, by):
            s = T.alloc_fragment((block, block), "float32")
            for i, j in T.Parallel(block, block):
                if op == ">=":
                    s[i, j] = T.if_then_else(bx * block + i >= by * block + j + shift, 1.0, 0.0)
                elif op == ">":
                    s[i, j] = T.if_then_else(bx * block + i > by * block + j + shift, 1.0, 0.0)
                elif op == "<=":
                    s[i, j] = T.if_then_else(bx * block + i <= by * block + j + shift, 1.0, 0.0)
                else:
                    s[i, j] = T.if_then_else(bx * block + i < by * block + j + shift, 1.0, 0.0)
            T.copy(s, Out[bx * block:(bx + 1) * block, by * block:(by + 1) * block])

    return main


def persistent_walk_gemm(M=256, N=512, K=128, sm_num=3, wave_size=None, clear=True, stage_type="float16",
                         extra=None):
    """TileLang's persistent GEMM at a small size (a ``T.Persistent`` walk over 128 x 128 tiles on
    ``sm_num`` blocks, the result staged through a shared tile), with the knobs that decide whether
    ``unwrap_persistent_walk`` may make it a grid: ``wave_size`` (other than the grid: some tiles
    another block's), ``clear=False`` (a tile adds onto the previous tile's accumulator),
    ``stage_type`` (the staging tile's type), ``extra``: ``"block_ids"`` (each tile's block index
    written to ``D[0, tile]``) or ``"second_reader"`` (the staged tile copied to ``D`` too)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16"),
             D: T.Tensor((M, N), "float16")):
        with T.Kernel(sm_num, threads=256) as block_id:
            A_shared = T.alloc_shared((128, 64), "float16")
            B_shared = T.alloc_shared((64, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            C_shared = T.alloc_shared((128, 128), stage_type)
            for bx, by in T.Persistent([M // 128, N // 128], wave_size or sm_num, block_id):
                if clear:
                    T.clear(C_local)
                for k in T.Pipelined(K // 64, num_stages=2):
                    T.copy(A[bx * 128, k * 64], A_shared)
                    T.copy(B[k * 64, by * 128], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[bx * 128, by * 128])
                if extra == "block_ids":
                    D[0, bx * (N // 128) + by] = T.cast(block_id, "float16")
                if extra == "second_reader":
                    T.copy(C_shared, D[bx * 128, by * 128])

    return main


# Each kind of value a conversion to an integer meets: NaN, infinities, past either end of each type,
# negative values above -1 (truncated to 0), in range.
CONVERSION_INPUTS = (np.nan, np.inf, -np.inf, -0.7, -1.5, -129.5, 127.9, 255.9, 300.5, 70000.0, -40000.0, 12.9,
                     3e9, -3e9, 5e9, 1e19, -1e19, 2e19)
# The integer types each source converts to: (output name, dtype)
INTEGER_TARGETS = (("i8", "int8"), ("u8", "uint8"), ("i16", "int16"), ("u16", "uint16"), ("i32", "int32"),
                   ("u32", "uint32"), ("i64", "int64"), ("u64", "uint64"))


def float_to_integer_conversions(source: str):
    """Floats of ``source`` (float16, float32 or float64) cast into each integer type, and a float16
    tile copied into a uint8 tensor. Arguments: the input (``conversion_inputs``), then the outputs
    named as in ``conversions_expected``."""
    n = len(CONVERSION_INPUTS)

    @T.prim_func
    def convert(A: T.Tensor((n,), source), i8: T.Tensor((n,), "int8"), u8: T.Tensor((n,), "uint8"),
                i16: T.Tensor((n,), "int16"), u16: T.Tensor((n,), "uint16"), i32: T.Tensor((n,), "int32"),
                u32: T.Tensor((n,), "uint32"), i64: T.Tensor((n,), "int64"), u64: T.Tensor((n,), "uint64"),
                copied: T.Tensor((n,), "uint8")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((n,), "float16")
            for i in T.Parallel(n):
                s[i] = A[i]
            T.copy(s, copied)
            for i in T.Parallel(n):
                i8[i] = T.Cast("int8", A[i])
                u8[i] = T.Cast("uint8", A[i])
                i16[i] = T.Cast("int16", A[i])
                u16[i] = T.Cast("uint16", A[i])
                i32[i] = T.Cast("int32", A[i])
                u32[i] = T.Cast("uint32", A[i])
                i64[i] = T.Cast("int64", A[i])
                u64[i] = T.Cast("uint64", A[i])

    return convert


def conversion_inputs(source: str):
    """``CONVERSION_INPUTS`` as ``source`` (in float16, 70000 and what lies past it are infinities)."""
    with np.errstate(over="ignore"):
        return np.asarray(CONVERSION_INPUTS, source)


def conversions_expected(source: str) -> dict:
    """Each output of ``float_to_integer_conversions``: towards zero, saturated to the type's range,
    NaN to 0 (``tw::to_integer``)."""
    values = conversion_inputs(source).astype(np.float64)

    def saturated(v, np_type):
        info = np.iinfo(np_type)
        clipped = np.clip(np.trunc(np.nan_to_num(v, nan=0.0)), float(info.min), float(info.max))
        # float(2**64 - 1) rounds up to 2**64: the largest uint64 stands for it
        return np.array([info.max if x >= float(info.max) else int(x) for x in clipped], np_type)

    with np.errstate(over="ignore"):
        as_half = values.astype(np.float16).astype(np.float64)
    out = {name: saturated(values, np.dtype(dtype).type) for name, dtype in INTEGER_TARGETS}
    out["copied"] = saturated(as_half, np.uint8)
    return out


def head_sums(rows=64, groups=4, heads=32):
    """A fragment of ``rows x (groups * heads)`` scores seen through ``T.reshape`` as
    ``(rows, groups, heads)``: each score's ReLU weighted per (group, head), the heads of each
    group summed (``T.reduce_sum`` along the view's last dimension), the sums stored transposed.
    ``Out[g, r] = sum_h max(A[r, g * heads + h], 0) * W[g, h]`` (DeepSeek's FP8 indexers' form)."""

    @T.prim_func
    def main(A: T.Tensor((rows, groups * heads), "float32"), W: T.Tensor((groups, heads), "float32"),
             Out: T.Tensor((groups, rows), "float32")):
        with T.Kernel(1, threads=128):
            scores = T.alloc_fragment((rows, groups * heads), "float32")
            per_head = T.reshape(scores, (rows, groups, heads))
            w = T.alloc_fragment((groups, heads), "float32")
            sums = T.alloc_fragment((rows, groups), "float32")
            T.copy(A, scores)
            T.copy(W, w)
            for r, g, h in T.Parallel(rows, groups, heads):
                per_head[r, g, h] = T.max(per_head[r, g, h], 0) * w[g, h]
            T.reduce_sum(per_head, sums, dim=-1)
            for g, r in T.Parallel(groups, rows):
                Out[g, r] = sums[r, g]

    return main


def many_row_reductions(rows=64, cols=128):
    """Eight reductions of one shared ``rows x cols`` float32 tile's rows (sum, max, min, abssum,
    absmax, then sum and max with ``clear=False`` onto the result before, then min), each through a
    scratch copy of the tile: 32 KB each at 64 x 128, 288 KB side by side, over sm_90a's 227 KB;
    ``plan_shared_memory`` places the scratch tiles over each other. ``Out[k]`` is the k-th result."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), Out: T.Tensor((8, rows), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((rows, cols), "float32")
            r = T.alloc_fragment((rows,), "float32")
            T.copy(A, a)
            T.reduce_sum(a, r, dim=1)
            T.copy(r, Out[0, :])
            T.reduce_max(a, r, dim=1)
            T.copy(r, Out[1, :])
            T.reduce_min(a, r, dim=1)
            T.copy(r, Out[2, :])
            T.reduce_abssum(a, r, dim=1)
            T.copy(r, Out[3, :])
            T.reduce_absmax(a, r, dim=1)
            T.copy(r, Out[4, :])
            T.reduce_sum(a, r, dim=1, clear=False)
            T.copy(r, Out[5, :])
            T.reduce_max(a, r, dim=1, clear=False)
            T.copy(r, Out[6, :])
            T.reduce_min(a, r, dim=1)
            T.copy(r, Out[7, :])

    return main


def many_row_reductions_expected(a: np.ndarray) -> np.ndarray:
    x = a.astype(np.float64)
    absmax_then_sum = np.abs(x).max(1) + x.sum(1)
    return np.stack([x.sum(1), x.max(1), x.min(1), np.abs(x).sum(1), np.abs(x).max(1), absmax_then_sum,
                     np.maximum(absmax_then_sum, x.max(1)), x.min(1)])


def two_phase_shared_tiles(rows=128, cols=128):
    """Two phases of shared tiles, four ``rows x cols`` float32 tiles in all (64 KB each at 128 x
    128, 256 KB side by side, over sm_90a's 227 KB): the first phase adds ``A`` and ``B`` through
    ``a_s`` and ``b_s``, the second stores the sum and the difference through ``s_s`` and ``d_s``
    (as TileLang's GQA backward keeps dK and dV in shared tiles only after its loop).
    ``plan_shared_memory`` places the second phase's tiles over the first's."""

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32"),
             Sum: T.Tensor((rows, cols), "float32"), Diff: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=256):
            a_s = T.alloc_shared((rows, cols), "float32")
            b_s = T.alloc_shared((rows, cols), "float32")
            s_s = T.alloc_shared((rows, cols), "float32")
            d_s = T.alloc_shared((rows, cols), "float32")
            s = T.alloc_fragment((rows, cols), "float32")
            d = T.alloc_fragment((rows, cols), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            for i, j in T.Parallel(rows, cols):
                s[i, j] = a_s[i, j] + b_s[j, i]
                d[i, j] = a_s[i, j] - b_s[j, i]
            T.copy(s, s_s)
            T.copy(d, d_s)
            T.copy(s_s, Sum)
            T.copy(d_s, Diff)

    return main


def tile_read_by_wgmma_and_mma(m=128, n=32, k=192, dtype="float16"):
    """One shared tile ``a_s`` (``m x k``, rows of 384 bytes at the defaults) read by two gemms, as
    TileLang's GQA backward reads ``K_shared``: ``S = A @ B^T`` on wgmma, which wants ``a_s`` in
    128-byte panels, and ``G = D^T @ A`` with ``n`` = 32 rows, too few for wgmma, on mma.sync, which
    must read the same panels (``tw::gemm_ss``'s panel arguments), as must ``H = B @ A^T`` (both
    operands in panels). ``dtype="float32"`` (with ``k=64``: rows of 256 bytes) runs them in TF32
    (``tw::gemm_ss_tf32``; KDA's wy_fast_bwd has such a pair). ``S`` is ``m x n``, ``G`` is ``n x k``,
    ``H`` is ``n x m``."""

    @T.prim_func
    def main(A: T.Tensor((m, k), dtype), B: T.Tensor((n, k), dtype), D: T.Tensor((m, n), dtype),
             S: T.Tensor((m, n), "float32"), G: T.Tensor((n, k), "float32"), H: T.Tensor((n, m), "float32")):
        with T.Kernel(1, threads=256):
            a_s = T.alloc_shared((m, k), dtype)
            b_s = T.alloc_shared((n, k), dtype)
            d_s = T.alloc_shared((m, n), dtype)
            s = T.alloc_fragment((m, n), "float32")
            g = T.alloc_fragment((n, k), "float32")
            h = T.alloc_fragment((n, m), "float32")
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.copy(D, d_s)
            T.clear(s)
            T.gemm(a_s, b_s, s, transpose_B=True)
            T.clear(g)
            T.gemm(d_s, a_s, g, transpose_A=True)
            T.clear(h)
            T.gemm(b_s, a_s, h, transpose_B=True)
            T.copy(s, S)
            T.copy(g, G)
            T.copy(h, H)

    return main


def paged_tiles_summed(pages=8, page_rows=32, cols=64, stages=2):
    """The sum of ``pages`` tiles of ``A`` (``page_rows x cols`` float32 each), taken last page
    first through a page table, as TileLang's paged MLA decode reads its KV cache: the pipelined
    copy's address reads ``start``, a name the loop body computes from ``Table`` (and from ``p``,
    another). The pipeline computes both again for the iteration it issues. ``Out`` is the sum."""

    @T.prim_func
    def main(A: T.Tensor((pages * page_rows, cols), "float32"), Table: T.Tensor((pages,), "int32"),
             Out: T.Tensor((page_rows, cols), "float32")):
        with T.Kernel(1, threads=128):
            a_s = T.alloc_shared((page_rows, cols), "float32")
            acc = T.alloc_fragment((page_rows, cols), "float32")
            T.clear(acc)
            for r in T.Pipelined(pages, num_stages=stages):
                p = pages - 1 - r
                start = Table[p] * page_rows
                T.copy(A[start:start + page_rows, :], a_s)
                for i, j in T.Parallel(page_rows, cols):
                    acc[i, j] += a_s[i, j]
            T.copy(acc, Out)

    return main


def grouped_gemm_found_in_a_loop(group_rows=(64, 128, 64), K=128, N=128, block=64):
    """TileLang's grouped GEMM in small: row block ``bx`` finds its group ``g`` in a loop over the
    groups' starting rows (``g`` assigned before the pipelined loop), and the loop's copies read
    ``g``. Warp-specialised, the search runs on every thread ahead of the split into producer and
    consumers (once the producer ran the loop without it and loaded group 0's tiles).
    ``C[rows of g] = A[rows of g] @ B[g]``."""
    groups, total = len(group_rows), sum(group_rows)

    @T.prim_func
    def main(A: T.Tensor((total, K), "float16"), B: T.Tensor((groups, K, N), "float16"),
             Starts: T.Tensor((groups,), "int32"), C: T.Tensor((total, N), "float16")):
        with T.Kernel(total // block, threads=128) as bx:
            a_s = T.alloc_shared((block, block), "float16")
            b_s = T.alloc_shared((block, N), "float16")
            acc = T.alloc_fragment((block, N), "float32")
            g = T.alloc_var("int32")
            g = 0
            for i in range(groups):
                g = T.if_then_else(bx * block >= Starts[i], i, g)
            row = bx * block
            T.clear(acc)
            for k in T.Pipelined(K // block, num_stages=2):
                T.copy(A[row:row + block, k * block:(k + 1) * block], a_s)
                T.copy(B[g, k * block:(k + 1) * block, :], b_s)
                T.gemm(a_s, b_s, acc)
            T.copy(acc, C[row:row + block, :])

    return main

