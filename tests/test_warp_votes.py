"""Warp votes (``T.any_sync``, ``T.all_sync``, ``T.ballot_sync``, ``T.ballot``, ``T.activemask``),
``T.sync_warp`` and ``T.shuffle_elect``: TileLang's warp-level calls, their CUDA, both interpreters
against numpy, and what is refused: a mask that leaves out the calling lane or names a lane that
does not run the call (undefined on the GPU, an error here), a float predicate, an election over a
group that is not whole warps."""

from __future__ import annotations

import numpy as np
import pytest

import tileworkbench as tw
from tileworkbench.backend.nvrtc import compile_check
from tileworkbench.errors import CompileError, KernelRuntimeError
from tileworkbench.interpreter.threads import ThreadKernel

from tests.tilelang_compat.kernel_files import main_with
from tests.warp_vote_programs import votes, votes_input, votes_reference


def _outputs():
    return [np.zeros(128, np.int32), np.zeros(128, np.uint64), np.zeros(128, np.uint64), np.zeros(128, np.int32)]


def test_the_votes_cuda():
    source = tw.lower(votes, target="sm_90a").kernel_source
    body = source[source.index('extern "C"'):]
    for call in ("__any_sync(", "__all_sync(", "tw::ballot_sync(", "__syncwarp(", "tw::activemask()",
                 "tw::shuffle_elect<64>()"):
        assert call in body
    compile_check(source, "sm_90a")


@pytest.mark.parametrize("level", ["tiles", "threads lowered", "threads codegen"])
def test_the_votes_match_numpy(level):
    x = votes_input(46)
    outs = _outputs()
    if level == "tiles":
        tw.compile(votes, target="cpu")(x, *outs)
    else:
        ThreadKernel.of(votes, stage=level.split()[1])(x, *outs)
    for got, want in zip(outs, votes_reference(x)):
        np.testing.assert_array_equal(got, want)


def _vote_kernel(tmp_path, statement: str):
    return main_with(tmp_path, "X: T.Tensor((128,), 'int32'), A: T.Tensor((128,), 'int32')",
                     ("tx = T.get_thread_binding()\n" + statement).replace("\n", "\n        "))


@pytest.mark.parametrize("statement, message", [
    # half of warp 0 runs a vote whose mask names the whole warp
    ("if tx < 16:\n    A[tx] = T.any_sync(X[tx] > 0)", r"mask 0xffffffff: lane 16 of warp 0 \(thread 16\) does not run it"),
    ("T.sync_warp(0x0000FFFF)", r"mask 0xffff in thread 16: the mask does not name the calling lane 16"),
])
@pytest.mark.parametrize("level", ["tiles", "threads"])
def test_a_vote_some_named_lanes_miss_is_an_error(tmp_path, statement, message, level):
    kernel = _vote_kernel(tmp_path, statement)
    run = tw.compile(kernel, target="cpu") if level == "tiles" else ThreadKernel.of(kernel)
    with pytest.raises(KernelRuntimeError, match=message):
        run(np.ones(128, np.int32), np.zeros(128, np.int32))


@pytest.mark.parametrize("statement, message", [
    ("A[tx] = T.any_sync(X[tx] * 0.5)", "T.any_sync: the predicate is a condition or an integer, not float32"),
    ("A[tx] = T.all_sync(X[tx] > 0, 0)", "T.all_sync: the mask names lanes 0-31 by bit"),
    ("A[tx] = T.if_then_else(T.shuffle_elect(48), 1, 0)", "thread_extent must be 0 or a multiple of 32"),
])
def test_misused_votes_are_refused_at_their_line(tmp_path, statement, message):
    with pytest.raises(CompileError, match=message) as info:
        _vote_kernel(tmp_path, statement)
    assert "kernel_file.py:8" in str(info.value)


@pytest.mark.parametrize("call", ["T.shfl_xor(X[i], 1)", "T.any_sync(X[i] > 0)", "T.ballot(X[i] > 0)",
                                  "T.if_then_else(T.shuffle_elect(32), 1, 0)"])
def test_warp_level_calls_inside_t_parallel_are_refused(tmp_path, call):
    """Lanes of a T.Parallel loop hold elements as its layout decides, and past the loop's end none:
    over 100 elements in runs of 4, lanes 25-31 of warp 0 would skip a full-warp shuffle (undefined,
    a hang at worst); the code used to compile."""
    kernel = _vote_kernel(tmp_path, f"for i in T.Parallel(100):\n    A[i] = {call}")
    with pytest.raises(CompileError, match="inside a T.Parallel loop: a warp shuffle, vote or election") as info:
        tw.lower(kernel, target="sm_90a")
    assert "kernel_file.py:9" in str(info.value)
