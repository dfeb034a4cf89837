"""Shapes and sizes: grids, tensors, buffers, tiles and the operands of tile operations that do
not fit each other or the hardware. Each is a CompileError at the line."""

import pytest

from .harness import Bad, check_bad, check_unique, ids
from .test_syntax import kernel

GRIDS = [
    ("zero", "0", "grid dimension x must be between 1 and 2147483647 blocks .*got 0"),
    ("negative", "-3", "grid dimension x must be between 1 and .*got -3"),
    ("past-x-limit", "2**31", "grid dimension x must be between 1 and 2147483647 blocks .*got 2147483648"),
    ("past-y-limit", "1, 65536", "grid dimension y must be between 1 and 65535 blocks .*got 65536"),
    ("past-z-limit", "1, 1, 70000", "grid dimension z must be between 1 and 65535 .*got 70000"),
    ("zero-y", "4, 0", "grid dimension y must be between 1 and 65535 .*got 0"),
    ("four-dims", "1, 1, 1, 1", "T.Kernel takes at most 3 grid dimensions, got 4"),
    ("threads-zero", "1, threads=0", "threads must be a constant between 1 and 1024, got the int 0"),
    ("threads-2048", "1, threads=2048", "threads must be a constant between 1 and 1024, got the int 2048"),
    ("threads-negative", "1, threads=-32", "threads must be a constant between 1 and 1024"),
    ("threads-kernel-value", "1, threads=n", "threads must be a constant between 1 and 1024, got a int32 kernel"),
    ("threads-3d-too-many", "1, threads=(32, 8, 8)", "between 1 and 1024, got 32 x 8 x 8 = 2048 threads"),
    ("threads-2d-zero", "1, threads=(32, 0)", "between 1 and 1024, got the int 0 in"),
    ("threads-4d", "1, threads=(8, 4, 2, 2)", "a tuple of up to 3 numbers"),
    ("unknown-keyword", "1, threads=128, cluster=2", "T.Kernel: unsupported keyword"),
]

TENSORS = [
    ("zero", "T.Tensor((0, 16), 'float32')", "T.Tensor: dimension 0 must be positive, got 0"),
    ("negative", "T.Tensor((16, -4), 'float32')", "T.Tensor: dimension 1 must be positive, got -4"),
    ("fraction", "T.Tensor((2.5,), 'float32')", "T.Tensor: dimension 0 must be an integer, not the float 2.5"),
    ("string", "T.Tensor(('M', 16), 'float32')", "T.Tensor: dimension 0 must be a number, not the string 'M'"),
    ("none", "T.Tensor((None,), 'float32')", "T.Tensor: dimension 0 must be a number, not None"),
    ("empty", "T.Tensor((), 'float32')", "T.Tensor: a tensor needs at least one dimension"),
    ("absurd", "T.Tensor((2**40, 2**40), 'float16')", "is .* bytes, more than any GPU holds"),
    ("too-big-literal", "T.Tensor((2**70,), 'float32')", "does not fit in 64 bits"),
    ("strided-rank", "T.StridedTensor((2, 32), (40,), 'float32')", "shape \\(2, 32\\) and strides \\(40,\\) differ in rank"),
    ("strided-zero-stride", "T.StridedTensor((2, 32), (0, 1), 'float32')", "stride 0 must be positive, got 0"),
    ("strided-fraction", "T.StridedTensor((2, 32), (40.5, 1), 'float32')", "stride 0 must be an integer"),
    ("strided-negative-dim", "T.StridedTensor((-2, 32), (40, 1), 'float32')", "dimension 0 must be positive"),
]

BUFFERS = [
    ("shared-zero", 'x = T.alloc_shared((0, 64), "float16")  # <-', "T.alloc_shared: dimension 0 must be at least 1, got 0"),
    ("shared-negative", 'x = T.alloc_shared((64, -1), "float16")  # <-', "dimension 1 must be at least 1, got -1"),
    ("shared-fraction", 'x = T.alloc_shared((2.5,), "float16")  # <-', "must be an integer, not the float 2.5"),
    ("shared-kernel-value", 'x = T.alloc_shared((bx,), "float16")  # <-', "must be a constant integer, not a int32"),
    ("shared-empty", 'x = T.alloc_shared((), "float16")  # <-', "a buffer needs at least one dimension"),
    ("fragment-zero", 'x = T.alloc_fragment((64, 0), "float32")  # <-', "T.alloc_fragment: dimension 1 must be at least 1"),
    ("local-negative", 'x = T.alloc_local((-4,), "float32")  # <-', "T.alloc_local: dimension 0 must be at least 1"),
    ("fp4-unpacked-fragment", 'x = T.alloc_fragment((64,), "float4_e2m1_unpacked")  # <-',
     "float4_e2m1_unpacked can only live in shared memory"),
    ("shared-too-large", 'a = T.alloc_shared((128, 128), "float32")\nb = T.alloc_shared((256, 256), "float32")  # <-\n'
                         "T.clear(a)\nT.clear(b)", "more than the 232448 bytes of sm_90a"),
    ("shared-huge", 'x = T.alloc_shared((1 << 20, 1 << 20), "float32")  # <-\nT.clear(x)', "more than the 232448 bytes"),
    ("fragment-too-large", 'f = T.alloc_fragment((1024, 1024), "float32")  # <-\nT.clear(f)',
     "fragments need about 8192 32-bit registers per thread"),
    ("fragments-together-too-large", 'f = T.alloc_fragment((256, 256), "float32")\ng = T.alloc_fragment((256, 512), '
                                     '"float32")  # <-\nT.clear(f)\nT.clear(g)', "fragments need about 1536 32-bit"),
    # a fragment every thread holds whole (read at [k] outside T.Parallel, filled by a copy): counted too
    ("per-thread-fragment-too-large", 'f = T.alloc_fragment((64, 64), "float32")  # <-\nT.copy(A[0:64, 0:64], f)\n'
                                      'B[0] = f[3, 4]',
     "fragments need about 4096 32-bit registers per thread, its per-thread arrays counted"),
]

TILE_OPS = [
    ("copy-mismatch", 's = T.alloc_shared((64, 64), "float32")\nT.copy(A[0:128, 0:64], s)  # <-', "shape mismatch"),
    ("copy-rank-point", 's = T.alloc_shared((4, 4, 4), "float32")\nT.copy(A[0, 0], s)  # <-',
     "A has rank 2 but the other side's tile is 4x4x4"),
    ("copy-point-past-fragment", 'f = T.alloc_fragment((1,), "float32")\nT.copy(f[0], B[0:2])  # <-',
     "f\\[0\\] stands for a tile as large as the other side \\(2\\), and along dimension 0 that runs to element 2, "
     "past its 1"),  # found comparing the interpreters: the copy wrote B[0] alone
    ("copy-point-past-shared-anywhere", 's = T.alloc_shared((1,), "float32")\nx = bx * 0\nT.copy(s[x], B[0:2])  # <-',
     "s\\[x\\] stands for a tile as large as the other side \\(2\\), and along dimension 0 that runs to 2 "
     "elements from x, past its 1"),  # read s[1] at run time (found comparing the interpreters)
    ("copy-point-past-shared", 's = T.alloc_shared((4, 4), "float32")\nT.copy(A[0:2, 0:4], s[3, 0])  # <-',
     "s\\[3, 0\\] stands for a tile as large as the other side \\(2x4\\)"),
    ("copy-two-points", "T.copy(A[0, 0], A[1, 1])  # <-", "at least one side must be a whole buffer or a slice"),
    ("copy-dynamic-vs-static", 's = T.alloc_shared((128,), "float32")\nT.copy(B[0:bx], s)  # <-',
     "the B region's extent bx is known only when the kernel runs, but the s region is 128"),
    ("copy-dynamic-vs-dynamic", 's = T.alloc_shared((128,), "float32")\nT.copy(B[0:bx], s[0:bx + 1])  # <-',
     "the extents bx of B and bx \\+ 1 of s are known only when the kernel runs and may differ"),
    ("copy-dynamic-unbounded", 's = T.alloc_shared((128,), "float32")\nT.copy(B[0:n], s[0:n])  # <-',
     "the extent n has no upper bound known when the kernel is compiled"),
    ("copy-dynamic-past-shared", 's = T.alloc_shared((4,), "float32")\nT.copy(B[0:bx * 2], s[0:bx * 2])  # <-',
     "the slice of s along dimension 0 can reach element 6, past its 4"),
    ("fill-dynamic-unbounded", 's = T.alloc_shared((128,), "float32")\nT.fill(s[0:n], 1.0)  # <-',
     "T.fill: the extent n has no upper bound known"),
    ("fill-point-past", "T.fill(A[128, 0], 1.0)  # <-", "index 128 is out of range for dimension 0 of A"),  # one element (TileLang's T.fill(s[0], v))
    ("slice-step", "T.copy(B[0:8:2], B[8:12])  # <-", "slices of B must have step 1"),
    ("slice-empty", 's = T.alloc_shared((64,), "float32")\nT.fill(s[8:8], 1.0)  # <-', "slice 0 of s is empty"),
    ("slice-past-shared", 's = T.alloc_shared((64,), "float32")\nT.fill(s[32:96], 1.0)  # <-',
     "slice 0 of s \\(32:96\\) runs past its 64"),
    ("slice-negative", "T.copy(B[-4:0], B[0:4])  # <-", "slice 0 of B has a negative bound"),
    ("wrong-rank-index", "A[0] = 1.0  # <-", "A has 2 dimension\\(s\\), indexed with 1"),
    ("wrong-rank-load", "x = A[0, 0, 0]  # <-", "A has 2 dimension\\(s\\) but is indexed with 3"),
    ("tma-dynamic", 's = T.alloc_shared((128,), "float32")\nm = T.alloc_barrier(128)\n'
                    "T.tma_copy(B[0:bx], s[0:bx], barrier=m)  # <-", "T.tma_copy needs constant tile extents"),
    ("tma-global-to-global", "m = T.alloc_barrier(128)\nT.tma_copy(A[0:4, 0:4], A[4:8, 4:8], barrier=m)  # <-",
     "T.tma_copy copies global -> shared or shared -> global, not global -> global"),
    ("tma-box-too-large", 's = T.alloc_shared((300, 4), "float32")\nm = T.alloc_barrier(128)\n'
                          "T.tma_copy(C[0:300, 0:4], s, barrier=m)  # <-\nT.barrier_arrive(m)\nT.barrier_wait(m, 0)",
     "TMA box dimensions are at most 256 elements"),
    ("prefer-tma-fragment", 'f = T.alloc_fragment((64,), "float32")\nT.copy(B[0:64], f, prefer_instruction="tma")  # <-',
     "prefer_instruction='tma' copies global <-> shared, not global -> fragment"),
    ("tma-contradiction", 's = T.alloc_shared((64,), "float32")\nT.copy(B[0:64], s, prefer_instruction="tma", '
                          "disable_tma=True)  # <-", "contradicts disable_tma=True"),
    ("unknown-instruction", 's = T.alloc_shared((64,), "float32")\nT.copy(B[0:64], s, prefer_instruction="fast")  # <-',
     "unknown prefer_instruction 'fast'"),
    ("reduce-dim", 'f = T.alloc_fragment((64, 32), "float32")\ng = T.alloc_fragment((64,), "float32")\n'
                   "T.reduce_sum(f, g, dim=2)  # <-", "T.reduce_sum: dim 2 out of range for a 2-D buffer"),
    ("reduce-shape", 'f = T.alloc_fragment((64, 32), "float32")\ng = T.alloc_fragment((32,), "float32")\n'
                     "T.reduce_max(f, g, dim=1)  # <-", "T.reduce_max: output shape \\(32,\\) should be \\(64,\\)"),
    ("reduce-global", 'g = T.alloc_fragment((64,), "float32")\nT.reduce_sum(A, g, dim=1)  # <-',
     "T.reduce_sum reduces a whole fragment or shared buffer into another, not the global buffer A"),
    ("reduce-slice", 'f = T.alloc_fragment((64, 32), "float32")\ng = T.alloc_fragment((64,), "float32")\n'
                     "T.reduce_sum(f[0:32, 0:32], g, dim=1)  # <-", "not a slice of f"),
    ("reduce-dim-string", 'f = T.alloc_fragment((64, 32), "float32")\ng = T.alloc_fragment((64,), "float32")\n'
                          'T.reduce_sum(f, g, dim="rows")  # <-', "T.reduce_sum: dim must be a number"),
]

GEMM_HEAD = ('a = T.alloc_shared((128, 64), "float16")\nb = T.alloc_shared((64, 128), "float16")\n'
             'c = T.alloc_fragment((128, 128), "float32")\n')
GEMMS = [
    ("shapes", 'b2 = T.alloc_shared((32, 128), "float16")\nT.gemm(a, b2, c)  # <-',
     "T.gemm: shapes do not agree: A is 128x64, B is 32x128, C is 128x128"),
    ("into-slice", 'b2 = T.alloc_shared((64, 64), "float16")\nT.gemm(a, b2, c[0:128, 0:64])  # <-\nT.gemm(a, b, c)',
     "T.gemm C must be a whole fragment: a gemm into part of c is not supported"),
    ("a-fragment-sliced", 'af = T.alloc_fragment((128, 128), "float16")\nT.gemm(af[0:128, 0:64], b, c)  # <-',
     "T.gemm A must be a whole fragment; af is sliced here"),
    ("b-fragment-sliced", 'bf = T.alloc_fragment((64, 256), "float16")\nT.gemm(a, bf[0:64, 0:128], c)  # <-',
     "T.gemm B must be a whole fragment; bf is sliced here"),
    ("a-global", "T.gemm(A, b, c)  # <-", "T.gemm A must be a shared tile \\(T.alloc_shared\\), not the global buffer A"),
    ("a-sliced", "T.gemm(a[0:64, 0:64], b, c)  # <-", "T.gemm A must be a whole shared tile"),
    # a block of A's columns is taken (sparse MLA's Q_shared[:, :D]); B's rows are not
    ("b-rows-sliced", "T.gemm(a[0:128, 0:32], b[0:32, 0:128], c)  # <-", "T.gemm B must be a whole shared tile"),
    ("c-shared", 'cs = T.alloc_shared((128, 128), "float32")\nT.gemm(a, b, cs)  # <-',
     "the accumulator C must be a fragment \\(T.alloc_fragment\\), not the shared buffer cs"),
    ("c-local", 'cl = T.alloc_local((128, 128), "float32")\nT.gemm(a, b, cl)  # <-',
     "the accumulator C must be a fragment"),
    ("c-half", 'ch = T.alloc_fragment((128, 128), "float16")\nT.gemm(a, b, ch)  # <-', "T.gemm of float16 tiles accumulates in float32; ch"),
    ("dtypes", 'bb = T.alloc_shared((64, 128), "bfloat16")\nT.gemm(a, bb, c)  # <-', "A and B must have one dtype"),
    ("point", "T.gemm(a, b, c[0, 0])  # <-", "T.gemm C must be a whole buffer or a slice"),
    ("one-d", 'v = T.alloc_shared((64,), "float16")\nT.gemm(v, b, c)  # <-', "T.gemm A must be a 2-D tile"),
    ("float64-inputs", 'a64 = T.alloc_shared((128, 64), "float64")\nb64 = T.alloc_shared((64, 128), "float64")\n'
                       "T.gemm(a64, b64, c)  # <-",
     "T.gemm on tensor cores takes float16, bfloat16, float32 \\(as TF32\\) or int4 inputs"),
    ("k-not-16", 'a8 = T.alloc_shared((128, 8), "float16")\nb8 = T.alloc_shared((8, 128), "float16")\n'
                 "T.gemm(a8, b8, c)  # <-", "K=8 must be a multiple of 16"),
    ("warps", 'c2 = T.alloc_fragment((16, 8), "float32")\na2 = T.alloc_shared((16, 16), "float16")\n'
              'b2 = T.alloc_shared((16, 8), "float16")\nT.gemm(a2, b2, c2)  # <-', "cannot be split over 4 warps"),
]

PARAMS2D = 'A: T.Tensor((128, 128), "float32"), B: T.Tensor((256,), "float32"), C: T.Tensor((512, 8), "float32"), n: T.int32'


def _grid_case(name, args, match):
    return Bad(f"grid-{name}", kernel("A[0, 0] = 1.0", params=PARAMS2D, head=f"with T.Kernel({args}):  # <-"), match)


def _tensor_case(name, annotation, match):
    return Bad(f"tensor-{name}", f"@T.prim_func\ndef main(A: {annotation}):  # <-\n    with T.Kernel(1, threads=128):"
                                 f"\n        pass\n", match)


CASES = check_unique(
    [_grid_case(*g) for g in GRIDS]
    + [_tensor_case(*t) for t in TENSORS]
    + [Bad(f"buffer-{n}", kernel(b, params=PARAMS2D), m) for n, b, m in BUFFERS]
    + [Bad(f"tile-{n}", kernel(b, params=PARAMS2D), m) for n, b, m in TILE_OPS]
    + [Bad(f"gemm-{n}", kernel(GEMM_HEAD + b, params=PARAMS2D), m) for n, b, m in GEMMS]
)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_shapes_that_do_not_fit_are_named_at_their_line(case):
    check_bad(case)
