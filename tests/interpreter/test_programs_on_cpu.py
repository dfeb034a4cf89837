"""TileLang's ported programs on the CPU interpreter (``TILEWORKBENCH_INTERPRET=1``: the same
``@jit`` calls a user makes, numpy arrays in place of CUDA tensors), each at a small size against a
float64 numpy reference on random inputs."""

from __future__ import annotations

import numpy as np
import pytest

from tileworkbench.examples.tilelang_programs import (blocksparse_gemm, gemm_fp8, gemv, norms, softmax, splitk,
                                                      streamk_gemm, topk)


@pytest.fixture(autouse=True)
def interpreted(monkeypatch):
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _rel(out, ref):
    return float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())


def test_gemv_naive_and_split_k(rng):
    a, b = rng.standard_normal(512).astype(np.float16), rng.standard_normal((256, 512)).astype(np.float16)
    ref = b.astype(np.float64) @ a.astype(np.float64)
    assert _rel(gemv.naive_gemv(a, b, 128, 128), ref) < 2e-3
    assert _rel(gemv.splitk_gemv(a, b, 32, 32, 32), ref) < 2e-3  # per-thread partial sums, shared atomics


def test_top_k_finds_the_largest_values_and_their_columns(rng):
    x = rng.standard_normal((128, 64)).astype(np.float32)
    values, indices = topk.top_k_rows(x, 4, 64)
    assert np.array_equal(values, -np.sort(-x, axis=1)[:, :4])
    assert np.array_equal(np.take_along_axis(x, indices, 1), values)


def test_norms_and_softmax(rng):
    x = rng.standard_normal((64, 512)).astype(np.float32)
    assert _rel(norms.rms_norm(x, blk_m=1), x / np.sqrt((x.astype(np.float64) ** 2).mean(1, keepdims=True))) < 1e-6
    gamma, beta = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    out = norms.layernorm_fwd(64, 512, in_dtype="float32", out_dtype="float32")(x, gamma, beta)[0]
    mu = x.astype(np.float64).mean(1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * gamma + beta
    assert _rel(out, ref) < 1e-6
    h = rng.standard_normal((16, 1024)).astype(np.float16)
    e = np.exp(h.astype(np.float64) - h.max(1, keepdims=True))
    assert _rel(softmax.softmax_kernel(h, BLOCK_N=1024), e / e.sum(1, keepdims=True)) < 2e-3


def test_split_k_and_stream_k_add_their_parts_atomically(rng):
    a, b = rng.standard_normal((256, 512)).astype(np.float16), rng.standard_normal((512, 256)).astype(np.float16)
    c = np.zeros((256, 256), np.float32)
    splitk.matmul_splitk.compile(M=256, N=256, K=512, block_M=128, block_N=128, block_K=32, split_k=4)(a, b, c)
    assert _rel(c, a.astype(np.float64) @ b.astype(np.float64)) < 1e-5
    case = streamk_gemm.CASES["streamk_gemm"]
    M, N, K = streamk_gemm.SHAPE
    x, y = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((M, K), (N, K)))
    out = np.zeros((M, N), np.float32)
    case["compile"]()(x, y, out)  # tiles split between programs, a while loop walking them
    assert _rel(out, x.astype(np.float64) @ y.astype(np.float64).T) < 1e-5


def test_block_sparse_gemm_skips_the_masked_tiles(rng):
    kernel = blocksparse_gemm.blocksparse_matmul.compile(M=256, N=256, K=256, block_M=128, block_N=128, block_K=32,
                                                         num_stages=2, thread_num=128, enable_rasteration=True)
    a, b = rng.standard_normal((256, 256)).astype(np.float16), rng.standard_normal((256, 256)).astype(np.float16)
    mask = rng.random((2, 2, 8)) < 0.5
    out = kernel(a, b, mask)
    ref = np.zeros((256, 256))
    for i, j, k in zip(*np.nonzero(mask)):
        ref[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] += \
            a[i * 128:(i + 1) * 128, k * 32:(k + 1) * 32].astype(np.float64) @ \
            b[k * 32:(k + 1) * 32, j * 128:(j + 1) * 128].astype(np.float64)
    assert _rel(out, ref) < 2e-3


def test_fp8_gemm_through_ml_dtypes(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = rng.standard_normal((256, 256)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((256, 256)).astype(ml_dtypes.float8_e4m3fn)
    out = gemm_fp8.matmul(a, b, 128, 128, 128, dtype="float8_e4m3fn")
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    # the result is FP8 itself: within half an e4m3 step (1/16 of its value) of the float64 product
    assert (np.abs(out.astype(np.float64) - ref) <= np.abs(ref) / 16 + 2.0**-9).all()


def test_flash_decoding_runs_its_split_and_combine_kernels_in_order(rng):
    from tileworkbench.examples.tilelang_programs import flash_decoding

    b, h, skv, d = 2, 4, 1024, 64
    q = rng.standard_normal((b, h, 1, d)).astype(np.float16)
    k, v = (rng.standard_normal((b, h, skv, d)).astype(np.float16) for _ in range(2))
    out = flash_decoding.flash_decoding(b, h, 1, skv, d)(q, k, v)  # the split-KV parts, then their combine
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert _rel(out, (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)) < 2e-3


@pytest.mark.parametrize("num_split", [1, 2])
def test_mla_decode_over_one_latent_cache_split_or_not(rng, num_split):
    """Every head's query against the one latent cache (its rotary part in the scores only); on two
    warpgroups side by side, P reaches its gemm from shared memory (stage_fragment_operands)."""
    from tileworkbench.examples.tilelang_programs import mla_decode

    b, h, skv, d, pe = 2, 64, 256, 128, 64
    q, q_pe = rng.standard_normal((b, h, d)).astype(np.float16), rng.standard_normal((b, h, pe)).astype(np.float16)
    kv = rng.standard_normal((b, skv, 1, d)).astype(np.float16)
    k_pe = rng.standard_normal((b, skv, 1, pe)).astype(np.float16)
    out = mla_decode.mla_decode(b, h, skv, d, pe, num_split=num_split)(q, q_pe, kv, k_pe)
    latent = kv[:, :, 0].astype(np.float64)
    s = (q.astype(np.float64) @ latent.transpose(0, 2, 1)
         + q_pe.astype(np.float64) @ k_pe[:, :, 0].astype(np.float64).transpose(0, 2, 1)) / np.sqrt(d + pe)
    p = np.exp(s - s.max(-1, keepdims=True))
    assert _rel(out, (p / p.sum(-1, keepdims=True)) @ latent) < 2e-3


def test_the_hadamard_transform_shuffles_between_lanes(rng):
    from tileworkbench.examples.tilelang_programs import hadamard

    x = rng.standard_normal((4, 32768)).astype(np.float32)
    out = hadamard.hadamard.compile(b=4, n=32768, dtype=hadamard.T.float32)(x)  # warp butterflies, a transpose
    ref, h = x.astype(np.float64), 1
    while h < 32768:
        ref = ref.reshape(4, -1, 2, h)
        a, b = ref[:, :, 0].copy(), ref[:, :, 1].copy()
        ref[:, :, 0], ref[:, :, 1] = a + b, a - b
        ref, h = ref.reshape(4, 32768), h * 2
    assert _rel(out, ref) < 1e-6


def test_chunked_retention_matches_the_recurrence(rng):
    from tileworkbench.examples.tilelang_programs import retention

    B, S, H, D = 1, 256, 2, 64
    q, k, v = (rng.standard_normal((B, S, H, D)).astype(np.float16) for _ in range(3))
    out = retention.chunk_retention_fwd(B, S, H, D, D)(q, k, v).astype(np.float64).sum(0)  # the key-dimension parts
    pos = np.arange(S)
    dist = pos[:, None] - pos[None, :]
    ref = np.zeros((B, S, H, D))
    for h in range(H):
        decay = np.where(dist >= 0, np.exp2(np.clip(dist, 0, None) * np.log2(1 - 2.0 ** (-5.0 - h))), 0.0)
        qh, kh, vh = (x[:, :, h].astype(np.float64) for x in (q, k, v))
        ref[:, :, h] = ((qh @ kh.transpose(0, 2, 1)) * D ** -0.5 * decay) @ vh
    assert _rel(out, ref) < 2e-3  # scores and state pass through float16 tiles


def test_convolution_through_im2col_patches(rng):
    from tileworkbench.examples.tilelang_programs import convolution

    n, c, h, w, f, k, s, d, p = 2, 16, 10, 10, 32, 3, 1, 1, 1
    kernel = convolution.convolution.compile(N=n, C=c, H=h, W=w, F=f, K=k, S=s, D=d, P=p, block_M=64, block_N=32,
                                             block_K=32, num_stages=2, threads=128)
    x = rng.standard_normal((n, h, w, c)).astype(np.float16)
    wt = rng.standard_normal((k, k, c, f)).astype(np.float16)
    out = kernel(x, wt)
    padded = np.pad(x.astype(np.float64), ((0, 0), (p, p), (p, p), (0, 0)))
    ref = np.zeros((n, h, w, f))
    for kh in range(k):
        for kw in range(k):
            ref += padded[:, kh:kh + h, kw:kw + w, :] @ wt[kh, kw].astype(np.float64)
    assert _rel(out, ref) < 2e-3


@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_attention_backward_matches_the_float64_gradients(rng, is_causal):
    """The three kernels (Delta, the dK/dV loop with dQ's atomic adds, dQ's cast) against the
    gradients of softmax attention written out in float64."""
    from tileworkbench.examples.tilelang_programs import attention_bwd

    B, H, S, D = 1, 2, 128, 64
    q, k, v, do = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(4))
    o, lse, dq, dk, dv = attention_bwd.numpy_gradients(q, k, v, do, is_causal)
    got = attention_bwd.FlashBackward(B, H, S, D, is_causal)(q, k, v, o, lse, do)
    for name, out, ref in zip(("dQ", "dK", "dV"), got, (dq, dk, dv)):
        assert _rel(out, ref) < 1e-2, name


def test_elementwise_and_every_gemm_form_of_the_families(rng):
    from tileworkbench.examples.tilelang_programs import elementwise, gemm

    a, b = rng.standard_normal((96, 64)).astype(np.float32), rng.standard_normal((96, 64)).astype(np.float32)
    np.testing.assert_array_equal(elementwise.elementwise_add(a, b, 32, 32, elementwise.T.float32,
                                                              elementwise.T.float32, 128), a + b)
    x, y = rng.standard_normal((256, 192)).astype(np.float16), rng.standard_normal((192, 384)).astype(np.float16)
    ref = x.astype(np.float64) @ y.astype(np.float64)
    assert _rel(gemm.matmul(x, y, 128, 128, 32), ref) < 2e-3
    assert _rel(gemm.matmul_nt(x, np.ascontiguousarray(y.T), 128, 128, 32), ref) < 2e-3
    # TileLang's persistent example: 3 blocks walking 6 tiles wave by wave
    assert _rel(gemm.matmul_persistent(x, y, 128, 128, 64, threads=256, num_stages=3, sm_num=3), ref) < 2e-3


def test_grouped_query_attention(rng):
    from tileworkbench.examples.tilelang_programs import attention

    q = rng.standard_normal((1, 4, 128, 64)).astype(np.float16)
    k, v = (rng.standard_normal((1, 2, 128, 64)).astype(np.float16) for _ in range(2))
    out = attention.flash_attention(1, 4, 128, 64, False, groups=2, block_M=64, block_N=64, num_stages=2,
                                    threads=128)(q, k, v)
    kf, vf = (np.repeat(x.astype(np.float64), 2, axis=1) for x in (k, v))  # query heads 2h, 2h+1 share K/V head h
    s = q.astype(np.float64) @ kf.transpose(0, 1, 3, 2) / 8.0
    p = np.exp(s - s.max(-1, keepdims=True))
    assert _rel(out, (p / p.sum(-1, keepdims=True)) @ vf) < 2e-3
