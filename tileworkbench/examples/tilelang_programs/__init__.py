"""TileLang programs in TileLang's current style, ported by us family by family (our code and words;
the semantics learnt from TileLang's documentation and examples).

Each module starts with the two lines a TileLang program starts with, the package renamed:

    import tileworkbench as tilelang
    import tileworkbench.language as T

and nothing else of ours, so the same file runs under TileLang 0.1.15 with those two lines put back
(``tileworkbench.bench.tilelang_programs`` loads it both ways and times the two side by side). Each
module's ``CASES`` names its benchmark problems: ``compile`` (no arguments, gives the kernel, or
a callable that launches several, listed in its ``kernels``),
``inputs(torch)`` (fresh random CUDA tensors), ``reference(*inputs)`` (torch in float32 or wider),
``rtol``/``atol`` (the example's own tolerances) and ``bytes`` or ``flops`` for the throughput.
A case with ``accumulates`` adds into its last input (split-K): it is zeroed before a checked call
(with ``returns_too`` the kernel's result is checked as well, before it: the sparse MLA backward's
dQ and the dKV it adds into);
one with ``postprocess`` has it applied to the kernel's result before the check (retention sums
its key-dimension parts), not timed.
"""

FAMILIES = ("elementwise", "gemm", "gemv", "norms", "softmax", "splitk", "attention", "gemm_fp8", "flash_decoding",
            "blocksparse_gemm", "topk", "streamk_gemm", "convolution",
            "retention", "hadamard", "attention_bwd", "warp_specialize",
            "dynamic_shape", "cumsum", "mla_decode", "fp8_indexer", "sparse_mla_bwd")
