"""How ``partition_parallel_loops`` moves the runs of a blocked fragment with ``vec > 1``
(``ir.layout.BlockedLayout``) to and from global memory: one ``tw::copy_vec<16>`` per 16 bytes of a
run instead of one access per element.

It applies to a nest whose body is one element copy between the fragment, indexed by the loop's
variables, and a global tensor of the same dtype whose element offset steps by one with the last
loop variable and is otherwise a multiple of the run (so every run starts 16-byte aligned: the
launcher checks the tensor's ``align_bytes``), with no bounds guard left after simplification.
A float32 fragment stored rounded to a 16-bit tensor (``T.copy(acc, Out[...])``) goes likewise,
4 elements of a run per ``tw::store_rounded4`` (one 8-byte store of the converted values).
Anything else keeps one access per element (correct, only slower).
"""

from __future__ import annotations

from ...ir import nodes as ir
from ...ir.layout import BlockedLayout
from ...ir.simplify import is_multiple_of, simplify
from ...ir.visitor import substitute
from .calls import address_of, call, needs_alignment
from .result_stores import unit_column

CHUNK_BYTES = 16


def _unguarded(body, loop_vars, layout, ranges):
    if isinstance(body, ir.IfThenElse):  # a bounds check, if it is always true
        ranges = {**ranges, **{v: (0, n - 1) for v, n in zip(loop_vars, layout.shape)}}
        if not isinstance(cond := simplify(body.cond, ranges), ir.Const) or not cond.value:
            return None
        return body.then_body
    return body


def unwrap_cast(value, dtype):
    return value.value if isinstance(value, ir.Cast) and value.dtype == dtype else value


def steps_by_one(buf: ir.Buffer, indices, last: ir.Var, run: int) -> bool:
    """The element offset of ``buf[indices]`` is ``last`` plus a multiple of ``run``."""
    form = unit_column(buf, indices, last)
    return form is not None and form.const % run == 0 and all(
        _multiple(atom, coef, run) for atom, coef in form.terms.values() if atom is not last)


def _multiple(atom: ir.Expr, coef: int, run: int) -> bool:
    """``coef * atom`` is a multiple of ``run``: by its coefficient, or by a factor of a product
    (a row of a tensor whose sizes are known at run time, ``b * (seq_len * 576)``)."""
    if coef % run == 0:
        return True
    return isinstance(atom, ir.BinOp) and atom.op == "*" and any(
        is_multiple_of(ir.binop("*", factor, ir.const(coef)), run) for factor in (atom.a, atom.b))


def _loop_indexed(frag_idx, loop_vars) -> bool:
    return len(frag_idx) == len(loop_vars) and all(i is v for i, v in zip(frag_idx, loop_vars))


def _run_start(layout, tid, loop_vars, indices):
    """``(jv, indices at the first element of the thread's run jv)``, or None where the layout
    guards the run (not every thread holds it)."""
    jv = ir.Var("jv")
    start, guard = layout.forward(tid, jv * layout.vec)
    if guard is not None:
        return None
    at = dict(zip(loop_vars, start))
    return jv, tuple(substitute(i, at) for i in indices)


def run_copies(node: ir.For, loop_vars, body, layout, tid, to_local, ranges) -> ir.Stmt | None:
    """The nest as copies of whole runs (module doc), or None where it is not such a copy."""
    if not isinstance(layout, BlockedLayout) or layout.vec == 1:
        return None
    body = _unguarded(body, loop_vars, layout, ranges)
    if not isinstance(body, ir.BufferStore):
        return None
    value = unwrap_cast(body.value, body.buffer.dtype)
    if not isinstance(value, ir.BufferLoad):
        return None
    if value.dtype != body.buffer.dtype:
        return rounded_run_stores(node, loop_vars, body, value, layout, tid, to_local)
    sides = {body.buffer.scope: (body.buffer, body.indices), value.buffer.scope: (value.buffer, value.indices)}
    if set(sides) != {"fragment", "global"}:
        return None
    frag, frag_idx = sides["fragment"]
    tensor, tensor_idx = sides["global"]
    if not _loop_indexed(frag_idx, loop_vars):
        return None
    elem = tensor.dtype.storage_bits // 8
    run_bytes = layout.vec * elem
    if tensor.dtype.packed or run_bytes % CHUNK_BYTES or not steps_by_one(tensor, tensor_idx, loop_vars[-1], layout.vec):
        return None
    run = _run_start(layout, tid, loop_vars, tensor_idx)
    if run is None:
        return None
    jv, first = run
    local = to_local(frag)
    local.attrs["align_bytes"] = CHUNK_BYTES
    needs_alignment(tensor, CHUNK_BYTES)
    per_chunk = CHUNK_BYTES // elem
    to_registers = body.buffer is frag
    moves = []
    for k in range(run_bytes // CHUNK_BYTES):
        mem = address_of(tensor, first[:-1] + (simplify(first[-1] + k * per_chunk),))
        reg = address_of(local, (jv * layout.vec + k * per_chunk,))
        moves.append(call(f"tw::copy_vec<{CHUNK_BYTES}>", *((reg, mem) if to_registers else (mem, reg))))
    return ir.For(jv, ir.const(layout.local_size // layout.vec), ir.seq(moves), "unrolled",
                  annotations={"layout": layout.describe(), "vector": layout.vec}, loc=node.loc)


ROUNDED_RUN = 4  # elements per tw::store_rounded4: 8 bytes of a 16-bit tensor


def rounded_run_stores(node: ir.For, loop_vars, body: ir.BufferStore, value: ir.BufferLoad, layout, tid,
                       to_local) -> ir.Stmt | None:
    """``Out[...] = acc[i, j]`` from a float32 fragment in runs (of a multiple of 4) into a
    float16/bfloat16 global tensor, as one ``tw::store_rounded4`` per 4 elements of a run, or None
    where the nest is not such a store."""
    tensor, frag = body.buffer, value.buffer
    if not (tensor.scope == "global" and tensor.dtype.name in ("float16", "bfloat16")
            and frag.scope == "fragment" and frag.dtype.name == "float32" and _loop_indexed(value.indices, loop_vars)):
        return None
    if layout.vec % ROUNDED_RUN or not steps_by_one(tensor, body.indices, loop_vars[-1], ROUNDED_RUN):
        return None
    run = _run_start(layout, tid, loop_vars, body.indices)
    if run is None:
        return None
    jv, first = run
    local = to_local(frag)
    needs_alignment(tensor, tensor.dtype.bytes_for(ROUNDED_RUN))
    stores = [call("tw::store_rounded4", address_of(tensor, first[:-1] + (simplify(first[-1] + k),)),
                   address_of(local, (jv * layout.vec + k,)))
              for k in range(0, layout.vec, ROUNDED_RUN)]
    return ir.For(jv, ir.const(layout.local_size // layout.vec), ir.seq(stores), "unrolled",
                  annotations={"layout": layout.describe(), "vector": layout.vec}, loc=node.loc)
