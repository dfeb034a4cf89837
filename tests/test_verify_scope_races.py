"""verify_scope_races: a ``T.ws`` scope's read of a shared tile that a scope beside it writes and
then arrives on no barrier is refused at compile time (TileLang's MLA decode example reads
``sum_exp_shared`` so); reads the barriers can order, or that touch other elements, are not. The
kernels of ``row_scales`` are the interpreter's race tests' (the same three orders)."""

from __future__ import annotations

import inspect
import warnings

import pytest

import tileworkbench as tw
import tileworkbench.language as T
from tileworkbench.errors import CompileError, TileworkbenchWarning

from tests.interpreter.test_races_between_scopes import row_scales

ROWS, COLS = 64, 64
F32 = "float32"


def read_first():
    """Warpgroup 1 reads the scales, then arrives on ``read``; warpgroup 0 waits on it before it
    writes them and arrives on nothing after: the read is ordered before the write."""

    @T.prim_func
    def main(X: T.Tensor((ROWS, COLS), F32), Out: T.Tensor((ROWS, COLS), F32)):
        with T.Kernel(1, threads=256):
            row_scale = T.alloc_shared((ROWS,), F32)
            read = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx < 128:
                T.barrier_wait(read, 0)
                for i in T.Parallel(ROWS):
                    row_scale[i] = X[i, 0]
            else:
                for i, j in T.Parallel(ROWS, COLS):
                    Out[i, j] = X[i, j] * row_scale[i]
                T.barrier_arrive(read)

    return main


def halves():
    """Warpgroup 0 fills the left half of a tile and never arrives after; warpgroup 1 copies out
    the right half, which nobody writes: apart, so no race."""

    @T.prim_func
    def main(Out: T.Tensor((ROWS, COLS), F32)):
        with T.Kernel(1, threads=256):
            tile = T.alloc_shared((ROWS, COLS), F32)
            ready = T.alloc_barrier(arrive_count=128)
            tx = T.get_thread_binding()
            if tx < 128:
                T.barrier_arrive(ready)
                T.fill(tile[:, 0:32], 1.0)
            else:
                T.barrier_wait(ready, 0)
                T.copy(tile[:, 32:64], Out[:, 32:64])

    return main


def _read_line() -> int:
    source, first = inspect.getsourcelines(row_scales)
    return first + next(i for i, text in enumerate(source) if "/ scales[i]" in text)


def test_a_read_of_what_a_scope_writes_after_its_last_arrival_is_refused_at_the_read():
    with pytest.raises(CompileError) as err:
        tw.lower(row_scales("unordered"), target="sm_90a")
    message = str(err.value)
    assert "race: scales is read here by threads 128-255 while threads 0-127 write it at line" in message
    assert "arrive on no barrier after that write" in message
    assert err.value.loc.line == _read_line()


@pytest.mark.parametrize("kernel", [row_scales("direct"), row_scales("third"), read_first()],
                         ids=["arrive-then-wait", "through-a-third-scope", "read-ordered-first"])
def test_reads_the_barriers_can_order_compile(kernel):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileworkbenchWarning)
        tw.lower(kernel, target="sm_90a")


def test_a_read_of_other_elements_than_the_write_compiles():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileworkbenchWarning)
        tw.lower(halves(), target="sm_90a")


def test_the_barrier_check_config_makes_it_a_warning_or_skips_it():
    with pytest.warns(TileworkbenchWarning, match="race: scales is read here"):
        tw.lower(row_scales("unordered"), target="sm_90a", pass_configs={"tw.barrier_check": "warn"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileworkbenchWarning)
        tw.lower(row_scales("unordered"), target="sm_90a", pass_configs={"tw.barrier_check": "off"})
