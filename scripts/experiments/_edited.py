"""For the experiments: a compiled kernel run with a device source edited by hand."""

import re

from tileworkbench.jit.kernel import Kernel


def edited_kernel(kernel, device_source: str, smem_bytes: int | None = None, out_idx=(2,),
                  host_source: str | None = None) -> Kernel:
    """``kernel`` (from ``tw.compile``) with ``device_source`` instead of its own (NVRTC compiles it
    when loaded); ``smem_bytes`` when the edit needs a different amount of shared memory,
    ``host_source`` when it needs a different launcher (a tensor map's box, say)."""
    record = {k: v for k, v in kernel.record.items() if "cubin" not in k}
    record["device_source"] = device_source
    if host_source is not None:
        record["host_source"] = host_source
    if smem_bytes is not None:
        record["smem_bytes"] = smem_bytes
        record["host_source"] = re.sub(r"SMEM_BYTES = \d+", f"SMEM_BYTES = {smem_bytes}", record["host_source"])
    return Kernel(record, list(out_idx))



def causal_indices(torch, S: int, SKV: int, HKV: int, topk: int):
    """DeepSeek v3.2's sparse MLA scripts' indices (batch 1): for each query position ``t`` up to
    ``topk`` distinct earlier keys in random order, ``SKV`` (out of range) in the rest."""
    indices = torch.full((1, S, HKV, topk), SKV, dtype=torch.int32, device="cuda")
    for t in range(S):
        chosen = torch.randperm(max(1, t))[:topk]
        indices[0, t, 0, :len(chosen)] = chosen
    return indices


def v32_sparse_mla_bwd(examples):
    """DeepSeek v3.2's sparse MLA backward on its script's inputs (``EXAMPLES/deepseek_v32``,
    ``tilelang`` meaning tileworkbench): ``(module, compile_args, call_args, dkv)``, the forward
    run first for its output and log-sum-exp; ``module.bwd.compile(*compile_args)`` builds the
    kernel, which is called with ``call_args`` (adding into ``dkv``, returning dQ)."""
    import sys
    from pathlib import Path

    import torch

    import tilelang_examples as te

    examples = Path(examples)
    te._install(examples)
    sys.path.insert(0, str(examples / "deepseek_v32"))
    m = te._load(examples / "deepseek_v32" / "sparse_mla_bwd.py")
    fwd = te._load(examples / "deepseek_v32" / "sparse_mla_fwd.py")
    B, S, SKV, H, HKV, DQKV, DV, topk = 1, 4096, 8192, 64, 1, 576, 512, 2048  # the script's defaults
    torch.manual_seed(0)
    q = torch.randn((B, S, H, DQKV), dtype=torch.bfloat16, device="cuda")
    kv = torch.randn((B, SKV, HKV, DQKV), dtype=torch.bfloat16, device="cuda")
    do = torch.randn((B, S, H, DV), dtype=torch.bfloat16, device="cuda")
    indices = causal_indices(torch, S, SKV, HKV, topk)
    out, lse = fwd.sparse_mla_fwd_interface(q, kv, indices)
    delta = m.preprocess(out, do)
    dkv = torch.zeros_like(kv, dtype=torch.float32)
    call_args = (q, kv, do, indices, lse, delta, dkv)
    return m, call_args + (H, DV, DQKV - DV, topk, HKV, None, True), call_args, dkv
