"""Global accesses outside ``T.Parallel`` are kept inside their tensors too (TileLang guards every
global access of a kernel): TileLang's DSA ``clean_and_maintain_logits`` masks each row of
``Logits`` in a ``T.serial`` loop over ``ceildiv(cols, 4096)`` chunks of 4096 columns, and so
stores far past the end of rows of 256 (it faulted on the H100 with an illegal address before).
The CUDA keeps the check; on the tile interpreter, which stops at any access outside a tensor,
the kernel runs and masks as numpy does."""

from __future__ import annotations

import numpy as np

import tileworkbench as tilelang
import tileworkbench.language as T


def masked_rows(target="auto", threads=128, block=1024):
    @tilelang.jit(target=target)
    def mask_outside(Logits, Starts, Ends):
        rows, cols = T.const("rows, cols")
        Logits: T.Tensor[[rows, cols], T.float32]
        Starts: T.Tensor[[rows], T.int32]
        Ends: T.Tensor[[rows], T.int32]
        with T.Kernel(rows, threads=threads) as bx:
            tx = T.get_thread_binding()
            start = Starts[bx]
            end = Ends[bx]
            for n in T.serial(T.ceildiv(cols, block)):
                for k in T.serial(block // threads):
                    idx = n * block + k * threads + tx
                    if idx < start or idx >= end:
                        Logits[bx, idx] = -T.infinity(T.float32)
    return mask_outside


def _inputs(rng, rows=8, cols=200):
    logits = rng.standard_normal((rows, cols)).astype(np.float32)
    starts = rng.integers(0, cols // 2, rows).astype(np.int32)
    ends = (starts + rng.integers(1, cols // 2, rows)).astype(np.int32)
    return logits, starts, ends


def masked(logits, starts, ends):
    want = logits.copy()
    cols = np.arange(logits.shape[1])[None, :]
    want[(cols < starts[:, None]) | (cols >= ends[:, None])] = -np.inf
    return want


def test_the_serial_loops_store_keeps_its_column_check():
    text = masked_rows().compile(rows=8, cols=200).get_kernel_source().split("// ---- kernel ----")[1]
    store = next(line for line in text.splitlines() if "Logits[" in line and "= (0.0f - " in line)
    guard = text[:text.index(store)].splitlines()[-1]
    assert "< 200" in guard, (guard, store)  # the column inside the row


def test_the_mask_on_the_interpreter_stays_inside_the_rows():
    logits, starts, ends = _inputs(np.random.default_rng(3))
    want = masked(logits, starts, ends)
    masked_rows(target="cpu")(logits, starts, ends)
    np.testing.assert_array_equal(logits, want)
