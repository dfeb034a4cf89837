"""How the protocol checker follows statements outside the barrier protocol: it replays each
statement that touches shared memory (and block barriers, and TMA stores) for the active threads
and hands the accesses to its data rules. :class:`StatementScan` is that part of the checker."""

from __future__ import annotations

import re

import numpy as np

from ..ir import nodes as ir
from . import program
from .evaluate import Unknown
from .footprints import call_of, is_shared, subexprs
from .protocol import ELECT
from .schedule import enter_scope

_VEC = re.compile(r"^tw::(copy_vec|cp_async|zero_vec)<(\d+)>$")
# Stores of 16-bit and FP8 results and the elements each thread's address covers: store_pair writes the
# thread's two neighbours; stmatrix writes, for the 8x8 matrix row a lane addresses, the row's 8
# elements (held by four other lanes, but a warp's lanes together write exactly those rows).
_RESULT_STORES = {"tw::store_pair": 2, "tw::store_pair_e4m3": 2, "tw::store_pair_e5m2": 2, "tw::store_matrix_x4": 8}


class StatementScan:
    """Needs the checker's ``env``, ``sim``, ``reads``, ``seen``, ``stores``, its footprints and
    data rules."""

    def scan(self, stmt, active, frame):
        self.visit(stmt, active, frame, frame.line)

    def visit(self, s, active, frame, line):
        if s is None or not active.any():
            return
        line = s.loc.line if getattr(s, "loc", None) is not None else line
        if isinstance(s, ir.SeqStmt):
            for c in s.stmts:
                self.visit(c, active, frame, line)
        elif isinstance(s, ir.SyncThreads):
            if s.threads is None:  # where a block barrier stands among the events (the diagnosis)
                self.block_syncs.append((len(self.sim.events), line))
            self.sync()
        elif isinstance(s, (ir.LetStmt, ir.Assign)):
            self.reads_in(s, s.value, active, frame, line)
            value = self.value(s.value)
            self.env[s.var] = Unknown if value is None else value
        elif isinstance(s, ir.For):
            self.reads_in(s, s.extent, active, frame, line)
            passes = 2 if self.issues_stores(s) and ir.const_int(s.extent) != 1 else 1
            for _ in range(passes):  # a second pass meets what the first iteration left behind
                self.visit(s.body, active, frame, line)
        elif isinstance(s, ir.While):  # an unknown number of iterations: twice meets what one leaves
            self.reads_in(s, s.cond, active, frame, line)
            for _ in range(2):
                self.visit(s.body, active, frame, line)
        elif isinstance(s, ir.ThreadScope):
            self.visit(s.body, enter_scope(s, self.sim.tid, self.env, active), frame, line)
        elif isinstance(s, ir.IfThenElse):
            self.reads_in(s, s.cond, active, frame, line)
            taken = self.condition(s.cond, active)
            self.visit(s.then_body, active if taken is None else taken, frame, line)
            self.visit(s.else_body, active if taken is None else active & ~taken, frame, line)
        elif isinstance(s, ir.BufferStore):
            self.reads_in(s, s.value, active, frame, line)
            if is_shared(s.buffer):
                lo, hi = self.span(s.buffer, s.indices)
                self.write(s, s.buffer, lo, hi, active, frame, line)
        elif isinstance(s, ir.Evaluate) and isinstance(s.call, ir.Call):
            self.call(s, s.call, active, frame, line)

    def issues_stores(self, loop) -> bool:
        if id(loop) not in self._store_loops:
            self._store_loops[id(loop)] = any(
                (c := call_of(x)) is not None and ir.is_tma_store_issue(c.name) for x in program.preorder(loop))
        return self._store_loops[id(loop)]

    def condition(self, cond, active):
        """Threads that take the branch, or None when the condition cannot be evaluated."""
        if isinstance(cond, ir.Call):
            m = ELECT.match(cond.name)
            if m:
                return self.sim.elect(int(m.group(1)), active)
        v = self.value(cond)
        if v is None:
            return None
        if isinstance(v, np.ndarray):
            return active & v.astype(bool)
        return active.copy() if v else np.zeros_like(active)

    def reads_in(self, stmt, expr, who, frame, line):
        for e in subexprs(expr, into_addresses=False):
            if isinstance(e, ir.BufferLoad) and is_shared(e.buffer):
                lo, hi = self.span(e.buffer, e.indices)
                self.read(stmt, e.buffer, lo, hi, who, frame, line, "a thread")

    def call(self, stmt, call, who, frame, line):
        name = call.name
        if name.startswith("tw::tma_store_wait"):
            self.stores = [st for st in self.stores if not (st.issuer & who).any()]
            return
        addresses = [a.args[0] for a in call.args
                     if isinstance(a, ir.Call) and a.name == "address_of" and isinstance(a.args[0], ir.BufferLoad)]
        for a in call.args:
            if isinstance(a, ir.Expr) and not (isinstance(a, ir.Call) and a.name == "address_of"):
                self.reads_in(stmt, a, who, frame, line)
        if ir.is_tma_store_issue(name):
            src = call.args[1].args[0] if isinstance(call.args[1], ir.Call) else None
            if isinstance(src, ir.BufferLoad) and is_shared(src.buffer):
                n = self.store_elements(call, src.buffer)
                line = self.mention(src.buffer.name, "tma_copy") or self.mention(src.buffer.name, "copy") or line
                lo, hi = self.span(src.buffer, src.indices, n)
                self.read(stmt, src.buffer, lo, hi, who, frame, line, "the TMA store", store=True)
            return
        if name in _RESULT_STORES:  # 16-bit results to a shared tile (module doc)
            if addresses and is_shared(addresses[0].buffer):
                dst = addresses[0]
                lo, hi = self.span(dst.buffer, dst.indices, _RESULT_STORES[name])
                self.write(stmt, dst.buffer, lo, hi, who, frame, line)
            return
        vec = _VEC.match(name)
        if vec:
            nbytes = int(vec.group(2))
            for i, load in enumerate(addresses):
                if not is_shared(load.buffer):
                    continue
                lo, hi = self.span(load.buffer, load.indices, max(nbytes * 8 // max(load.buffer.dtype.bits, 1), 1))
                if i == 0:
                    self.write(stmt, load.buffer, lo, hi, who, frame, line)
                else:
                    self.read(stmt, load.buffer, lo, hi, who, frame, line, "a thread")
            return
        what = "the gemm" if "gemm" in name else f"{name}"
        sizes = _wgmma_operand_elements(name)
        for i, load in enumerate(addresses):  # operands by address (gemm tiles): read to the end of their version
            if is_shared(load.buffer):  # (a wgmma's: its M x K or N x K elements, a block of a paneled tile's)
                lo, hi = self.span(load.buffer, load.indices, sizes[i] if i < len(sizes) else None)
                self.read(stmt, load.buffer, lo, hi, who, frame, line, what)

    def store_elements(self, call, buf) -> int | None:
        if isinstance(call.args[0], ir.Raw):
            desc = self.sim.descriptors.get(call.args[0].text)
            if desc is None:
                return None
            n = 1
            for d in desc.box_dims:
                n *= int(d)
            return n
        return self.elements(buf, ir.const_int(call.args[2]) if len(call.args) > 2 else None)

    def sync(self):
        """``__syncthreads``: every read before it is done, and what any thread observed through
        a wait, every thread now may rely on."""
        self.reads.clear()
        for seen in self.seen.values():
            seen[:] = seen.max()


def _wgmma_operand_elements(name: str) -> list:
    """The elements each shared operand of a ``tw::wgmma_gemm_*`` call reads from its address on
    (A's M x K and B's N x K for ``ss``, B's for ``rs``: a register A has no address): in a tile
    stored as 128-byte panels, a block of its columns is that many elements in storage order
    (``rules.gemm.column_block``); [] for any other call."""
    shape = ir.wgmma_gemm_shape(name)
    if shape is None:
        return []
    a_registers, rows, cols, k = shape
    return [cols * k] if a_registers else [rows * k, cols * k]
