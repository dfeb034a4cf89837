"""The warp votes' kernel the CPU tests (tests/test_warp_votes.py) and the GPU test
(tests/gpu/test_warp_votes_gpu.py) both run, with its numpy reference."""

import numpy as np

import tileworkbench.language as T


@T.prim_func
def votes(X: T.Tensor((128,), "int32"), A: T.Tensor((128,), "int32"), L: T.Tensor((128,), "uint64"),
          M: T.Tensor((128,), "uint64"), E: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        v = X[tx]
        # any over the warp; all over the caller's half-warp (a mask per lane)
        A[tx] = T.any_sync(v > 3) * 2 + T.all_sync(v > -4, 0x0000FFFF if tx % 32 < 16 else 0xFFFF0000)
        L[tx] = T.ballot(v > 0) >> 1
        T.sync_warp()
        if tx % 2 == 0:
            M[tx] = T.activemask()
        E[tx] = T.if_then_else(T.shuffle_elect(64), 1, 0)


def votes_reference(x: np.ndarray) -> list:
    """What ``votes`` writes, lane by lane (A, L, M, E)."""
    lane, warp = np.arange(128) % 32, np.arange(128) // 32
    any_big = np.array([(x[w * 32:(w + 1) * 32] > 3).any() for w in warp])
    half = warp * 32 + (lane >= 16) * 16
    all_above = np.array([(x[h:h + 16] > -4).all() for h in half])
    ballot = np.array([sum(1 << n for n in range(32) if x[w * 32 + n] > 0) for w in warp], np.uint64)
    active = np.where(lane % 2 == 0, np.uint64(0x55555555), np.uint64(0))
    return [(any_big * 2 + all_above).astype(np.int32), ballot >> np.uint64(1), active,
            (np.arange(128) % 64 == 0).astype(np.int32)]


def votes_input(seed: int) -> np.ndarray:
    """Small integers: some warps' predicates all true, some mixed."""
    x = np.random.default_rng(seed).integers(-5, 6, 128).astype(np.int32)
    x[32:48] = 1  # warp 1's first half all above -4 and positive
    return x
