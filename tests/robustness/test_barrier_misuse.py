"""Barriers used wrongly: as tiles or numbers, with missing or extra arguments, and the protocol
bugs the barrier checker catches before launch. Each is a CompileError at the line."""

import pytest

from .harness import Bad, check_bad, check_unique, ids
from .test_syntax import kernel

PARAMS = 'A: T.Tensor((512, 32), "float16"), B: T.Tensor((512, 32), "float16")'
HEAD = 's = T.alloc_shared((128, 32), "float16")\nmbar = T.alloc_barrier(128)\nbars = T.alloc_barrier([128, 128])\n'

MISUSE = [
    ("clear", "T.clear(mbar)  # <-", "T.clear destination must be a tile, but mbar is a barrier"),
    ("fill", "T.fill(bars, 0)  # <-", "T.fill destination must be a tile, but bars is a barrier"),
    ("fill-slot", "T.fill(bars[1], 0)  # <-", "T.fill destination must be a tile, but bars is a barrier"),
    ("copy-from", "T.copy(mbar, s)  # <-", "T.copy source must be a tile, but mbar is a barrier"),
    ("copy-to", "T.copy(A[0:128, 0:32], bars)  # <-", "T.copy destination must be a tile, but bars is a barrier"),
    ("gemm-operand", 'c = T.alloc_fragment((128, 128), "float32")\nT.gemm(mbar, s, c)  # <-',
     "T.gemm A must be a tile, but mbar is a barrier"),
    ("store", "mbar[0] = 1  # <-", "mbar is a barrier: it is set up by the compiler"),
    ("load-as-value", "A[0, 0] = mbar[0]  # <-", "the value stored in A must be a number, not the barrier slot mbar"),
    ("arithmetic", "x = bars[1] * 2  # <-", "the barrier slot bars\\[1\\] cannot be used as a number"),
    ("condition", "if mbar:  # <-\n    T.barrier_arrive(mbar)", "the barrier mbar is not a condition"),
    ("arrive-on-shared", "T.barrier_arrive(s)  # <-", "barrier must be a barrier from T.alloc_barrier .*not the shared "
                                                      "buffer s"),
    ("arrive-on-tensor", "T.barrier_arrive(A)  # <-", "not the global buffer A"),
    ("arrive-on-number", "T.barrier_arrive(3)  # <-", "not the int 3"),
    ("arrive-nothing", "T.barrier_arrive()  # <-", "T.barrier_arrive needs exactly one barrier"),
    ("arrive-twice-named", "T.barrier_arrive(mbar, mbarrier=mbar)  # <-", "needs exactly one barrier"),
    ("wait-no-parity", "T.barrier_wait(mbar)  # <-", "T.barrier_wait needs a parity"),
    ("wait-on-shared", "T.barrier_wait(s, 0)  # <-", "not the shared buffer s"),
    ("wait-parity-string", "T.barrier_wait(mbar, 'even')  # <-", "the parity must be a number, not the string 'even'"),
    ("wait-both-names", "T.barrier_wait(mbar, 0, mbarrier=mbar)  # <-", "needs exactly one barrier"),
    ("mbarrier-wait-parity-float", "T.mbarrier_wait_parity(mbar, 0.5)  # <-", "the parity must be an integer"),
    ("slot-two-indices", "T.barrier_arrive(bars[0, 1])  # <-", "barrier array bars takes one index"),
    ("slot-slice", "T.barrier_arrive(bars[0:1])  # <-", "barrier array bars takes one index"),
    ("slot-string", "T.barrier_arrive(bars['first'])  # <-", "the slot of barrier bars must be a number"),
    ("tma-no-barrier", "T.tma_copy(A[0, 0], s)  # <-", "a load from global to shared memory needs barrier="),
    ("tma-barrier-is-tile", "T.tma_copy(A[0, 0], s, barrier=s)  # <-", "barrier must be a barrier from T.alloc_barrier"),
    ("tma-store-with-barrier", "T.tma_copy(s, A[0, 0], barrier=mbar)  # <-", "a store \\(shared -> global\\) takes no "
                                                                          "barrier"),
    ("tma-unknown-keyword", "T.tma_copy(A[0, 0], s, barrier=mbar, eviction='first')  # <-",
     "T.tma_copy: unsupported keyword"),
    ("tma-fragment", 'f = T.alloc_fragment((128, 32), "float16")\nT.tma_copy(A[0, 0], f, barrier=mbar)  # <-',
     "T.tma_copy copies global -> shared or shared -> global, not global -> fragment"),
    ("unpacked-fp4-store", None, "only supports float4_e2m1_unpacked as an FP4 unpack load"),
]

# Protocol bugs: the simulation and the checker find them before anything runs.
PROTOCOL = [
    ("missing-arrive", "T.tma_copy(A[0, 0], s, barrier=mbar)\nT.barrier_wait(mbar, 0)  # <-\nT.copy(s, B[0, 0])",
     "barrier check \\(wait_never_completes"),
    ("wait-before-arrive", "T.tma_copy(A[0, 0], s, barrier=mbar)\nT.barrier_wait(mbar, 0)  # <-\n"
                           "T.barrier_arrive(mbar)\nT.copy(s, B[0, 0])",
     "the arrive at line 9, which the waiting threads only reach after"),
    ("fixed-parity", "for k in T.serial(4):\n    T.tma_copy(A[k * 128, 0], s, barrier=mbar)\n"
                     "    T.barrier_arrive(mbar)\n    T.barrier_wait(mbar, 0)  # <-\n    T.copy(s, B[k * 128, 0])",
     "barrier check"),
    ("slot-past-end-in-loop", "for k in T.serial(4):\n    T.tma_copy(A[k * 128, 0], s, barrier=bars[k])  # <-\n"
                              "    T.barrier_arrive(bars[k])\n    T.barrier_wait(bars[k], 0)\n    T.copy(s, B[k * 128, 0])",
     "barrier operation on slot 2 of bars, which has 2 slots"),
    ("read-before-wait", "T.tma_copy(A[0, 0], s, barrier=mbar)\nT.barrier_arrive(mbar)\nT.copy(s, B[0, 0])  # <-\n"
                         "T.barrier_wait(mbar, 0)", "barrier check"),
    # A block barrier is needed between the write and the read, but most threads skip the if (48
    # threads are no whole warps, so the if is no scope of its own with a barrier of its threads).
    ("write-read-in-divergent-if", "tx = T.get_thread_binding()\nif tx < 48:  # <-\n    s[tx, 0] = A[tx, 0]\n"
                                   "    B[tx, 0] = s[47 - tx, 0]",
     "whose condition \\(tx < 48\\) may differ between the threads of a block"),
]


def _misuse(name, body, match):
    if name == "unpacked-fp4-store":
        return Bad(f"barrier-{name}", kernel('u = T.alloc_shared((64, 128), "float4_e2m1_unpacked")\n'
                                             "T.tma_copy(u, P[0, 0])  # <-",
                                             params='P: T.Tensor((64, 128), "float4_e2m1fn")'), match)
    return Bad(f"barrier-{name}", kernel(HEAD + body, params=PARAMS), match)


CASES = check_unique(
    [_misuse(*m) for m in MISUSE]
    + [Bad(f"protocol-{n}", kernel(HEAD + b, params=PARAMS, head="with T.Kernel(1, threads=128) as bx:"), m)
       for n, b, m in PROTOCOL]
)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_barrier_misuse_is_named_at_its_line(case):
    check_bad(case)
