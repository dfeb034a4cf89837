"""The fast Walsh-Hadamard transform of each row (TileLang's Hadamard example): ``B = A H_n`` with
``H_n`` the n x n Sylvester-Hadamard matrix, in the butterfly's three levels: within a thread's
registers, across the lanes of a warp (shuffles), and across the warps of the block through shared
memory (rows transposed so that the next butterflies are again a warp's)."""

import math

import tileworkbench as tilelang
import tileworkbench.language as T


def is_pow_of_2(n):
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0


@T.macro
def warp_butterflies(local, other, thread_elem, warp_size, rounds):
    tx = T.get_thread_binding(0)
    for i in T.serial(rounds):
        partner = tx ^ (1 << i)
        upper = (tx >> i) & 1  # which side of the butterfly this lane's elements sit on
        for j in T.Pipelined(thread_elem, num_stages=1):
            other[j] = T.tvm_warp_shuffle(0xFFFFFFFF, local[j], partner % warp_size, warp_size, warp_size)
            local[j] = T.if_then_else(upper == 0, local[j] + other[j], other[j] - local[j])


@T.macro
def transpose_through(local, shared, write_row, read_row, exchanges, per_exchange):
    """Each thread writes its elements to row ``write_row`` and takes those of row ``read_row``."""
    for r in T.serial(exchanges):
        at = per_exchange * r
        for j in T.vectorized(per_exchange):
            shared[write_row, j] = local[at + j]
        for j in T.vectorized(per_exchange):
            local[at + j] = shared[read_row, j]


@tilelang.jit
def hadamard(A, n, dtype):
    b = T.const("b")

    A: T.Tensor((b, n), dtype)
    B = T.empty((b, n), dtype)

    assert is_pow_of_2(n), "n must be a power of 2"
    assert 2 <= n <= 32768, "n must be in [2, 32768]"

    elem_size = {T.float32: 4, T.float16: 2, T.bfloat16: 2}[dtype]
    log_n = int(math.log2(n))
    threads = [0, 1, 1, 1, 2, 4, 8, 16, 32, 32, 128, 256, 256, 256, 256, 256][log_n]
    thread_elem = n // threads
    thread_rounds = int(math.log2(thread_elem))
    warps = 1 if threads <= 32 else threads // 32
    warp_size = threads // warps
    warp_rounds = int(math.log2(warp_size))
    block_rounds = int(math.log2(warps))
    # at most 32 KB of shared memory: a larger row goes through it in several rounds
    exchanges = n * elem_size // 32768 if n * elem_size > 32768 else 1
    per_exchange = thread_elem // exchanges if exchanges > 1 else thread_elem

    with T.Kernel(b, threads=threads) as bx:
        local = T.alloc_local((thread_elem,), dtype)
        shared = T.alloc_shared((threads, per_exchange), dtype)
        tx = T.get_thread_binding(0)

        for i in T.vectorized(thread_elem):
            local[i] = A[bx, tx * thread_elem + i]

        # butterflies within a thread's own elements
        for i in T.serial(thread_rounds):
            span = 1 << (i + 1)
            for j in T.serial(thread_elem // span):
                base = j * span
                for k in T.serial(span // 2):
                    local[base + k] = local[base + k] + local[base + k + span // 2]
                    local[base + k + span // 2] = local[base + k] - 2 * local[base + k + span // 2]

        other = T.alloc_local((thread_elem,), dtype)
        warp_butterflies(local, other, thread_elem, warp_size, warp_rounds)

        if block_rounds > 0:
            src = tx // warp_size * warp_size + tx % warp_size
            dst = tx % warps * warp_size + tx // warps
            # transpose (warp, lane) through shared memory, butterfly across warps, transpose back
            transpose_through(local, shared, src, dst, exchanges, per_exchange)
            warp_butterflies(local, other, thread_elem, warp_size, block_rounds)
            transpose_through(local, shared, dst, src, exchanges, per_exchange)

        for i in T.vectorized(thread_elem):
            B[bx, tx * thread_elem + i] = local[i]

    return B


def _walsh_hadamard(x):
    """x @ H_n in float64 by the butterfly itself (Sylvester's H_n = [[H, H], [H, -H]])."""
    y = x.double().clone()  # the butterflies below write in place
    rows, n = y.shape
    h = 1
    while h < n:
        y = y.reshape(rows, n // (2 * h), 2, h)
        a, c = y[:, :, 0].clone(), y[:, :, 1].clone()
        y[:, :, 0], y[:, :, 1] = a + c, a - c
        y = y.reshape(rows, n)
        h *= 2
    return y


ROWS, DIM = 64, 32768

CASES = {
    "hadamard": dict(
        compile=lambda: hadamard.compile(b=ROWS, n=DIM, dtype=T.float32),
        inputs=lambda torch: (torch.randn(ROWS, DIM, device="cuda"),),
        reference=_walsh_hadamard,
        rtol=1e-2, atol=1e-2, bytes=2 * ROWS * DIM * 4),
}
