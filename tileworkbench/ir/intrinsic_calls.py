"""Calls of our CUDA headers' intrinsics, built and read back by name: the cp.async groups
(``tw/cp_async.h``), the wgmma groups and gemms (``tw/wgmma.h``) and the register hand-over
(``setmaxnreg``, ``tw/sync.h``), the TMA stores' issues (``tw/tma.h``). Each is an ``Evaluate(Call(name))`` that every pass,
the interpreters and the code generator take as it is; the readers below are the one place that
knows the names' form."""

from __future__ import annotations

import re

from .expr import Call, Raw
from .stmt import Evaluate

# cp.async's groups (tw/cp_async.h): ``Evaluate(Call(CP_ASYNC_COMMIT))`` closes the thread's open group
# of copies; :func:`cp_async_wait` waits until at most ``n`` of its groups are in flight, and
# :func:`cp_async_waited` reads ``n`` back from the call's name (the interpreters land the copies).
CP_ASYNC_COMMIT = "tw::cp_async_commit"
_CP_ASYNC_WAIT = re.compile(r"^tw::cp_async_wait<(\d+)>$")


def cp_async_wait(n: int) -> Evaluate:
    return Evaluate(Call(f"tw::cp_async_wait<{n}>", ()))


def cp_async_waited(name: str) -> int | None:
    """``n`` of a ``cp_async_wait(n)`` call's name, None for any other name."""
    return _count(_CP_ASYNC_WAIT, name)


# wgmma's groups (tw/wgmma.h): :func:`wgmma_wait` waits until at most ``n`` of the thread's wgmma
# groups are running (a gemm of ``in_flight`` None leaves its group running for the program's own
# ``T.wait_wgmma``); :func:`wgmma_waited` reads ``n`` back from the call's name.
_WGMMA_WAIT = re.compile(r"^tw::wgmma_wait<(\d+)>$")


def wgmma_wait(n: int) -> Evaluate:
    return Evaluate(Call(f"tw::wgmma_wait<{n}>", ()))


def wgmma_waited(name: str) -> int | None:
    """``n`` of a ``wgmma_wait(n)`` call's name, None for any other name."""
    return _count(_WGMMA_WAIT, name)


def _count(pattern: re.Pattern, name: str) -> int | None:
    m = pattern.match(name)
    return int(m.group(1)) if m else None


# ``setmaxnreg`` (tw/sync.h): the warpgroup running :func:`set_max_registers` grows (``increase``)
# or shrinks its threads' registers to ``count``; :func:`max_registers_set` reads the pair back.
_SETMAXNREG = re.compile(r"^tw::setmaxnreg_(inc|dec)<(\d+)>$")


def set_max_registers(count: int, increase: bool) -> Evaluate:
    return Evaluate(Call(f"tw::setmaxnreg_{'inc' if increase else 'dec'}<{count}>", ()))


def max_registers_set(name: str) -> tuple[int, bool] | None:
    """``(count, increase)`` of a ``set_max_registers`` call's name, None for any other name."""
    m = _SETMAXNREG.match(name)
    return (int(m.group(2)), m.group(1) == "inc") if m else None


# wgmma gemms (tw/wgmma.h): ``tw::wgmma_gemm_ss<M, N, K, ...>`` reads A and B from shared tiles,
# ``tw::wgmma_gemm_rs<M, N, K, ...>`` A from the threads' registers; the template arguments after
# the shape are the lowering's (``passes.lower_tile_ops``). :func:`wgmma_gemm_shape` reads back
# whether A is in registers, and M, N, K (the barrier check counts the operands' elements by them).
_WGMMA_GEMM = re.compile(r"^tw::wgmma_gemm_(ss|rs)<(\d+), (\d+), (\d+),")


def wgmma_gemm_name(a_registers: bool, m: int, n: int, k: int, rest: str) -> str:
    return f"tw::wgmma_gemm_{'rs' if a_registers else 'ss'}<{m}, {n}, {k}, {rest}>"


def wgmma_gemm_shape(name: str) -> tuple[bool, int, int, int] | None:
    """``(A in registers, M, N, K)`` of a :func:`wgmma_gemm_name`, None for any other name."""
    m = _WGMMA_GEMM.match(name)
    return (m.group(1) == "rs", int(m.group(2)), int(m.group(3)), int(m.group(4))) if m else None


# A barrier of the whole grid (``T.sync_grid``, tw/grid_sync.h): the kernel then takes the per-launch
# word it counts arrivals in as a parameter (``GRID_BARRIER_PARAM``) and is launched cooperatively.
# TMA stores (tw/tma.h): the calls that issue one, a plain store or a reduction into global memory
# (``ir.Copy(reduce=...)``); each reads its shared tile asynchronously until a store wait.
TMA_STORE = "tw::tma_store"
TMA_REDUCE_CALLS = {"add": "tw::tma_store_add"}
TMA_STORE_ISSUES = (TMA_STORE, *TMA_REDUCE_CALLS.values())


def is_tma_store_issue(name: str) -> bool:
    return name in TMA_STORE_ISSUES


GRID_SYNC = "tw::grid_sync"
GRID_BARRIER_PARAM = "tw_grid_barrier"


def grid_sync() -> Evaluate:
    return Evaluate(Call(GRID_SYNC, (Raw(GRID_BARRIER_PARAM),)))


def syncs_grid(func_body) -> bool:
    """Whether a kernel body holds a ``T.sync_grid``."""
    from .visitor import collect

    return any(c.name == GRID_SYNC for c in collect(func_body, Call))
