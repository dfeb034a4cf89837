"""Our port of DeepSeek's sparse MLA backward (``examples.tilelang_programs.sparse_mla_bwd``: the
accumulator read at shifted rows, ``T.atomic_addx4`` into dKV) against float64 numpy on the
tile-level interpreter, at a small size; at the bench's size it compiles for sm_90a with the float4
atomics and the mask in registers."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.examples.tilelang_programs import sparse_mla_bwd

S, SKV, HEADS, DIM, TAIL, TOPK = 6, 96, 64, 64, 32, 64


def _inputs(rng):
    bf16 = ml_dtypes.bfloat16
    q = rng.standard_normal((S, HEADS, DIM + TAIL)).astype(bf16)
    kv = rng.standard_normal((SKV, DIM + TAIL)).astype(bf16)
    do = rng.standard_normal((S, HEADS, DIM)).astype(bf16)
    indices = np.stack([rng.permutation(SKV)[:TOPK] for _ in range(S)]).astype(np.int32)
    lse = rng.standard_normal((S, HEADS)).astype(np.float32) + 3.0
    delta = rng.standard_normal((S, HEADS)).astype(np.float32)
    return q, kv, do, indices, lse, delta


def _reference(q, kv, do, indices, lse, delta):
    q, kv, do = (x.astype(np.float64) for x in (q, kv, do))
    scale = (DIM + TAIL) ** -0.5
    dq, dkv = np.zeros(q.shape), np.zeros(kv.shape)
    for s in range(S):
        keys = kv[indices[s]]
        p = np.exp(q[s] @ keys.T * scale - lse[s][:, None]) * (indices[s] <= s)
        ds = p * (do[s] @ keys[:, :DIM].T - delta[s][:, None]) * scale
        dq[s] = ds @ keys
        grad = ds.T @ q[s]
        grad[:, :DIM] += p.T @ do[s]
        np.add.at(dkv, indices[s], grad)
    return dq, dkv


def test_the_port_matches_float64_on_the_tile_level_interpreter(monkeypatch):
    q, kv, do, indices, lse, delta = _inputs(np.random.default_rng(12))
    assert (indices <= np.arange(S)[:, None]).any() and (indices > np.arange(S)[:, None]).any()  # both kinds
    dkv = np.zeros((SKV, DIM + TAIL), np.float32)
    monkeypatch.setenv("TILEWORKBENCH_INTERPRET", "1")
    dq = sparse_mla_bwd.sparse_mla_bwd(q, kv, do, indices, lse, delta, dkv, heads=HEADS, dim=DIM, tail_dim=TAIL,
                                       topk=TOPK)
    want_dq, want_dkv = _reference(q, kv, do, indices, lse, delta)
    # dS and P go through bf16 tiles for the gemms, as on the GPU: a few bf16 steps of error
    np.testing.assert_allclose(np.asarray(dq, np.float64), want_dq, rtol=2e-2, atol=2e-2 * np.abs(want_dq).max())
    np.testing.assert_allclose(dkv, want_dkv, rtol=2e-2, atol=2e-2 * np.abs(want_dkv).max())


def test_at_the_bench_size_it_compiles_with_float4_atomics():
    kernel = sparse_mla_bwd.CASES["sparse_mla_bwd"]["compile"]()
    src = kernel.get_kernel_source()
    body = src[src.index("__global__"):]
    assert body.count("tw::atomic_add_x4(") == 2 and "atomicAdd(" not in body
    assert "mask_shared" not in body  # the mask in registers, as the accumulator's columns
    assert compile_check(src, "sm_90a", "sparse_mla_bwd.cu").registers is not None
