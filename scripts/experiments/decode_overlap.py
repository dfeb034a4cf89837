"""Experiment: flash decoding's split kernel with and without the two-gemm overlap.

``warp_specialize`` overlaps a two-gemm loop of constant trip count (FlashAttention-3's
intra-warpgroup overlap, ``tw.gemm_overlap``): measured 1.04-1.07x on attention's loops of 32 to
128 iterations. TileLang's flash-decoding example (``examples/tilelang_programs/flash_decoding.py``)
runs 8 iterations a block (1024 keys of a split in 128-key tiles), where the peeled first
iteration and the drain are a larger share. This compiles the example's case both ways (the same
program, ``tw.gemm_overlap`` on and off), checks both against float32 on random inputs, then times
them in alternating rounds.

Run on the H200:

    PYTHONPATH=. python3 scripts/experiments/decode_overlap.py

Conclusion (H200, 2026-12-04, `89d4d92`; 1 x 32 x 128 queries over 8192 keys, 8 splits; median of 5
rounds, both correct): with the overlap 79.5 us a call, without it 88.8 us (0.895x). The overlap
pays even at 8 iterations a block, so the default stays; flash decoding's gap to TileLang is
elsewhere (docs/experiments.md, "Kernel by kernel").
"""

from _compare import alternating_medians


def main():
    import torch

    from tileworkbench.examples.tilelang_programs import flash_decoding as example
    from tileworkbench.jit.kernel import compile as compile_kernel

    args = (1, 32, 128, 8192, 128)
    config = dict(num_split=8, block_M=64, block_N=128, num_stages=2, threads=128)
    kernels = {}
    for label, overlap in (("overlap (default)", True), ("no overlap", False)):
        configs = dict(example.flash_decoding.pass_configs or {}, **{"tw.gemm_overlap": overlap})
        kernels[label] = compile_kernel(example.flash_decoding.fn(*args, **config), out_idx=[3], pass_configs=configs)
    torch.manual_seed(0)
    q = torch.randn(1, 32, 128, 128, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(1, 32, 8192, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    ref = example.decoding_reference(q, k, v)
    for label, kernel in kernels.items():
        torch.testing.assert_close(kernel(q, k, v).float(), ref, rtol=1e-2, atol=1e-2)
    medians = alternating_medians({label: (lambda f=kernel: f(q, k, v)) for label, kernel in kernels.items()})
    base = medians["overlap (default)"]
    for label, ms in medians.items():
        print(f"{label}: {ms * 1000:.1f} us, {base / ms:.3f}x the default")


if __name__ == "__main__":
    main()
