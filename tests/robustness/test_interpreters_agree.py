"""Property: a random small kernel of the DSL's grammar (``grammar.py``) that lowers computes the same
on both CPU interpreters: the tile-level one (the IR after the tile passes, TileLang's semantics)
and the thread-level one (``interpreter.threads``: the final lowered IR, thread by thread). A
difference, or a read or write out of bounds at the thread level, is a lowering bug. Either may
refuse (what it does not run) and the thread level reports races between blocks (most grammar
programs have every block write the same tensor); those say nothing about the compiler. This
comparison found a fill of a global region past its tensor's end writing out of bounds, and the
tile-level interpreter storing zeros where a copy between global tensors reads outside its source."""

import os
import re
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings

import tileworkbench as tw
from tileworkbench.errors import CompileError, KernelRuntimeError
from tileworkbench.interpreter.threads import ThreadKernel
from tileworkbench.interpreter.values import Unsupported, storage_dtype
from tileworkbench.ir import nodes as ir

from .grammar import kernels
from .harness import Bad, run

EXAMPLES = int(os.environ.get("TW_AGREE_EXAMPLES", 400))  # more for a longer search
RANDOM = os.environ.get("TW_AGREE_RANDOM") == "1"  # new programs each run (CI keeps the same ones)
MAX_ELEMENTS = 1 << 24  # a tensor larger than this (the grammar writes 2**40) is not allocated to run


def _arguments(func, rng) -> list:
    out = []
    for p in func.params:
        if not isinstance(p, ir.Buffer):
            out.append(3)
        elif p.dtype.is_float:
            out.append(rng.standard_normal(tuple(ir.const_int(s) for s in p.shape)).astype(np.float32)
                       .astype(storage_dtype(p.dtype)))
        else:
            out.append(rng.integers(-5, 6, tuple(ir.const_int(s) for s in p.shape)).astype(storage_dtype(p.dtype)))
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = a.astype(np.float64), b.astype(np.float64)
    equal = (a == b) | (np.isnan(a) & np.isnan(b))
    scale = max(1.0, float(np.abs(np.nan_to_num(a, posinf=0, neginf=0)).max(initial=0)))
    return bool((equal | (np.abs(a - b) <= 1e-2 * scale)).all())  # float32 sums in another order


def test_random_kernels_compute_the_same_on_both_interpreters():
    outcomes = {"agree": 0}

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
              suppress_health_check=list(HealthCheck))
    @given(kernels())
    def check(program):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                art = run(Bad("agree", program.source, ""))
                threads = ThreadKernel.of(art)
                tiles = tw.compile(art.source_func, target="cpu")
            except (CompileError, Unsupported):
                return
            if any(isinstance(p, ir.Buffer) and np.prod([ir.const_int(s) for s in p.shape], dtype=float) > MAX_ELEMENTS
                   for p in art.func.params):
                return
            first = _arguments(art.func, np.random.default_rng(1))
            second = [x.copy() if isinstance(x, np.ndarray) else x for x in first]
            try:
                tiles(*first)
            except KernelRuntimeError:
                return
            try:
                threads(*second)
            except KernelRuntimeError as err:
                # programs with no defined answer: blocks writing one element, or one statement every
                # thread of the block runs reading and writing one shared element (s[0] = s[0] + 1)
                message = str(err)
                lines = re.findall(r"at line (\d+)", message)
                one_statement = "shared-memory race" in message and len(set(lines)) == 1
                assert "race between blocks" in message or one_statement, f"{err}\n{program.source}"
                return
            for a, b in zip(first, second):
                if isinstance(a, np.ndarray):
                    assert _same(a, b), f"the interpreters differ on:\n{program.source}"
            outcomes["agree"] += 1

    check()
    assert outcomes["agree"] > EXAMPLES // 10, outcomes  # enough programs compared for the property to say something
