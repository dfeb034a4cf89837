"""Which tensor-core path a ``T.gemm`` takes, decided in one place (not a pass itself).

``wgmma_plan`` returns a :class:`WgmmaPlan` when the Hopper path applies — sm_90a, fp16/bf16
tiles in shared memory (or A in a fragment: register-A wgmma; or FP8, int8 or float32 (TF32) tiles,
both K-major), a float32
accumulator (int32 for int8), whole
warpgroups (along M, whole 64-row blocks each; or, for a 64-row tile on two warpgroups, side by
side along N, ``WgmmaPlan.n_groups``: A in shared memory, an N-major B split on its 128-byte
panels or a K-major one on its rows; a warpgroup's columns past wgmma's 256 as instructions of 256
side by side, ``WgmmaPlan.n_chunks``, A in shared memory), tile sizes wgmma can take, and operand tiles whose layout wgmma can read (A K-major,
or M-major for ``transpose_A``; B K-major or N-major; swizzled, and in 128-byte panels where
their rows are wider) — else None, and the gemm stays on the ``mma.sync`` path.
``choose_shared_layouts`` (swizzle and panels of the operand tiles), ``infer_fragment_layouts``
(accumulator layout, and a register A's) and ``lower_tile_ops`` (the call) all ask this function, so they always agree. ``panels_fit`` says whether TMA can fill
an operand tile stored in 128-byte panels, ``plan_fits`` whether it can fill both of a plan's
(``choose_shared_layouts`` and ``warp_specialize`` ask it).
"""

from __future__ import annotations

import dataclasses

from ...ir import nodes as ir
from ...ir.simplify import is_multiple_of
from ...ir.records import WGMMA_K_MAJOR_ONLY, WgmmaPlan, wgmma_k
from ...target import PassConfigKey
from . import tma as tma_rules

SWIZZLE_SPANS = (32, 64, 128)


def _tile_shape(buf: ir.Buffer):
    """An operand's 2-D tile: the buffer's shape without its versions, or the leading dimensions of
    one of a stack of a single stage (``A_shared = T.alloc_shared((1, M, K))`` at num_stages=1)."""
    shape = buf.static_shape()
    shape = shape[1:] if buf.attrs.get("versions", 1) > 1 else shape
    while len(shape) > 2 and shape[0] == 1:
        shape = shape[1:]
    return shape


FP8_TYPES = ("float8_e4m3", "float8_e5m2")
INT8_TYPES = ("int8", "uint8")
INT4_TYPES = ("int4", "int4x2")  # mma.sync's m16n8k64 s4 only (passes/store_int4_as_bytes.py)
ONE_BYTE_TYPES = FP8_TYPES + INT8_TYPES  # m64nNk32, both operands K-major
TENSOR_CORE_TYPES = ("float16", "bfloat16") + WGMMA_K_MAJOR_ONLY  # the last: one-byte and TF32


def accumulator_dtype(operand_dtype: str) -> str:
    """The accumulator a tensor-core gemm of ``operand_dtype`` tiles adds into: int32 for int8 and
    int4 (``int4x2``, its bytes), else float32."""
    return "int32" if operand_dtype in INT8_TYPES + INT4_TYPES else "float32"


def _k_major(k: int, elem_bytes: int = 2) -> tuple[int, int] | None:
    """(swizzle span, panel) of a K-major operand tile with rows of ``k`` elements: one swizzled
    row where it spans 32, 64 or 128 bytes, 128-byte panels (64 16-bit or 128 8-bit elements)
    where it is a whole number of them (a head dimension of 128 or 256, say), else None."""
    row = k * elem_bytes
    if row in SWIZZLE_SPANS:
        return row, 0
    if row % 128 == 0:
        return 128, 128 // elem_bytes
    return None


def _k_major_only_plan(gemm: ir.Gemm, m: int, n: int, k: int, warpgroups: int) -> WgmmaPlan | None:
    """FP8 and int8 wgmma (m64nNk32: e4m3 or e5m2 into float32, s8 or u8 into int32) and TF32 wgmma
    (m64nNk8 on float32 tiles) read both operands K-major from shared memory: A as stored (M x K),
    B stored N x K (``transpose_B``); there is no transposed form. Each instruction takes 32 bytes
    of K. (TF32 wgmma reads the float32 bits as they are and drops the 13 low mantissa bits: the
    tile interpreter truncates alike, where ``tw::gemm_ss_tf32`` on mma.sync rounds.)"""
    if gemm.a.buffer.scope != "shared" or gemm.trans_a or not gemm.trans_b:
        return None
    k_major = _k_major(k, gemm.a.buffer.dtype.bits // 8)
    if k_major is None:
        return None
    span, panel = k_major
    return WgmmaPlan(m, n, k, warpgroups, span, span, panel, True, a_panel=panel)


def wgmma_plan(gemm: ir.Gemm, threads: int, ctx) -> WgmmaPlan | None:
    if ctx.target.arch != "sm_90a" or ctx.flag(PassConfigKey.TW_DISABLE_WGMMA):
        return None
    a, b, c = gemm.a.buffer, gemm.b.buffer, gemm.c.buffer
    a_registers = a.scope == "fragment"
    if a.scope not in ("shared", "fragment") or b.scope != "shared" or c.scope != "fragment":
        return None
    if a.dtype.name not in TENSOR_CORE_TYPES or b.dtype != a.dtype or c.dtype.name != accumulator_dtype(a.dtype.name):
        return None
    if threads % 128 or (a_registers and gemm.trans_a):
        return None
    a_shape, b_shape = _tile_shape(a), _tile_shape(b)
    k, m = a_shape if gemm.trans_a else a_shape[::-1]
    n = b_shape[0] if gemm.trans_b else b_shape[1]
    rows = {}  # operand -> its tile's row, where the gemm reads a block of its columns
    for name, region, k_major in (("a", gemm.a, not gemm.trans_a), ("b", gemm.b, gemm.trans_b)):
        block = None if region.buffer.scope != "shared" else column_block(region)
        if block is None:
            continue
        rows[name] = _tile_shape(region.buffer)[-1]
        if not _whole_panels(block, rows[name], a.dtype.bits // 8) or not k_major and name == "a":
            return None  # (an M-major A's columns are M: not a block wgmma walks)
        if k_major:
            k = block[1]
        else:  # an N-major B's columns are N: the block's panels are the gemm's B
            n = block[1]
    warpgroups = threads // 128
    split = _warpgroup_split(m, n, warpgroups)
    if split is None or k % wgmma_k(a.dtype.name):
        return None
    warpgroups, n_groups = split  # from here on warpgroups counts those along M
    if n_groups > 1 and a_registers:
        return None  # a register A is read per M block by every warpgroup
    if n_groups == 1 and n > 256:  # instructions of 256 columns side by side, with A from shared memory only
        return None if a_registers else _in_chunks(_plan_of(gemm, m, n, k, warpgroups, a_registers, a.dtype.name, rows), n)
    plan = _plan_of(gemm, m, n, k, warpgroups, a_registers, a.dtype.name, rows)
    if a.dtype.name in WGMMA_K_MAJOR_ONLY:
        # a K-major B's columns for a warpgroup along N are rows of it (tw::wgmma_b_columns)
        return plan if plan is None or n_groups == 1 else dataclasses.replace(plan, n_groups=n_groups)
    if plan is None or n_groups == 1:
        return plan
    # N-major B: each warpgroup's columns must be whole 128-byte panels (a descriptor starts a panel)
    if not plan.b_k_major and (not plan.b_panel or (n // n_groups) % plan.b_panel):
        return None
    return dataclasses.replace(plan, n_groups=n_groups)


def _plan_of(gemm: ir.Gemm, m: int, n: int, k: int, warpgroups: int, a_registers: bool, dtype: str, rows: dict):
    """The plan of one warpgroup's columns along M: the K-major-only types' or the 16-bit one.
    ``rows``: the row (elements) of an operand tile the gemm reads a block of the columns of."""
    if dtype in WGMMA_K_MAJOR_ONLY:
        return None if a_registers or rows else _k_major_only_plan(gemm, m, n, k, warpgroups)
    return _plan(gemm, m, n, k, warpgroups, a_registers, rows)


def column_block(region: ir.Region) -> tuple | None:
    """(first, count) of the columns a gemm operand reads where they are a constant number short
    of its tile's row (``Q_shared[:, 256:512]``, ``KV_shared[stage, :, :256]``, ``Q_shared_l[:, j *
    64:(j + 1) * 64]``: the region whole along the tile's rows, one stage of a stack; ``first`` an
    int or an expression); else None (the whole row)."""
    row = _tile_shape(region.buffer)[-1]
    count = ir.const_int(region.extents[-1])
    if count is None or count == row:
        return None
    first = ir.const_int(region.starts[-1])
    return (region.starts[-1] if first is None else first), count


def _whole_panels(block: tuple, row: int, elem_bytes: int) -> bool:
    """The block of columns is whole 128-byte panels of a K-major tile stored in panels: what a
    wgmma descriptor can start at (a panel) and walk (whole panels along K); a first column the
    program computes must be a multiple of a panel whatever its values."""
    panel = 128 // elem_bytes
    first = block[0] if isinstance(block[0], int) else None
    aligned = first % panel == 0 if first is not None else is_multiple_of(block[0], panel)
    return row * elem_bytes > 128 and row % panel == 0 and aligned and block[1] % panel == 0


def _in_chunks(plan: WgmmaPlan | None, n: int) -> WgmmaPlan | None:
    """``plan`` with its ``n`` columns as instructions of 256 side by side; an N-major B's each
    instruction's columns must be whole 128-byte panels (a descriptor starts a panel)."""
    if plan is None or (not plan.b_k_major and (not plan.b_panel or 256 % plan.b_panel)):
        return None
    return dataclasses.replace(plan, n_chunks=n // 256)


def register_a(gemm: ir.Gemm, threads: int, ctx) -> bool:
    """The gemm's A is a fragment that register-A wgmma reads as it is."""
    plan = wgmma_plan(gemm, threads, ctx)
    return plan is not None and plan.a_registers


def why_not_register_a(gemm: ir.Gemm, threads: int, ctx) -> str:
    """Why register-A wgmma does not take this gemm's fragment A, in words."""
    a = gemm.a.buffer
    if ctx.target.arch != "sm_90a" or ctx.flag(PassConfigKey.TW_DISABLE_WGMMA):
        return f"register-A wgmma is Hopper's (sm_90a), the target is {ctx.target.arch}"
    if a.dtype.name not in ("float16", "bfloat16") or gemm.b.buffer.dtype != a.dtype:
        return f"it takes float16 or bfloat16 operands of one type, A is {a.dtype.name}"
    if gemm.c.buffer.dtype.name != "float32":
        return f"it accumulates in float32, {gemm.c.buffer.name} is {gemm.c.buffer.dtype.name}"
    if gemm.trans_a:
        return "A is transposed"
    if threads % 128:
        return f"it needs whole warpgroups, the kernel has {threads} threads"
    m = _tile_shape(a)[0]
    if m % (64 * (threads // 128)):
        return (f"each warpgroup holds whole 64-row blocks of A in its registers; {m} rows on {threads // 128} "
                "warpgroups, which share them side by side along N")
    return "the tile sizes are not ones wgmma takes"


def _warpgroup_split(m: int, n: int, warpgroups: int) -> tuple[int, int] | None:
    """(warpgroups along M, along N): all along M where each takes whole 64-row blocks, else, for a
    64-row tile on two warpgroups, the two side by side along N (64 x 128: 64 x 64 each, as
    TileLang's gemm splits it); None where wgmma cannot cover the tile."""
    if m % 64 or n % 8:
        return None
    if m % (64 * warpgroups) == 0:  # wider than 256: whole instructions of 256 side by side (wgmma_plan)
        return (warpgroups, 1) if 8 <= n <= 256 or n % 256 == 0 else None
    along_m = m // 64
    # two warpgroups on one 64-row block: the split run on the H200 (tests/gpu/test_core_kernels.py);
    # the layout and the header take more (tests/test_wgmma_n_split.py), not yet run on a GPU
    if (along_m, warpgroups) != (1, 2):
        return None
    along_n = warpgroups // along_m
    per_group = n // along_n
    if n % along_n or per_group % 8 or not 8 <= per_group <= 256:
        return None
    return along_m, along_n


def _plan(gemm: ir.Gemm, m: int, n: int, k: int, warpgroups: int, a_registers: bool,
          rows: dict | None = None) -> WgmmaPlan | None:
    """The 16-bit plan: A's and B's layouts (module doc). An operand read in a block of its
    columns (``rows``) takes the layout of its whole row, which the block's panels are part of."""
    rows = rows or {}
    if a_registers:  # the fragment holds A in the accumulator layout (infer_fragment_layouts)
        a_form = {"a_registers": True}
        a_span = 0
    elif gemm.trans_a:  # A stored K x M: every 64-row block of M is one 128-byte swizzled panel
        a_span = 128
        a_form = {"a_k_major": False, "a_panel": 64 if m * 2 > 128 else 0}
    else:
        k_major = _k_major(rows.get("a", k))
        if k_major is None:
            return None
        a_span, a_form = k_major[0], {"a_panel": k_major[1]}
    if gemm.trans_b:  # B stored N x K: K-major
        k_major = _k_major(rows.get("b", k))
        if k_major is None:
            return None
        return WgmmaPlan(m, n, k, warpgroups, a_span, k_major[0], k_major[1], True, **a_form)
    row = rows.get("b", n)  # B stored K x N: N-major, its row the whole tile's
    if row * 2 in SWIZZLE_SPANS and k % 8 == 0:
        return WgmmaPlan(m, n, k, warpgroups, a_span, row * 2, 0, False, **a_form)
    if (row * 2) % 128 == 0 and k % 8 == 0:
        return WgmmaPlan(m, n, k, warpgroups, a_span, 128, 64, False, **a_form)
    return None


def plan_fits(plan: WgmmaPlan, gemm: ir.Gemm, pairs) -> bool:
    """TMA can fill every paneled operand tile of ``plan`` from the copies in ``pairs``."""
    return ((plan.a_registers or not plan.a_panel or panels_fit(gemm.a.buffer, plan.a_panel, pairs))
            and (not plan.b_panel or panels_fit(gemm.b.buffer, plan.b_panel, pairs)))


def panels_fit(buf: ir.Buffer, panel: int, pairs) -> bool:
    """TMA can move a tile stored as panels to or from each global region it is copied with: a
    tensor of known width, its columns the tile's columns (unit stride), whose other strides are
    16-byte multiples where they are constants (TMA's rule for strides; the launcher checks the
    others). The rows of a 2-D tensor a whole number of panels
    take one 3-D copy, others one copy per panel (``rules.tma.tma_copies``)."""
    for g_region, shared in pairs:
        if shared is not buf:
            continue
        g = g_region.buffer
        cols = ir.const_int(g.shape[-1])
        extents = g_region.static_extents()
        if cols is None or g.ndim < 2 or extents is None or sum(e != 1 for e in extents[:-1]) > 1:
            return False
        if tma_rules.whole_panels(g_region, panel):
            continue
        # a stride sizes decide (T.dynamic) is the launcher's to check at each call, as for any
        # TMA copy the program asks for (the copies here are T.tma_copy or prefer_instruction="tma")
        strides = tma_rules.global_stride_bytes(g)
        if tma_rules.misaligned_stride(strides) is not None or ir.const_int(g.effective_strides()[-1]) != 1:
            return False
    return True
