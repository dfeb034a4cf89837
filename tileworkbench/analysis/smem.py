"""The shared-memory plan of a lowered kernel, in the trace schema's ``smem`` shape.

``plan_shared_memory`` places the buffers; this module reads the result back from the lowered
function (the ``Allocate`` statements of scope ``shared`` and ``barrier`` and the attributes the
pass left on their buffers) and adds what a view needs: each buffer's live range over the
statement numbering of :mod:`.program`, and the total against the device limit.
"""

from __future__ import annotations

from ..ir import nodes as ir
from . import program

DEFAULT_LIMIT = 232448  # sm_90: 227 KB of dynamic shared memory per block


def swizzle_name(value) -> str:
    """``"128B"``, ``"64B"``, ``"32B"`` or ``"none"`` from the pass's byte span (or a name); a
    wide row's span (256 to 2048, ``choose_shared_layouts``) is ``"128B by 256-byte rows"``."""
    if value in (None, 0, "none", "0"):
        return "none"
    if isinstance(value, str):
        return value if value.endswith("B") or " by " in value else f"{value}B"
    if int(value) > 128:
        return f"128B by {int(value)}-byte rows"
    return f"{int(value)}B"


def smem_plan(artifact) -> dict:
    """The shared-memory plan of ``artifact`` (from ``tileworkbench.lower``) or of a lowered PrimFunc.

    Returns ``{"limit_bytes", "total_bytes", "statements", "buffers": [...]}``; each buffer has
    ``name, kind, dtype, shape, versions, offset, size_bytes, align, swizzle, live`` with
    ``live = [first, last]`` the statement indices where the buffer is used (its allocation
    when it is never used), and ``shares_with`` (names) on a buffer placed over others whose
    live ranges end before its own begins.
    """
    func = program.func_of(artifact)
    stmts = program.preorder(func.body)
    allocs: dict[str, tuple[ir.Buffer, int]] = {}
    uses: dict[str, list[int]] = {}
    for i, s in enumerate(stmts):
        if isinstance(s, ir.Allocate):
            if s.buffer.scope in ("shared", "barrier") and s.buffer.name not in allocs:
                allocs[s.buffer.name] = (s.buffer, i)
            continue
        for name in program.buffer_refs(s):
            uses.setdefault(name, []).append(i)

    # plan_shared_memory places a buffer used only after the pipeline over the pipeline's tiles
    shares = {e["name"]: e.get("shares_with") for e in func.attrs.get("smem_plan") or []}
    buffers = []
    for name, (buf, at) in allocs.items():
        used = uses.get(name) or [at]
        shape = list(buf.static_shape() or [])
        size = buf.dtype.bytes_for(buf.numel)
        buffers.append({
            "name": name,
            "kind": "barrier" if buf.scope == "barrier" else "buffer",
            "dtype": buf.dtype.name,
            "shape": shape,
            "versions": int(buf.attrs.get("versions", 1)),
            "offset": buf.attrs.get("offset"),
            "size_bytes": size,
            "align": buf.attrs.get("align"),
            "swizzle": swizzle_name(buf.attrs.get("swizzle", 0)),
            "live": [min(used), max(used)],
        })
        if shares.get(name):
            buffers[-1]["shares_with"] = shares[name]
    buffers.sort(key=lambda b: (b["offset"] is None, b["offset"] or 0))
    end = max((b["offset"] + b["size_bytes"] for b in buffers if b["offset"] is not None), default=0)
    total = func.attrs.get("smem_bytes", end)
    limit = func.attrs.get("smem_limit") or DEFAULT_LIMIT
    return {"limit_bytes": limit, "total_bytes": total, "fits": total <= limit,
            "statements": len(stmts), "buffers": buffers}
