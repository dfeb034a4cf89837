"""FlashAttention forward, grouped-query attention and flash decoding: the prim_funcs the attention
benchmark (``python -m tileworkbench.bench attention``) and the attention notebook compile.

The kernels are the programs of ``examples/tilelang_programs`` (``attention.py``,
``flash_decoding.py``), written in our DSL the way a TileLang user writes them: ``T.gemm`` for
Q @ K^T with ``transpose_B``, the online softmax with ``T.reduce_max``, ``T.exp2`` and a running
sum, P @ V with P in registers, the output through shared memory. Those files are also what
TileLang 0.1.15 compiles in the side-by-side runs, so one source serves both compilers; this
module only gives them the benchmark's names and defaults. Everything that makes them fast is the
compiler's (docs/architecture.md): a producer warpgroup issuing K and V by TMA, consumer
warpgroups running wgmma with P as the register operand, ``setmaxnreg``, the causal loop cut at
the diagonal with its longest query blocks launched first.

Tensors are (batch, heads, seq, dim), fp16; the softmax is scaled by 1/sqrt(dim).
"""

from __future__ import annotations

from .tilelang_programs.attention import flash_attention
from .tilelang_programs.flash_decoding import flash_decoding

# TileLang's tuned configuration for its own example on the H100/H200 (the baseline).
DEFAULT_CONFIG = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256}
# Ours per head dimension, the fastest of scripts/experiments/attention_configs.py on the H200
# (docs/experiments.md, "Attention tile configurations"): with head dim 64 the K and V tiles are
# half as large, and 256 keys a tile halve the iterations (1 x 16 x 8192 x 64: 422 -> 473 TFLOP/s).
CONFIGS = {64: {**DEFAULT_CONFIG, "block_N": 256}}


def best_config(dim: int) -> dict:
    """Our configuration for this head dimension (TileLang's tuned one where we have no better)."""
    return dict(CONFIGS.get(dim, DEFAULT_CONFIG))
# One query a head over a long KV cache: 64-row tiles (the smallest wgmma M) over 128 keys at a
# time, one split per (batch, head) when those alone fill the GPU.
DECODE_CONFIG = {"block_M": 64, "block_N": 128, "num_stages": 2, "threads": 128}


def _checked_groups(heads: int, groups: int) -> None:
    if groups < 1 or heads % groups:
        raise ValueError(f"groups={groups} must divide heads={heads} (each KV head serves `groups` query heads)")


def mha_fwd(batch, heads, seq_len, dim, is_causal, block_M=128, block_N=128, num_stages=2, threads=256, groups=1):
    """The forward kernel's prim_func: inputs Q (batch, heads, seq_len, dim), K and V (batch,
    heads // groups, seq_len, dim); output O like Q (its fourth parameter: compile with
    ``out_idx=[3]``). ``groups > 1`` is grouped-query attention."""
    _checked_groups(heads, groups)
    return flash_attention.fn(batch, heads, seq_len, dim, is_causal, block_M=block_M, block_N=block_N,
                              num_stages=num_stages, threads=threads, groups=groups)


def gqa_fwd(batch, heads, kv_heads, seq_len, dim, is_causal, **config):
    """Grouped-query attention: ``heads`` query heads over ``kv_heads`` K/V heads."""
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"kv_heads={kv_heads} must divide heads={heads}")
    return mha_fwd(batch, heads, seq_len, dim, is_causal, groups=heads // kv_heads, **{**best_config(dim), **config})


def flash_decode(batch, heads, seqlen_q, seqlen_kv, dim, num_split=1, block_M=64, block_N=128, num_stages=2,
                 threads=128):
    """Split-KV decoding: block (query tile, batch x head, split) attends over ``seqlen_kv /
    num_split`` keys and writes its partial output and log-sum-exp; a second kernel in the same
    prim_func combines the splits. ``seqlen_kv`` a multiple of ``num_split * block_N``."""
    if seqlen_kv % (num_split * block_N):
        raise ValueError(f"seqlen_kv={seqlen_kv} must be a multiple of num_split * block_N = {num_split * block_N}")
    return flash_decoding.fn(batch, heads, seqlen_q, seqlen_kv, dim, num_split=num_split, block_M=block_M,
                             block_N=block_N, num_stages=num_stages, threads=threads)


# The pass configs the programs' own @jit decorators carry (fast math for exp2 and the divisions).
PASS_CONFIGS = dict(flash_attention.pass_configs or {})


def compile_mha(batch, heads, seq_len, dim, is_causal, groups=1, **config):
    """The compiled forward kernel (``kernel(q, k, v) -> o``), with the program's own pass configs."""
    from ..jit.kernel import compile as compile_kernel

    func = mha_fwd(batch, heads, seq_len, dim, is_causal, groups=groups, **{**best_config(dim), **config})
    return compile_kernel(func, out_idx=[3], pass_configs=PASS_CONFIGS)


def compile_decode(batch, heads, seqlen_q, seqlen_kv, dim, num_split=1, **config):
    """The compiled decoding kernels (``kernel(q, k, v) -> o``): the split pass and the combine."""
    from ..jit.kernel import compile as compile_kernel

    func = flash_decode(batch, heads, seqlen_q, seqlen_kv, dim, num_split=num_split, **{**DECODE_CONFIG, **config})
    return compile_kernel(func, out_idx=[3], pass_configs=dict(flash_decoding.pass_configs or {}))
