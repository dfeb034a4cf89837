"""Experiment: which of TileLang's own example programs build for sm_90a here, unchanged.

Each example file is imported as it is, its ``import tilelang`` answered by tileworkbench
(``tileworkbench.as_tilelang``'s finder: ``tilelang.*`` are tileworkbench's modules); on a machine without
torch, einops or fla those imports get stand-ins, enough for a module to define its kernels (the
examples use them to make inputs and references). Each case then builds one kernel at a small size
and lowers it for sm_90a; the table says which build and, for the others, the first line of what
stopped them. A file whose own run at import stops (it calls its kernel on a GPU tensor, a stand-in
here) keeps what it defined before that; a case building from it says where the import stopped. Nothing runs on a GPU (the CPU interpreter and the GPU tests check what the families
in ``examples/tilelang_programs`` compute).

    git -C <tilelang repo> archive HEAD examples | tar -x -C /tmp/tl
    PYTHONPATH=. python3 scripts/experiments/tilelang_examples.py /tmp/tl/examples [part of a file name ...] [--nvrtc]

With ``--nvrtc`` the kernels a case only lowers are compiled by NVRTC as well (CUDA it refuses is
a compiler bug: session 41 found three so).

docs/experiments.md, "TileLang's examples, unchanged", has a run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from pathlib import Path

import tileworkbench as tw
from tileworkbench.as_tilelang import TileLangAsTileworkbench

F16, BF, F32 = "float16", "bfloat16", "float32"


def _sink_cfg(m):
    """The sink backward builders call ``get_bwd_configs()``, which asks torch for the device's
    compute capability (the stand-in cannot answer): sm_90's answer."""
    m.get_bwd_configs = lambda: (128, 32, 2, 256)
    return m


def _nsa_main(m):
    """The NSA backward kernels read ``H`` (key/value heads) from the module's globals, which the
    file's ``if __name__ == "__main__":`` block sets (H = 1 there) and an import does not: the
    value its own run gives, for heads = groups = 16 as below."""
    m.H = 1
    return m


def _gdn_dt(m):
    T = m.T
    return dict(input_dtype=T.bfloat16, output_dtype=T.bfloat16, accum_dtype=T.float32, gate_dtype=T.float32,
                state_dtype=T.float32)


# (example file, what to build: a function of the loaded module giving a kernel, a prim_func or a
# kernel sequence)
CASES = [
    ("norm/rms_norm.py", lambda m: m.rms_norm.compile(M=1024, N=1024, blk_m=1)),
    ("norm/rms_norm.py", lambda m: m.rms_norm_splitk.compile(M=1024, N=1024, blk_m=1, blk_k=512)),
    ("norm/layernorm.py", lambda m: m._layernorm_fwd.fn(1024, 1024)),
    ("norm/layernorm.py", lambda m: m._layernorm_bwd.fn(1024, 1024)),
    ("elementwise/example_elementwise_add.py",
     lambda m: m.elementwise_add.compile(M=1024, N=1024, block_M=32, block_N=32, in_dtype="float32",
                                         out_dtype="float32", threads=128)),
    ("gemm_splitk/example_tilelang_gemm_splitk.py",
     lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, split_k=4)),
    ("topk/example_topk.py", lambda m: m.tl_topk.fn.compile(M=320, N=128, topk=6, blk_m=64)),  # not tuned
    ("flash_attention/example_mha_fwd_bshd.py",
     lambda m: m.flashattn.fn(1, 16, 1024, 128, False, block_M=128, block_N=128, num_stages=2, threads=256)),
    ("flash_attention/example_gqa_fwd_bshd.py",
     lambda m: m.flashattn.fn(1, 16, 1024, 128, True, groups=4, block_M=128, block_N=128, num_stages=2,
                              threads=256)),
    ("flash_attention/example_mha_bwd_bhsd.py", lambda m: m.flashattn_bwd.fn(1, 4, 512, 64, False, 64, 64)),
    ("flash_attention/example_mha_bwd_bhsd.py", lambda m: m.flashattn_bwd_postprocess.fn(1, 4, 512, 64)),
    ("flash_decoding/example_gqa_decode.py", lambda m: m.flashattn.fn(1, 32, 8, 8192, 128, 128, 64, 8, 2, 128)),
    ("deepseek_mla/example_mla_decode.py", lambda m: m.flashattn.fn(1, 128, 1, 1024, 512, 64, 64, 64, 1, 576 ** -0.5)),
    ("deepseek_mla/example_mla_decode.py", lambda m: m.flashattn.fn(1, 128, 1, 1024, 512, 64, 64, 64, 4, 576 ** -0.5)),
    ("deepseek_nsa/example_tilelang_nsa_fwd.py",
     lambda m: m.native_sparse_attention.compile(batch=1, heads=16, seq_len=1024, dim=64, is_causal=True,
                                                 groups=16, selected_blocks=8, block_size=32)),
    ("attention_sink/example_mha_sink_fwd_bhsd.py", lambda m: m.flashattn.fn(1, 8, 512, 512, 128)),
    ("attention_sink/example_mha_sink_fwd_bhsd.py", lambda m: m.flashattn.fn(1, 8, 512, 512, 128, window_size=128)),
    ("blocksparse_attention/example_tilelang_block_sparse_attn.py",
     lambda m: m.blocksparse_flashattn.fn(1, 8, 1024, 64, 16, True)),
    ("linear_attention/example_linear_attn_fwd.py", lambda m: m.tl_fused_chunk_fwd_kernel.fn(1, 512, 16, 128, 128)),
    ("linear_attention/example_retention_fwd.py", lambda m: m.chunk_retention_fwd_kernel.fn(1, 1024, 8, 128, 128)),
    ("gdn/example_chunk_o.py",
     lambda m: m.tilelang_chunk_fwd_o.fn(1, 1024, 8, 128, 128, "bfloat16", "bfloat16", "float32", "float32", 64,
                                         128 ** -0.5, True, 64, 64, 64, 128, 1)),
    ("grouped_gemm/example_grouped_gemm_fwd.py",
     lambda m: m.grouped_gemm.compile(K=256, N=256, batch_sizes_list=[64, 128, 100], block_M=64, block_N=64,
                                      block_K=64)),
    ("cast/example_per_token_cast_to_fp8.py", lambda m: m.per_token_cast_to_fp8.compile(M=1024, N=1024, blk_m=8)),
    ("convolution/example_convolution.py",
     lambda m: m.convolution.compile(N=2, C=64, H=16, W=16, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128,
                                     block_K=32, num_stages=2, threads=128)),
    ("gemv/example_gemv.py", lambda m: m.naive_gemv.compile(N=1024, K=1024, BLOCK_N=128, BLOCK_K=128)),
    ("gemm/example_gemm.py", lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128,
                                                        block_K=32)),
    ("gemm_fp8/example_tilelang_gemm_fp8.py",
     lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64,
                                dtype="float8_e4m3")),
    ("warp_specialize/example_warp_specialize_gemm_barrierpipe_stage2.py",
     lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64)),
    ("dynamic_shape/example_dynamic.py",
     lambda m: m.matmul_dynamic_mnk.compile(block_M=128, block_N=128, block_K=32, trans_A=False,
                                            trans_B=False, in_dtype="float16", out_dtype="float16",
                                            accum_dtype="float32", num_stages=3, threads=128)),
    ("hadamard_transform/example_hadamard.py", lambda m: m.hadamard.compile(b=64, n=1024, dtype="float16")),
    ("blocksparse_gemm/example_blocksparse_gemm.py",
     lambda m: m.blocksparse_matmul.fn.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32,
                                            num_stages=2, thread_num=128, enable_rasteration=True)),
    ("gemm_streamk/example_tilelang_gemm_streamk.py",
     lambda m: m.tl_matmul_streamk.compile(M=256, N=1024, K=512, streamk_tiles=8, block_M=128, block_N=128,
                                           block_K=32, trans_A=False, trans_B=True, dtypeAB="float16",
                                           dtypeC="float32", accum_dtype="float32", num_stages=2, threads=64)),
    ("minference/example_vertical_slash_sparse_attn.py",
     lambda m: m._tl_vs_sparse_flashattn.fn(1, 4, 1024, 64, 128, 256)),
    ("gdn/example_cumsum.py", lambda m: m.tilelang_chunk_local_cumsum_scalar.fn(1, 1024, 8)),
    ("dequantize_gemm/example_dequant_gemm_fp4_hopper.py",
     lambda m: m.matmul.fn(256, 256, 256, "float16", "float16", "float32")),

    # surveyed 2026-12-05: more of the example files, one kernel each
    ("gemm/example_gemm_advanced_autotune.py",
     lambda m: m.matmul.fn(1024, 1024, 1024, 128, 128, 32, 2, 128, True)),
    ("gemm/example_gemm_autotune.py",
     lambda m: m.matmul.fn(1024, 1024, 1024, 128, 128, 32, 2, 128, True)),
    ("gemm/example_gemm_autotune_early_stop.py",
     lambda m: m.matmul_early_stop.fn.fn(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=2,
                                         thread_num=128)),
    ("gemm/example_gemm_autotune_early_stop.py",  # API mode: AutoTuner.from_kernel's kernel factory (M=N=K=4096 globals)
     lambda m: m.make_kernel()(block_M=128, block_N=128, block_K=32, num_stages=2, thread_num=128)),
    ("gemm/example_gemm_autotune_pass_configs.py",
     lambda m: m.matmul_decorator.fn.fn(1024, 1024, 1024, block_M=128, block_N=128, block_K=32, num_stages=2,
                                        thread_num=128)),
    ("gemm/example_gemm_intrinsics.py",
     lambda m: m.tl_matmul.compile(M=1024, N=1024, K=1024, in_dtype=m.T.float16, out_dtype=m.T.float16,
                                   accum_dtype=m.T.float32)),
    ("gemm/example_gemm_persistent.py",
     lambda m: m.matmul_persistent.compile(M=1024, N=1024, K=1024, block_M=128, block_N=256, block_K=64,
                                           threads=256, num_stages=3)),
    ("gemm/example_gemm_persistent.py",
     lambda m: m.matmul_non_persistent.compile(M=1024, N=1024, K=1024, block_M=128, block_N=256, block_K=64,
                                               threads=256, num_stages=3)),
    ("gemm_fp8/example_tilelang_gemm_fp8_2xAcc.py",
     lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64,
                                dtype=m.T.float8_e4m3fn)),
    ("gemm_splitk/example_tilelang_gemm_splitk_vectorize_atomicadd.py",
     lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, split_k=4)),
    # warp_specialize/
    ("warp_specialize/example_warp_specialize_gemm_copy_0_gemm_1.py",
     lambda m: m.matmul_warp_specialize_copy_0_gemm_1.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128,
                                                              block_K=64)),
    ("warp_specialize/example_warp_specialize_gemm_copy_1_gemm_0.py",
     lambda m: m.matmul_warp_specialize_copy_1_gemm_0.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128,
                                                              block_K=64)),
    ("warp_specialize/example_warp_specialize_gemm_copy_gemm_0_1.py",
     lambda m: m.matmul_warp_specialize_copy_gemm_0_1.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128,
                                                              block_K=64)),
    ("warp_specialize/example_warp_specialize_gemm_softpipe_stage2.py",
     lambda m: m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64)),
    ("warp_specialize/example_warp_specialize_flashmla.py",
     lambda m: m.flashattn.fn(1, 64, 1, 1024, 512, 64, 64, 64, 1)),
    # misc
    ("online_softmax/online_softmax.py", lambda m: m.softmax_kernel.compile(BLOCK_M=1, BLOCK_N=8192)),
    ("quickstart.py", lambda m: m.matmul_relu_kernel),
    ("convolution/example_convolution_autotune.py",
     lambda m: m.convolution.fn.compile(N=2, C=64, H=16, W=16, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128,
                                        block_K=32, num_stages=2, thread_num=128, enable_rasteration=True)),
    ("rand/rand_uint.py", lambda m: m.tilelang_rand_1d.compile(M=1024, seed=42)),
    ("cast/example_group_per_split_token_cast_to_fp8.py",
     lambda m: m.group_per_split_token_cast_to_fp8.compile(M=1024, N=1024, BG=2, M_max=768, blk_m=8)),
    # linear_attention/
    ("linear_attention/example_linear_attn_bwd.py", lambda m: m.tl_fused_chunk_bwd_kernel.fn(1, 512, 16, 128, 128)),
    ("linear_attention/example_mamba_chunk_scan.py",
     lambda m: m.chunk_scan_fwd.fn.compile(batch=1, seqlen=1024, chunk_size=256, ngroups=1, nheads=8, headdim=64,
                                           dstate=128, block_M=64, block_N=64, block_K=64, block_Dstate=128,
                                           num_stages=2, threads=128)),
    ("linear_attention/example_mamba_chunk_state.py",
     lambda m: m.chunk_state_fwd.fn.compile(batch=1, seqlen=1024, chunk_size=256, ngroups=1, nheads=8, headdim=64,
                                            dstate=128, block_M=64, block_N=128, block_K=64, num_stages=4,
                                            threads=128)),
    # deepseek_v32/
    ("deepseek_v32/fp8_lighting_indexer.py",
     lambda m: m.mqa_attn_return_logits.compile(heads=32, index_dim=64)),
    ("deepseek_v32/fp8_lighting_indexer.py", lambda m: m.clean_logits_.compile()),
    ("deepseek_v32/sparse_mla_fwd.py",
     lambda m: m.sparse_mla_fwd.compile(heads=128, dim=512, tail_dim=64, topk=2048, kv_group=1)),
    ("deepseek_v32/sparse_mla_fwd_pipelined.py",
     lambda m: m.sparse_mla_fwd.compile(heads=128, dim=512, tail_dim=64, topk=2048, kv_stride=1, kv_group=1)),
    ("deepseek_v32/topk_selector.py", lambda m: m.tl_topk_impl.compile(topk=2048)),
    ("deepseek_v32/sparse_mla_bwd.py", lambda m: m.preprocess.compile(B=1, S=256, H=64, D=512)),
    ("deepseek_v32/sparse_mla_bwd.py",
     lambda m: m.bwd.compile(H=64, D=512, D_tail=64, topk=512, B=1, S=256, S_kv=512)),
    ("deepseek_v32/sparse_mla_bwd.py", lambda m: m.postprocess.compile(D=512, D_tail=64, B=1, S_kv=512)),
    # flash_attention
    ("flash_attention/example_gqa_bwd.py", lambda m: m.flashattn_fwd.fn(1, 16, 512, 128, 128, True, 128, 64, groups=4)),
    ("flash_attention/example_gqa_bwd.py",
     lambda m: m.flashattn_bwd_atomic_add.fn(1, 16, 512, 128, 128, True, 128, 32, threads=256, num_stages=2, groups=4)),
    ("flash_attention/example_gqa_bwd.py",
     lambda m: m.flashattn_bwd_split.fn(1, 16, 512, 128, 128, True, 128, 32, threads=256, num_stages=2, groups=4)),
    ("flash_attention/example_gqa_bwd_tma_reduce.py",
     lambda m: m.flashattn_fwd.fn(1, 16, 512, 128, 128, True, 128, 64, groups=4)),
    ("flash_attention/example_gqa_bwd_tma_reduce.py",
     lambda m: m.flashattn_bwd_atomic_add.fn(1, 16, 512, 128, 128, True, 128, 32, threads=256, num_stages=2, groups=4)),
    ("flash_attention/example_mha_bwd_bshd.py", lambda m: m.flashattn_fwd.fn(1, 4, 512, 64, False, 64, 64)),
    ("flash_attention/example_mha_bwd_bshd.py", lambda m: m.flashattn_bwd.fn(1, 4, 512, 64, False, 64, 64)),
    ("flash_attention/example_mha_fwd_bhsd.py",
     lambda m: m.flashattn.fn.fn(1, 4, 256, 512, 64, True, block_M=128, block_N=128, num_stages=2, threads=256)),
    ("flash_attention/example_mha_fwd_varlen.py",
     lambda m: m.flashattn.fn.fn(2, 1024, 1024, 8, 128, False, block_M=64, block_N=64, num_stages=1, threads=128)),
    ("flash_attention/example_gqa_fwd_varlen.py",
     lambda m: m.flashattn.fn(2, 4, 1024, 1024, 16, 128, True, block_M=128, block_N=128, num_stages=2, threads=256)),
    ("flash_attention/example_gqa_bwd_tma_reduce_varlen.py",
     lambda m: m.flashattn_fwd.fn(2, 1024, 1024, 512, 16, 512, 128, 128, True, 128, 64, groups=4)),
    ("flash_attention/example_gqa_bwd_tma_reduce_varlen.py",
     lambda m: m.flashattn_bwd_atomic_add.fn(2, 1024, 1024, 512, 16, 512, 128, 128, True, 128, 32, threads=256,
                                             num_stages=2, groups=4)),
    # flash_decoding
    ("flash_decoding/example_mha_inference.py", lambda m: m.flashattn.fn(1, 8, 128, 1024, 128, False, 128, 64)),
    ("flash_decoding/example_gqa_decode_varlen_logits.py",
     lambda m: m.flashattn.fn(1, 32, 8, 1024, 1024, 128, True)),
    # attention_sink
    ("attention_sink/example_gqa_sink_bwd_bhsd.py",
     lambda m: m.flashattn_fwd.fn(1, 16, 512, 128, groups=4, block_M=128, block_N=128, num_stages=2, threads=256)),
    ("attention_sink/example_gqa_sink_bwd_bhsd.py", lambda m: _sink_cfg(m).flashattn_bwd.fn(1, 16, 512, 128, 4)),
    ("attention_sink/example_mha_sink_bwd_bhsd.py",
     lambda m: m.flashattn_fwd.fn(1, 8, 512, 128, block_M=128, block_N=128, num_stages=2, threads=256)),
    ("attention_sink/example_mha_sink_bwd_bhsd.py", lambda m: _sink_cfg(m).flashattn_bwd.fn(1, 8, 512, 128)),
    ("attention_sink/example_gqa_sink_fwd_varlen.py",
     lambda m: m.flashattn_sink.fn(2, 4, 1024, 1024, 16, 128, True, window_size=None, block_M=128, block_N=128,
                                   num_stages=2, threads=256)),
    # block_causal_attention
    ("block_causal_attention/block_causal_attention.py",
     lambda m: m._fwd_template.fn(1, 2, 256, 64, 16, 64 ** -0.5, dtype=F16)),
    ("block_causal_attention/block_causal_attention.py",
     lambda m: m._bwd_dq_template.fn(1, 2, 256, 64, 16, 64 ** -0.5, dtype=F16)),
    ("block_causal_attention/block_causal_attention.py",
     lambda m: m._bwd_dkv_template.fn(1, 2, 256, 64, 16, 64 ** -0.5, dtype=F16)),
    ("block_causal_attention/block_causal_attention_varlen.py",
     lambda m: m._fwd_varlen_template.fn(3, 2, 64, 16, 64 ** -0.5, dtype=F16)),
    ("block_causal_attention/block_causal_attention_varlen.py",
     lambda m: m._bwd_dq_varlen_template.fn(3, 2, 64, 16, 64 ** -0.5, dtype=F16)),
    ("block_causal_attention/block_causal_attention_varlen.py",
     lambda m: m._bwd_dkv_varlen_template.fn(3, 2, 64, 16, 64 ** -0.5, dtype=F16)),
    # seer_attention
    ("seer_attention/block_sparse_attn_tilelang.py", lambda m: m.blocksparse_flashattn.fn(1, 2, 256, 256, 64, 4, True)),
    # deepseek_mla
    ("deepseek_mla/example_mla_decode_paged.py",
     lambda m: m.mla_decode_tilelang.fn(2, 128, 1, 1024, 512, 64, 64, 64, 1, 64, 576 ** -0.5)),
    ("deepseek_mla/example_mla_decode_paged.py",
     lambda m: m.mla_decode_tilelang.fn(2, 128, 1, 1024, 512, 64, 64, 64, 4, 64, 576 ** -0.5)),
    ("deepseek_mla/example_mla_decode_persistent.py", lambda m: m.flashattn.fn(2, 128, 1, 1024, 512, 64, 64, 64, 2)),
    ("deepseek_mla/example_mla_decode_ws.py",
     lambda m: m.flashattn.fn(1, 128, 1, 1024, 512, 64, 64, 64, 1, 576 ** -0.5)),
    # deepseek_nsa
    ("deepseek_nsa/example_tilelang_nsa_bwd.py",
     lambda m: _nsa_main(m).tilelang_kernel_fwd.compile(batch=1, seq_len=1024, heads=16, dim=64, is_causal=True, groups=16,
                                             selected_blocks=8, block_size=32)),
    ("deepseek_nsa/example_tilelang_nsa_bwd.py",
     lambda m: _nsa_main(m).tilelang_kernel_bwd_dqkv.compile(batch=1, seq_len=1024, heads=16, dim=64, is_causal=True, groups=16,
                                                  selected_blocks=8, block_size=32)),
    ("deepseek_nsa/example_tilelang_nsa_bwd.py",
     lambda m: _nsa_main(m).tilelang_kernel_bwd_dkv.compile(batch=1, seq_len=1024, heads=16, dim=64, is_causal=True, groups=16,
                                                 selected_blocks=8, block_size=32)),
    ("deepseek_nsa/example_tilelang_nsa_decode.py",
     lambda m: m.native_sparse_attention.compile(batch=1, seq_len=1024, heads=16, dim=64, groups=16,
                                                 selected_blocks=8, block_size=32)),
    ("deepseek_nsa/example_tilelang_nsa_fwd_varlen.py",
     lambda m: m.native_sparse_attention_varlen.compile(heads=16, c_seq_len=1024, batch=2, dim=64, is_causal=True,
                                                        groups=16, selected_blocks=8, block_size=32)),
    # gdn
    ("gdn/example_chunk_delta_bwd.py",
     lambda m: m.tilelang_chunk_gated_delta_rule_bwd_dhu.fn(1, 1024, 8, 128, 128, chunk_size=64, scale=128 ** -0.5,
                                                           block_DV=32, threads=128, num_stages=1, **_gdn_dt(m))),
    ("gdn/example_chunk_delta_h.py",
     lambda m: m.tilelang_chunk_gated_delta_rule_fwd_h.fn.fn(1, 1024, 8, 128, 128, chunk_size=64, use_g=True,
                                                            use_initial_state=False, store_final_state=True,
                                                            save_new_value=True, block_DK=32, block_DV=32,
                                                            threads=128, num_stages=2, **_gdn_dt(m))),
    ("gdn/example_chunk_o_bwd.py",
     lambda m: m.tilelang_chunk_o_bwd_dqkwg.fn(1, 1024, 8, 128, 128, chunk_size=64, scale=128 ** -0.5,
                                              block_DK=64, block_DV=64, threads=128, num_stages=0, **_gdn_dt(m))),
    ("gdn/example_chunk_scaled_dot_kkt.py",
     lambda m: m.tilelang_chunk_scaled_dot_kkt_fwd.fn(1, 1024, 8, 128, chunk_size=64, use_g=True, block_DK=64,
                                                     threads=128, num_stages=2)),
    ("gdn/example_wy_fast.py",
     lambda m: m.tilelang_recompute_w_u_fwd.fn(1, 1024, 8, 128, 128, m.T.bfloat16, m.T.bfloat16, m.T.float32,
                                              m.T.float32, 64, block_DK=64, block_DV=32, threads=128, num_stages=3)),
    ("gdn/example_wy_fast_bwd_split.py",
     lambda m: m.tilelang_wy_fast_bwd.fn(1, 1024, 8, 128, 128, chunk_size=64, block_DK=32, block_DV=32, threads=128,
                                        num_stages=0, **_gdn_dt(m))),
    ("gdn/example_wy_fast_bwd_split.py",
     lambda m: m.tilelang_wy_fast_bwd_split.fn(1, 1024, 8, 128, 128, chunk_size=64, block_DK=32, block_DV=32,
                                              threads=128, num_stages=0, **_gdn_dt(m))),
    # fusedmoe
    ("fusedmoe/example_fusedmoe_tilelang.py",
     lambda m: m.moe_forward_tilelang_shared.compile(dhidden=512, dexpert=256, num_tokens=256, dtype=m.T.float16,
                                                     block_token=128, block_dhidden=128, block_dexpert=128,
                                                     threads=256, num_stages=1)),
    ("fusedmoe/example_fusedmoe_tilelang.py",
     lambda m: m.moe_forward_tilelang_routed.compile(dhidden=512, dexpert=256, n_routed_experts=8, dtype=m.T.float16,
                                                     group_sum=1024, group_count=8, block_token=128,
                                                     block_dhidden=128, block_dexpert=128, threads=256,
                                                     num_stages=1)),
    # surveyed 2026-12-05 (third part): kda, DSA, DeepSeek v4 and mHC, sparse GQA decoding, int4, sparse and dequantising GEMMs
    ("kda/chunk_bwd_dqkwg.py",
     lambda m: m.chunk_bwd_dqkwg.fn.fn(1, 256, 2, 128, 128, 1.0, 64, F32, F32, block_DK=32, block_DV=32,
                                       threads=128, num_stages=2)),
    ("kda/chunk_bwd_dv.py",
     lambda m: m.tilelang_chunk_bwd_kernel_dv_local.fn.fn(1, 256, 2, 128, BF, BF, F32, 64, block_DV=128,
                                                          threads=128, num_stages=1)),
    ("kda/chunk_bwd_gla_dA.py",
     lambda m: m.tilelang_chunk_bwd_kernel_dv_local.fn.fn(1, 256, 2, 128, 1.0, BF, F32, BF, 64, block_DV=128,
                                                          threads=128, num_stages=1)),
    ("kda/chunk_bwd_intra.py",
     lambda m: m.tilelang_chunk_bwd_intra.fn.fn(1, 256, 2, 128, F32, F32, F32, F32, F32, 64, block_DK=32,
                                                threads=128, num_stages=0)),
    ("kda/chunk_delta_bwd.py",
     lambda m: m.tilelang_chunk_gated_delta_rule_bwd_dhu.fn.fn(1, 256, 2, 128, 128, BF, BF, F32, F32, F32, 64,
                                                               128 ** -0.5, True, True, True, block_DV=32,
                                                               threads=128, num_stages=1)),
    ("kda/chunk_delta_h_fwd.py",
     lambda m: m.tilelang_chunk_gated_delta_rule_fwd_h.fn.fn(1, 256, 2, 128, 128, "float16", "float16", F32, F32,
                                                             F32, 64, True, True, True, True, block_DK=32,
                                                             block_DV=32, threads=128, num_stages=2)),
    ("kda/chunk_inter_solve_fused.py",
     lambda m: m.tilelang_chunk_kda_fwd_inter_fused.fn(1, 256, 2, 128, BF, BF, F32, F32, 64, 16, 1.0)),
    ("kda/chunk_intra_token_parallel.py",
     lambda m: m.tilelang_chunk_kda_fwd_intra_token_parallel.fn.fn(1, 256, 2, 128, BF, BF, F32, F32, 64, 16,
                                                                   block_H=1, threads=128, num_stages=1)),
    ("kda/chunk_o.py",
     lambda m: m.tilelang_chunk_fwd_o.fn.fn(1, 256, 2, 128, 128, BF, BF, F32, F32, 64, 128 ** -0.5, 64,
                                            block_DK=32, block_DV=32, threads=128, num_stages=1)),
    ("kda/wy_fast.py",
     lambda m: m.tilelang_recompute_w_u_fwd.fn.fn(1, 256, 2, 128, 128, m.T.bfloat16, m.T.bfloat16, m.T.float32,
                                                  m.T.float32, 64, True, True, block_S=64, block_DK=64,
                                                  block_DV=32, threads=128, num_stages=3)),
    ("kda/wy_fast_bwd.py",
     lambda m: m.tilelang_wy_fast_bwd.fn.fn(1, 256, 2, 128, 128, F32, F32, F32, F32, F32, 64, block_DK=32,
                                            block_DV=32, threads=128, num_stages=0)),
    # dsa_sparse_finetune/
    ("dsa_sparse_finetune/indexer_bwd.py", lambda m: m.tl_indexer_bwd_impl.compile(heads=16, dim=128, topk=64)),
    ("dsa_sparse_finetune/indexer_topk_reducesum.py",
     lambda m: m.tl_indexer_topk_reducesum_impl.fn(heads=64, dim=128, topk=64, dtype=m.BF16)),
    ("dsa_sparse_finetune/sparse_mla_bwd.py", lambda m: m.preprocess.compile(H=64, D=512)),
    ("dsa_sparse_finetune/sparse_mla_bwd.py", lambda m: m.bwd.compile(H=64, D=512, D_tail=64, topk=512)),
    ("dsa_sparse_finetune/sparse_mla_bwd.py", lambda m: m.postprocess.compile(D=512, D_tail=64)),
    ("dsa_sparse_finetune/sparse_mla_fwd.py",
     lambda m: m.sparse_mla_fwd.compile(heads=64, dim=512, tail_dim=64, topk=512)),
    ("dsa_sparse_finetune/sparse_mla_topk_reducesum.py",
     lambda m: m.tl_sparse_mla_topk_reducesum_impl.compile(heads=64, dim=512, tail_dim=64, topk=512)),
    # dsa_hisa/
    ("dsa_hisa/block_sparse_mqa_fp8.py",
     lambda m: m.fp8_native_block_sparse_mqa_attn_return_logits.compile(seq_len=1024, seq_len_kv=4096)),
    ("dsa_hisa/clean_and_maintain_logits.py",
     lambda m: m.clean_and_maintain_logits_.compile(seq_len=1024, seq_len_kv=4096)),
    ("dsa_hisa/fp8_block_mean_pooling.py", lambda m: m.fp8_native_block_mean_pooling.compile(seq_len_k=4096)),
    ("dsa_hisa/pool_mqa_fp8.py",
     lambda m: m.pool_mqa_attn_return_logits_fp8.compile(seq_len=1024, seq_len_blocked_kv=32)),
    # deepseek_v4/
    ("deepseek_v4/act_quant.py", lambda m: m.fp8_quant_kernel.compile(N=1024)),
    ("deepseek_v4/act_quant.py", lambda m: m.fp4_quant_kernel.compile(N=1024)),
    ("deepseek_v4/sparse_attn_fwd_sm90.py",
     lambda m: m.sparse_attn_fwd.fn(1, 64, 256, 1024, 512, 256, dtype=m.T.bfloat16)),
    # gemm_int4/
    ("gemm_int4/example_tilelang_gemm_int4.py", lambda m: m.matmul_nt_int4(256, 256, 256, 128, 128, 64)),
    # blocksparse_attention/
    ("blocksparse_attention/example_tilelang_sparse_gqa_decode_paged.py",
     lambda m: m.flashattn.fn(1, 32, 8, 128, 128, block_N=64, block_H=64, page_block_size=256, num_stages=2,
                              threads=128, num_pages=64)),
    ("blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_indice.py",
     lambda m: m.flashattn.fn(1, 32, 8, 128, 128, block_N=64, block_H=64, num_stages=2, threads=128)),
    ("blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_mask.py",
     lambda m: m.flashattn.fn(1, 32, 8, 128, 128, block_N=64, block_H=64, num_stages=2, threads=128)),
    # deepseek_mhc/
    ("deepseek_mhc/example_mhc_bwd.py",
     lambda m: m.sinkhorn_bwd_implicit_cg.fn.compile(n_stream=16, tilesize=32, threads=128)),
    ("deepseek_mhc/example_mhc_post.py", lambda m: m.mhc_post_tilelang.compile(hc=4, hidden=2560)),
    ("deepseek_mhc/example_mhc_pre.py",
     lambda m: m.mhc_pre_big_fuse_tilelang.compile(hidden_size=1280, rms_eps=1e-6, hc_pre_eps=1e-6,
                                                   hc_sinkhorn_eps=1e-6, hc_post_mult_value=1.0, sinkhorn_repeat=10,
                                                   n_splits=1, hc_mult=4)),
    ("deepseek_mhc/example_mhc_pre.py",
     lambda m: m.mhc_pre_gemm_sqrsum_tilelang.compile(hc_mult3=24, hc_hidden_size=4 * 1280)),
    # gemm_sp/
    ("gemm_sp/example_gemm_sp.py",
     lambda m: m.matmul_sp_fp16.fn(1024, 1024, 1024, m.T.float, m.T.int16, 128, 128, 64, 2, 128,
                                   m.T.GemmWarpPolicy.Square, True)),
    # deepseek_deepgemm/
    ("deepseek_deepgemm/example_deepgemm_fp8_2xAcc.py",
     lambda m: m.tl_gemm.compile(M=1024, N=1024, K=1024, block_N=128, in_dtype=m.T.float8_e4m3fn,
                                 out_dtype=m.T.bfloat16, accum_dtype=m.T.float32)),
    # dequantize_gemm/
    ("dequantize_gemm/example_dequant_gemm_bf16_fp4_hopper.py",
     lambda m: m.matmul.fn.fn(256, 256, 256, m.T.bfloat16, m.T.bfloat16, m.T.float32, num_bits=4, fast_dequant=True,
                              block_M=256, block_N=128, block_K=128, num_stages=2, threads=256, split=1)),
    ("dequantize_gemm/example_dequant_gemm_bf16_mxfp4_hopper.py",
     lambda m: m.matmul.fn.fn(256, 256, 256, m.T.bfloat16, m.T.bfloat16, m.T.float32, num_bits=4, scale_size=32,
                              block_M=256, block_N=128, block_K=128, num_stages=2, threads=256, split=1,
                              fast_dequant=True, with_bias=False)),
    ("dequantize_gemm/example_dequant_gemm_fine_grained.py",
     lambda m: m.matmul.fn(256, 256, 256, 128, 128, 32, m.T.float16, m.T.float16, m.T.float16, 3, 128)),
    ("dequantize_gemm/example_dequant_gemm_fine_grained.py",
     lambda m: m.tl_matmul_with_ladder_weight_only_transform_block_reduce_int4(256, 1024, 512, m.T.float16,
                                                                               m.T.float16, m.T.float16, 3)),
    ("dequantize_gemm/example_dequant_gemm_w4a8.py",
     lambda m: m.matmul_int8xint4.fn.fn(128, 256, 256, m.T.int8, m.T.int32, m.T.int32, num_bits=4, block_M=64,
                                        block_N=64, block_K=128, num_stages=1, threads=128)),
    ("dequantize_gemm/example_dequant_gemv_fp16xint4.py",
     lambda m: m.dequantize_gemv.fn(1, 1024, 1024, m.T.float16, m.T.float16, m.T.float16, 4, m.T.int8, "uint", 4, 32,
                                    True, False, True, -1, False)),
    # added in session 41 (at the end: the hash set keys cases by their place in this list)
    ("deepseek_v32/sparse_mla_fwd_seesaw.py",
     lambda m: m.sparse_mla_fwd.compile(heads=128, dim=512, tail_dim=64, topk=2048, kv_stride=1, kv_group=1, CP0=True)),
    ("deepseek_v32/sparse_mla_fwd_seesaw.py",
     lambda m: m.sparse_mla_fwd.compile(heads=128, dim=512, tail_dim=64, topk=2048, kv_stride=1, kv_group=1,
                                        CP0=False)),
]


H100_SMS = 132  # what carver.arch.driver.get_num_sms() answers for the build on a machine without a GPU


class _StandInBase:
    """What a class deriving from a stand-in derives from (``torch.autograd.Function``'s ``apply``)."""

    @classmethod
    def apply(cls, *args, **kwargs):
        return _Anything()


class _Anything:
    """A stand-in value: any attribute or call gives another; a class to derive from."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __call__(self, *args, **kwargs):
        return _Anything()

    def __iter__(self):
        return iter(())

    def __getitem__(self, key):
        return _Anything()

    def __or__(self, other):  # `torch.dtype | None` in an annotation
        return _Anything()

    __ror__ = __or__

    def __mro_entries__(self, bases):
        return (_StandInBase,)

    def _arithmetic(self, other):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _arithmetic


class _Tensor(_Anything):
    """A stand-in tensor that knows its shape (``M, K = A.shape`` at stream-K's module level);
    arithmetic on it gives a tensor of the same shape."""

    def __init__(self, shape):
        self.shape = tuple(shape)


def _tensor_factory(*args, **kwargs):
    """``torch.rand(m, k, ...)`` (or ``torch.rand((m, k))``) as a stand-in tensor of that shape."""
    shape = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    return _Tensor(s for s in shape if isinstance(s, int))


_TENSOR_FACTORIES = ("rand", "randn", "zeros", "ones", "empty")


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The packages in ``stand_ins`` as stand-in modules (``tilelang`` itself is
    ``tileworkbench.as_tilelang``'s)."""

    def __init__(self, stand_ins):
        self.stand_ins = stand_ins

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.stand_ins:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__, module.__file__ = [], f"<stand-in for {spec.name}>"
        module.__version__ = "0"  # examples choose imports by it (NSA's fla)
        module.__getattr__ = lambda n: (_ for _ in ()).throw(AttributeError(n)) if n.startswith("__") else \
            _tensor_factory if spec.name == "torch" and n in _TENSOR_FACTORIES else _Anything()
        return module

    def exec_module(self, module):
        pass


def _install(examples: Path):
    stand_ins = {name for name in ("torch", "einops", "fla", "triton", "scipy", "tqdm")
                 if importlib.util.find_spec(name) is None}
    if "torch" in stand_ins:
        stand_ins.add("FLA_KDA")  # kda's reference package: torch at import
    sys.meta_path.insert(0, _StandIns(stand_ins))
    sys.meta_path.insert(0, TileLangAsTileworkbench())
    from tileworkbench.carver.arch import driver
    from tileworkbench.errors import NoDeviceError

    try:
        driver.get_num_sms()
    except NoDeviceError:  # no GPU here: the persistent examples size their grids for an H100's 132 SMs
        driver.get_num_sms = lambda device_id=0: H100_SMS


def _load(path: Path):
    sys.path.insert(0, str(path.parent))  # an example's own helper modules (reference.py ...)
    for helper in path.parent.glob("*.py"):  # another directory's of the same name (utils.py) loaded before
        sys.modules.pop(helper.stem, None)
    try:
        spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the file's own run at import (torch on a GPU, say)
            # what the file defined before it stopped stays in the module: a case may still build
            # its kernel from it (``main`` says so, and reports this error where it cannot)
            module.__dict__["__import_error__"] = exc
        return module
    finally:
        sys.path.remove(str(path.parent))


def _lines_of_cuda(built, nvrtc: bool = False) -> int:
    """Lines of CUDA the case's kernels take; with ``nvrtc``, the kernels the case only lowered
    (``@T.prim_func`` ones; ``@jit`` ones are compiled when built) are compiled by NVRTC too, so
    that CUDA NVRTC refuses stops the case (three miscompiles showed so, session 41)."""
    if hasattr(built, "get_kernel_source"):
        return len(built.get_kernel_source().splitlines())
    parts = getattr(built, "kernels", None) or [built]
    return sum(len(tw.lower(p, target="sm_90a", enable_device_compile=nvrtc).kernel_source.splitlines())
               for p in parts)


def _first_line(exc: Exception) -> str:
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first[:160]}"


def main(examples: Path, only: list | None = None, nvrtc: bool = False):
    _install(examples)
    print("| example | builds | what stopped it |")
    print("| --- | --- | --- |")
    built = 0
    cases = [(file, make) for file, make in CASES if not only or any(part in file for part in only)]
    for file, make in cases:
        stopped = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = _load(examples / file)
                stopped = module.__dict__.get("__import_error__")
                lines = _lines_of_cuda(make(module), nvrtc)
            note = f"the file's own run at import stopped: {_first_line(stopped)}" if stopped else ""
            print(f"| {file} | yes ({lines} lines of CUDA) | {note} |")
            built += 1
        except Exception as exc:  # the table reports it (the import's own error, where that came first)
            if stopped is not None and isinstance(exc, (AttributeError, NameError)):
                exc = stopped
            print(f"| {file} | no | {_first_line(exc)} |")
    print(f"\n{built} of {len(cases)} build")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--nvrtc"]
    main(Path(args[0] if args else "/tmp/tl/examples"), args[1:], nvrtc="--nvrtc" in sys.argv)
