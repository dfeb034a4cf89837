"""Property: a fragment read at rows shifted by a serial loop's variable (``acc[i + s * part, j]``, as
DeepSeek's sparse MLA backward stores its accumulator a part at a time), at random sizes, thread
counts, nest extents and guards, either runs (``rebase_shifted_nests``) and matches numpy on both
interpreters (the thread level runs the final lowered code: layouts, partitioned loops, guards), or
is refused with a CompileError where a read may leave the fragment; never a wrong number or an
internal error."""

import random

import numpy as np
import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError
from tileworkbench.interpreter.threads import run_at_thread_level


def _program(rows, cols, split, extent, guarded, threads):
    part = rows // split

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), Out: T.Tensor((rows, cols), "float32")):
        with T.Kernel(1, threads=threads):
            acc = T.alloc_fragment((rows, cols), "float32")
            stage = T.alloc_shared((part, cols), "float32")
            T.copy(A, acc)
            for i, j in T.Parallel(rows, cols):
                acc[i, j] = acc[i, j] * 2.0
            for s in range(split):
                if guarded:
                    for i, j in T.Parallel(extent, cols):
                        if i < part:
                            stage[i, j] = acc[i + s * part, j] + 1.0
                else:
                    for i, j in T.Parallel(extent, cols):
                        stage[i % part, j] = acc[i + s * part, j] + 1.0
                for i, j in T.Parallel(part, cols):
                    Out[i + s * part, j] = stage[i, j]

    return main


def _draw(rng: random.Random):
    rows, split = rng.choice([32, 64]), rng.choice([2, 4])
    extent = rng.choice([rows // split, rows])
    return rows, rng.choice([8, 16, 32]), split, extent, rng.random() < 0.6, rng.choice([64, 128])


DRAWS = [_draw(random.Random(seed)) for seed in range(12)] + [(64, 16, 2, 64, True, 128), (64, 16, 4, 16, False, 128)]


@pytest.mark.parametrize("config", DRAWS, ids=lambda c: "-".join(map(str, c)))
def test_shifted_rows_run_right_or_are_refused(config):
    rows, cols, split, extent, guarded, threads = config
    inside = guarded or extent == rows // split  # every read provably inside the fragment
    try:
        program = _program(*config)
        tw.lower(program, target="sm_90a")
    except CompileError as err:
        assert not inside, f"refused where every read is inside: {err}"
        assert "fragment acc" in str(err)
        return
    assert inside, "a read that may leave the fragment compiled"
    a = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    for run in (lambda f, *x: tw.compile(f, target="cpu")(*x), run_at_thread_level):
        out = np.full((rows, cols), np.nan, np.float32)
        run(program, a, out)
        np.testing.assert_allclose(out, a * 2.0 + 1.0, rtol=1e-6)
