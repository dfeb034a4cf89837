"""2-D convolution as an implicit GEMM (TileLang's convolution example): NHWC images, (KH, KW, C, F)
filters, each block computing ``block_M`` output pixels by ``block_N`` filters; ``T.im2col`` gathers
a tile of image patches, the filters are read as a ``(KH * KW * C, F)`` matrix and the output as an
``(N * OH * OW, F)`` one (``T.Tensor(shape, dtype, t.data)`` views)."""

import tileworkbench as tilelang
import tileworkbench.language as T


@tilelang.jit
def convolution(data, kernel, S, D, P, block_M, block_N, block_K, num_stages, threads, dtype=T.float16,
                accum_dtype=T.float32):
    N, C, H, W, F, K = T.const("N, C, H, W, F, K")
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    data: T.Tensor((N, H, W, C), dtype)
    kernel: T.Tensor((KH, KW, C, F), dtype)
    out = T.empty((N, OH, OW, F), dtype)

    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
        patches = T.alloc_shared((block_M, block_K), dtype)
        filters = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), accum_dtype)
        result = T.alloc_shared((block_M, block_N), dtype)

        filters_2d = T.Tensor((KH * KW * C, F), dtype, kernel.data)
        out_2d = T.Tensor((N * OH * OW, F), dtype, out.data)

        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=num_stages):
            T.im2col(data, patches, by, k, KH, S, D, P)
            T.copy(filters_2d[k * block_K, bx * block_N], filters)
            T.gemm(patches, filters, acc)

        T.copy(acc, result)
        T.copy(result, out_2d[by * block_M, bx * block_N])

    return out


def _reference(stride, padding, dilation):
    def conv(images, filters):
        import torch
        y = torch.nn.functional.conv2d(images.permute(0, 3, 1, 2).float(), filters.permute(3, 2, 0, 1).float(),
                                       stride=stride, padding=padding, dilation=dilation)
        return y.permute(0, 2, 3, 1)

    return conv


def _case(n, c, h, w, f, k, s, d, p, block_M=64, block_N=128, block_K=32, stages=3, threads=256):
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    return dict(
        compile=lambda: convolution.compile(N=n, C=c, H=h, W=w, F=f, K=k, S=s, D=d, P=p, block_M=block_M,
                                            block_N=block_N, block_K=block_K, num_stages=stages, threads=threads),
        inputs=lambda torch: (torch.randn(n, h, w, c, device="cuda").half(),
                              torch.randn(k, k, c, f, device="cuda").half()),
        reference=_reference(s, p, d),
        rtol=1e-2, atol=1e-2, flops=2 * n * oh * ow * f * c * k * k)


CASES = {
    "conv3x3": _case(128, 128, 64, 64, 128, 3, 1, 1, 1),
}
