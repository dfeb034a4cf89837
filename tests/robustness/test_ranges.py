"""Values out of range: constant indices outside their buffer, divisions by zero, loop trip counts
and literals no counter or type holds, shifts past a value's width. Each is a CompileError at the
line (a kernel never indexes out of bounds or divides by zero because of a constant it was given)."""

import pytest

from .harness import Bad, check_bad, check_unique, ids
from .test_syntax import kernel

PARAMS = ('A: T.Tensor((128,), "float32"), M: T.Tensor((64, 32), "float32"), '
          'I: T.Tensor((128,), "int32"), n: T.int32')
LOCALS = 's = T.alloc_shared((64, 64), "float32")\nv = T.alloc_local((4,), "int32")\nmbar = T.alloc_barrier([128, 128])\n'

CASES_ = [
    # constant indices
    ("global-past-end", "A[128] = 1.0  # <-", "index 128 is out of range for dimension 0 of A, which has 128"),
    ("global-negative", "A[-1] = 1.0  # <-", "index -1 into dimension 0 of A is negative"),
    ("global-load-past-end", "A[0] = A[1000]  # <-", "index 1000 is out of range for dimension 0 of A"),
    ("global-2d-row", "M[64, 0] = 1.0  # <-", "index 64 is out of range for dimension 0 of M, which has 64"),
    ("global-2d-col", "A[0] = M[3, 32]  # <-", "index 32 is out of range for dimension 1 of M, which has 32"),
    ("global-2d-negative-col", "M[0, -2] = 1.0  # <-", "index -2 into dimension 1 of M is negative"),
    ("shared-past-end", "s[64, 0] = 1.0  # <-", "index 64 is out of range for dimension 0 of s, which has 64"),
    ("shared-negative", "A[0] = s[0, -1]  # <-", "index -1 into dimension 1 of s is negative"),
    ("local-past-end", "v[4] = 1  # <-", "index 4 is out of range for dimension 0 of v, which has 4"),
    ("local-negative", "v[-4] = 1  # <-", "index -4 into dimension 0 of v is negative"),
    ("tile-origin-past-end", "T.copy(M[64, 0], s[0:1, 0:32])  # <-", "index 64 is out of range for dimension 0 of M"),
    ("slice-index-past-end", "T.copy(M[70, 0:32], s[0, 0:32])  # <-", "index 70 is out of range for dimension 0 of M"),
    ("barrier-slot-past-end", "T.barrier_arrive(mbar[2])  # <-", "index 2 is out of range for dimension 0 of barrier "
                                                               "mbar, which has 2"),
    ("barrier-slot-negative", "T.barrier_wait(mbar[-1], 0)  # <-", "index -1 into dimension 0 of barrier mbar is "
                                                                 "negative"),
    ("folded-index-past-end", "k = 60\nA[k * 3] = 1.0  # <-", "index 180 is out of range for dimension 0 of A"),
    # division by zero
    ("int-div-zero", "v[0] = I[0] // 0  # <-", "division by zero: `I\\[0\\] // 0`"),
    ("int-mod-zero", "v[0] = I[0] % 0  # <-", "division by zero: `I\\[0\\] % 0`"),
    ("float-div-zero", "A[0] = A[1] / 0.0  # <-", "division by zero"),
    ("float-div-int-zero", "A[0] = A[1] / 0  # <-", "division by zero"),
    ("python-div-zero", "A[128 // 0] = 1.0  # <-", "division by zero: `128 // 0`"),
    ("python-mod-zero", "x = 5 % 0  # <-", "division by zero: `5 % 0`"),
    ("augmented-div-zero", "x = T.alloc_var(T.int32, init=4)\nx[0] //= 0  # <-", "division by zero"),
    ("ceildiv-zero", "x = T.ceildiv(bx, 0)  # <-", "T.ceildiv: the divisor must be positive, got 0"),
    ("ceildiv-python-zero", "x = T.ceildiv(128, 0)  # <-", "T.ceildiv: the divisor must be positive, got 0"),
    ("ceildiv-negative", "x = T.ceildiv(bx, -4)  # <-", "T.ceildiv: the divisor must be positive, got -4"),
    ("div-by-folded-zero", "k = 4 - 4\nv[0] = I[0] // k  # <-", "division by zero"),
    # loop trip counts
    ("serial-past-int32", "for i in T.serial(2**31):  # <-\n    v[0] = i", "T.serial: the extent is 2147483648, more than"),
    ("serial-huge", "for i in T.serial(10**12):  # <-\n    v[0] = i", "more than a loop's 32-bit counter takes"),
    ("serial-negative", "for i in T.serial(-5):  # <-\n    v[0] = i", "T.serial: the extent is -5: a loop cannot run"),
    ("serial-backwards", "for i in T.serial(10, 2):  # <-\n    v[0] = i", "T.serial: the trip count is -8"),
    ("serial-start-past-int32", "for i in T.serial(2**31, 2**31 + 4):  # <-\n    v[0] = i",
     "T.serial: the start 2147483648 does not fit"),
    ("parallel-past-int32", "for i in T.Parallel(2**32):  # <-\n    A[0] = 1.0", "T.Parallel: extent 0 is 4294967296"),
    ("parallel-negative", "for i, j in T.Parallel(4, -4):  # <-\n    A[0] = 1.0", "T.Parallel: extent 1 is -4"),
    ("unroll-past-int32", "for i in T.unroll(2**31):  # <-\n    v[0] = i", "T.unroll: the extent is 2147483648"),
    ("pipelined-negative-stages", "for k in T.Pipelined(4, num_stages=-1):  # <-\n    v[0] = k",
     "num_stages must be a non-negative constant"),
    ("pipelined-order", "for k in T.Pipelined(4, num_stages=2, order=[0, 1]):  # <-\n    v[0] = k",
     "explicit order/stage/group are not supported"),
    ("pipelined-too-many-stages", 't = T.alloc_shared((64, 32), "float32")  # <-\n'
                                  "for k in T.Pipelined(8, num_stages=32):\n    T.copy(M[0, 0], t)\n"
                                  "    T.copy(t, s[0:64, 0:32])", "more than the 232448 bytes of sm_90a"),
    # literals
    ("int-literal-past-64-bits", "v[0] = 2**70  # <-", "does not fit in 64 bits"),
    ("literal-past-64-bits", "v[0] = 99999999999999999999999  # <-", "the integer literal 99999999999999999999999 does "
                                                                 "not fit in 64 bits"),
    ("int32-store-overflow", "v[0] = 2**31  # <-", "2147483648 does not fit int32"),
    ("float32-literal-overflow", "A[0] = 1e39  # <-", "1e\\+39 is beyond the largest finite float32"),
    ("dtype-call-literal", "x = T.uint8(-1)  # <-", "-1 does not fit uint8"),
    # shifts
    ("shift-past-width", "v[0] = I[0] << 32  # <-", "shift by 32: a 32-bit value shifts by 0 to 31 bits"),
    ("shift-negative", "v[0] = I[0] >> -1  # <-", "shift by -1"),
    ("shift-int64-past-width", "x = T.int64(1)\nv[0] = T.cast(x << 64, T.int32)  # <-", "shift by 64: a 64-bit value"),
    # parity
    ("parity-two", "T.barrier_wait(mbar[0], 2)  # <-", "the parity is 0 or 1 .*got 2"),
    ("parity-negative", "T.barrier_wait(mbar[0], -1)  # <-", "the parity is 0 or 1 .*got -1"),
    # barrier counts
    ("barrier-count-zero", "m = T.alloc_barrier(0)  # <-", "T.alloc_barrier: an arrive count must be between 1 and "
                                                          "1048575, got 0"),
    ("barrier-count-negative", "m = T.alloc_barrier([32, -1])  # <-", "an arrive count must be between 1 and "
                                                                     "1048575, got -1"),
    ("barrier-count-past-20-bits", "m = T.alloc_barrier(1 << 20)  # <-", "got 1048576"),
    ("barrier-count-empty", "m = T.alloc_barrier([])  # <-", "T.alloc_barrier needs at least one arrive count"),
    # other constant arguments
    ("leader-scope-48", 't = T.alloc_shared((128, 32), "float16")\nm = T.alloc_barrier(128)\n'
                        "T.tma_copy(H[0, 0], t, barrier=m, leader_scope_threads=48)  # <-",
     "leader_scope_threads must be a positive multiple of 32, got the int 48"),
    ("leader-scope-zero", 't = T.alloc_shared((128, 32), "float16")\nm = T.alloc_barrier(128)\n'
                          "T.tma_copy(H[0, 0], t, barrier=m, leader_scope_threads=0)  # <-",
     "leader_scope_threads must be a positive multiple of 32"),
    ("swizzle-panel-zero", "T.use_swizzle(panel_size=0)  # <-", "panel_size must be a positive constant, got the int 0"),
    ("swizzle-order", "T.use_swizzle(4, order='col')  # <-", "only order='row' is supported"),
]

HALF = ', H: T.Tensor((128, 32), "float16")'


def _case(name, body, match):
    return Bad(f"range-{name}", kernel(LOCALS + body, params=PARAMS + HALF), match)


CASES = check_unique([_case(*c) for c in CASES_])


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_values_out_of_range_are_named_at_their_line(case):
    check_bad(case)
