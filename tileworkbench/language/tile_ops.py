"""Tile operations: ``T.copy``, ``T.tma_copy``, ``T.fill``/``T.clear``, ``T.gemm``, the
reductions and the scans (``T.cumsum``, ``T.cummax``). Each checks its operands and emits one
tile-level statement; passes lower it."""

from __future__ import annotations

import enum

import builtins as _builtins

from ..frontend import builder as _b
from ..frontend.builder import error
from ..frontend.fragment_views import fragment_view
from ..frontend.regions import as_barrier, as_region, laid_out, resolve_regions, unit_dropped
from ..ir import nodes as ir
from ..ir.visitor import collect
from .global_layouts import copy_elementwise

_py_bool = _builtins.bool


_COPY_INSTRUCTIONS = ("tma", "sync", "cp_async", "auto", None)


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None,
         prefer_instruction=None, annotations=None, loop_layout=None):
    """Copy between global, shared, fragment and local memory (any rank, tile origins, slices)."""
    instruction = prefer_instruction
    if annotations and "prefer_instruction" in annotations:
        instruction = annotations["prefer_instruction"]  # the annotation wins, as in TileLang
    if instruction not in _COPY_INSTRUCTIONS:
        raise error(
            f"T.copy: unknown prefer_instruction {instruction!r}; "
            "expected 'tma', 'sync', 'cp_async' or 'auto'"
        )
    if instruction == "auto":
        instruction = None
    if disable_tma and instruction == "tma":
        raise error("T.copy: prefer_instruction='tma' contradicts disable_tma=True")
    if disable_tma and instruction is None:
        instruction = "threads"  # as auto, but the passes that choose TMA themselves leave it alone
    s, d = resolve_regions(as_region(src, "T.copy source"), as_region(dst, "T.copy destination"),
                           "T.copy")
    if laid_out(s.buffer) is not None or laid_out(d.buffer) is not None:
        copy_elementwise(s, d)  # each element at the place a T.annotate_layout gave it
        return
    _b.current().emit(ir.Copy(s, d, instruction))


def transpose(src, dst, annotations=None):
    """``dst[..., j, i] = src[..., i, j]``: a shared tile (or a slice of one) of shape (..., M, N) into
    a shared tile or fragment of shape (..., N, M), as a ``T.Parallel`` loop over ``dst``."""
    s, d = as_region(src, "T.transpose source"), as_region(dst, "T.transpose destination")
    for r, role, scopes in ((s, "source", ("shared",)), (d, "destination", ("shared", "fragment"))):
        if isinstance(r, _b.Point) or r.buffer.scope not in scopes:
            raise error(f"T.transpose: the {role} must be a {' or '.join(scopes)} tile or a slice of one")
        if r.static_extents() is None or len(r.extents) < 2:
            raise error(f"T.transpose: the {role} needs two or more dimensions of extents known when the kernel "
                        "is built")
    se, de = list(s.static_extents()), list(d.static_extents())
    lead_s, lead_d = [e for e in se[:-2] if e != 1], [e for e in de[:-2] if e != 1]  # unit dimensions dropped
    if lead_s != lead_d or (se[-1], se[-2]) != (de[-2], de[-1]):
        raise error(f"T.transpose: a source of extents {tuple(se)} transposes to {tuple(lead_s + [se[-1], se[-2]])}, "
                    f"not the destination's {tuple(de)}")
    if d.buffer.scope == "fragment" and not d.is_full:
        raise error("T.transpose: a fragment destination is written whole; slice the shared source instead")
    loop_vars = [ir.Var(f"t{n}") for n in range(len(de))]
    leading = iter(v for v, e in zip(loop_vars[:-2], de[:-2]) if e != 1)  # the source's leading indices, in order
    src_index = [next(leading) if e != 1 else ir.const(0) for e in se[:-2]] + [loop_vars[-1], loop_vars[-2]]
    body = ir.BufferStore(d.buffer, tuple(a + v for a, v in zip(d.starts, loop_vars)),
                          ir.cast(ir.BufferLoad(s.buffer, tuple(a + v for a, v in zip(s.starts, src_index)),
                                                s.buffer.dtype), d.buffer.dtype))
    for var, extent in reversed(list(zip(loop_vars, de))):
        body = ir.For(var, ir.const(extent), body, "parallel")
    _b.current().emit(body)


def tma_copy(src, dst, barrier=None, leader_scope_threads=None, **unsupported):
    """A TMA copy with user-managed synchronisation.

    Load (global -> shared): one elected thread of the leader scope does ``expect_tx(bytes)`` on
    ``barrier`` and issues the TMA; nobody arrives or waits. Store (shared -> global): the elected
    thread issues the bulk store and commits the bulk group; wait with ``T.tma_store_wait``.
    """
    if unsupported:
        raise error(f"T.tma_copy: unsupported keyword(s) {', '.join(unsupported)}")
    s, d = resolve_regions(as_region(src, "T.tma_copy source"),
                           as_region(dst, "T.tma_copy destination"), "T.tma_copy")
    scopes = (s.buffer.scope, d.buffer.scope)
    if scopes == ("global", "shared"):
        if barrier is None:
            raise error("T.tma_copy: a load from global to shared memory needs barrier=<mbarrier>")
        barrier = as_barrier(barrier)
    elif scopes == ("shared", "global"):
        if barrier is not None:
            raise error("T.tma_copy: a store (shared -> global) takes no barrier; "
                        "wait for it with T.tma_store_wait()")
    else:
        raise error(f"T.tma_copy copies global -> shared or shared -> global, not {scopes[0]} -> {scopes[1]}")
    if leader_scope_threads is not None:
        n = ir.const_int(leader_scope_threads) if not isinstance(leader_scope_threads, _py_bool) else None
        if n is None or n <= 0 or n % 32 != 0:
            raise error(f"leader_scope_threads must be a positive multiple of 32, got "
                        f"{_b.describe(leader_scope_threads)}")
        leader_scope_threads = n
    _b.current().emit(ir.TmaCopy(s, d, barrier, leader_scope_threads))


def _kernel_variable(value):
    """A kernel variable (``x = T.alloc_var(dtype)``, which reads as its value) as its buffer, so that
    ``T.clear(x)`` and ``T.fill(x, v)`` set it as TileLang's do; anything else as it is."""
    if isinstance(value, ir.BufferLoad) and value.buffer in _b.current().var_buffers:
        return value.buffer
    return value


def fill(buffer, value):
    region = as_region(_kernel_variable(buffer), "T.fill destination")
    if isinstance(region, _b.Point):  # T.fill(s[0], v): that one element, as TileLang's
        region = ir.Region(region.buffer, tuple(region.indices), tuple(ir.const(1) for _ in region.indices))
    value = _b.stored_value(value, region.buffer, "T.fill: the value")
    _b.current().emit(ir.Fill(region, ir.cast(value, region.buffer.dtype)))


def clear(buffer):
    region = as_region(_kernel_variable(buffer), "T.clear destination")
    fill(buffer, 0.0 if region.buffer.dtype.is_float else 0)


class GemmWarpPolicy(enum.IntEnum):
    """How TileLang spreads a gemm's warps over the tile. Accepted for compatibility: this compiler
    lays the warps out itself (a warpgroup per 64 rows for wgmma), whatever the policy says."""

    Square = 0
    FullRow = 1
    FullCol = 2


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False,  # noqa: N803
         k_pack=1, wg_wait=0):
    """``C += A @ B`` on tiles: A and B whole shared tiles (float16 or bfloat16 for the tensor
    cores), C a whole float32 fragment. ``transpose_A`` reads A stored K x M, ``transpose_B`` B
    stored N x K. A may be a whole fragment instead (attention's P @ V: register-A wgmma on
    sm_90a, the fragment in the layout of a wgmma accumulator of its shape), and so may B (copied
    into a shared tile for the gemm: passes/stage_fragment_operands.py)."""
    _b.current().emit(_gemm_node(A, B, C, transpose_A, transpose_B, clear_accum, "T.gemm"))


def _gemm_node(A, B, C, transpose_A, transpose_B, clear_accum, what: str) -> ir.Gemm:  # noqa: N803
    """The ``ir.Gemm`` of ``T.gemm``'s (or ``T.wgmma_gemm``'s: ``what``) operands, checked."""
    a, b, c = (as_region(x, f"{what} {n}") for x, n in ((A, "A"), (B, "B"), (C, "C")))
    for r, n in ((a, "A"), (b, "B"), (c, "C")):
        if isinstance(r, _b.Point):
            raise error(f"{what} {n} must be a whole buffer or a slice")
        if r.static_extents() is None or len(unit_dropped(r.extents)) != 2:
            raise error(f"{what} {n} must be a 2-D tile with constant extents")
    for r, n in ((a, "A"), (b, "B")):
        if r.buffer.scope == "fragment":  # B (and A where no register-A path takes it) go through shared memory
            if not r.is_full:
                raise error(f"{what} {n} must be a whole fragment; {r.buffer.name} is sliced here")
            continue
        if r.buffer.scope != "shared":
            raise error(f"{what} {n} must be a shared tile (T.alloc_shared), not {_b.describe(r.buffer)}")
        if not r.is_full and _one_stage(r, all_columns=True):
            # a ring of tiles the program versions itself: laid out as a pipeline's versioned tiles
            r.buffer.attrs["versions"] = r.buffer.static_shape()[0]
        elif not r.is_full and r.column_block() is not None and r.buffer.ndim == 2:
            # columns of a wider tile (sparse MLA's Q_shared[:, :D] and its tail): one tile a block
            # where every access keeps to one (split_column_blocks), else read in place by wgmma
            r.buffer.attrs.setdefault(ir.COLUMN_BLOCKS, _b.current().loc)
        elif not r.is_full and _one_stage(r, all_columns=False):
            # columns of one stage of a ring (FlashMLA's KV_shared[stage, :, :256]): read in place
            r.buffer.attrs["versions"] = r.buffer.static_shape()[0]
        elif not r.is_full and _columns_from(r):
            pass  # columns from a loop's variable (Q_shared_l[:, j * 64:(j + 1) * 64]): read in place
        elif not r.is_full:
            raise error(f"{what} {n} must be a whole shared tile, one whole 2-D stage of a stack of them "
                        f"(A_shared[k % 2, :, :]) or a block of a tile's or a stage's columns (Q_shared[:, :512], "
                        f"KV_shared[k % 2, :, :256]); "
                        f"{r.buffer.name} is sliced here (allocate a tile of the "
                        f"operand's shape instead)")
    if c.buffer.scope != "fragment":
        raise error(f"{what}: the accumulator C must be a fragment (T.alloc_fragment), not "
                    f"{_b.describe(c.buffer)}")
    if not c.is_full:
        raise error(f"{what} C must be a whole fragment: a gemm into part of {c.buffer.name} is not supported "
                    f"(the accumulator's thread layout covers the whole tile); allocate a fragment of the "
                    f"gemm's shape and copy it where it belongs")
    # int8 and int4 tiles add up in int32 (wgmma's and mma.sync's s32), every other type in float32
    accumulator = "int32" if a.buffer.dtype.name in ("int8", "uint8", "int4") else "float32"
    if c.buffer.dtype.name != accumulator:
        raise error(f"{what} of {a.buffer.dtype.name} tiles accumulates in {accumulator}; {c.buffer.name} is "
                    f"{c.buffer.dtype.name}")
    (m, ka), (kb, n), (mc, nc) = (
        [ir.const_int(e) for e in unit_dropped(r.extents)] for r in (a, b, c)
    )
    if transpose_A:
        m, ka = ka, m
    if transpose_B:
        kb, n = n, kb
    if ka != kb or m != mc or n != nc:
        raise error(f"{what}: shapes do not agree: A is {m}x{ka}, B is {kb}x{n}, C is {mc}x{nc}")
    if a.buffer.dtype != b.buffer.dtype:
        raise error(f"{what}: A and B must have one dtype ({a.buffer.dtype} vs {b.buffer.dtype})")
    return ir.Gemm(a, b, c, _py_bool(transpose_A), _py_bool(transpose_B), _clears(clear_accum, what))


def _clears(clear_accum, what: str):
    """``clear_accum`` as a gemm holds it: a bool, or a kernel condition every thread decides alike
    (``clear_accum=(j == 0)`` in a loop over ``j``: the accumulator cleared where it holds)."""
    if not isinstance(clear_accum, ir.Expr):
        return _py_bool(clear_accum)
    launch = _b.current().launch
    if launch is not None and any(v is launch.thread_var for v in collect(clear_accum, ir.Var)):
        raise error(f"{what}: clear_accum={ir.describe(clear_accum)} depends on the thread; the threads "
                    "clear the accumulator together, so the condition must be one for the whole gemm")
    return clear_accum if clear_accum.dtype.name == "bool" else ir.cmp("!=", clear_accum, 0)


def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=None, clear_accum=False, k_pack=1):  # noqa: N803
    """TileLang's ``T.gemm`` that leaves its wgmma running: ``C += A @ B`` as ``T.gemm`` takes it,
    issued as one wgmma group the program waits for itself with ``T.wait_wgmma(n)`` before it
    reads C or changes A or B (``passes.verify_wgmma_waits`` holds it to that). sm_90a's wgmma
    only: a gemm no wgmma can run is refused."""
    g = _gemm_node(A, B, C, transpose_A, transpose_B, clear_accum, "T.wgmma_gemm")
    g.in_flight = None
    _b.current().emit(g)


def wait_wgmma(id=0):  # noqa: A002 - TileLang's name
    """``wgmma.wait_group n``: waits until at most ``id`` of this thread's wgmma groups
    (``T.wgmma_gemm``) are still running, the oldest finishing first."""
    _b.current().emit(ir.wgmma_wait(_b.constant_int(id, "T.wait_wgmma: the groups left running", low=0)))


def _reduce(kind):
    def reduce(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
        for value in (buffer, out):
            if not isinstance(value, ir.Buffer) or value.scope not in ("fragment", "shared"):
                raise error(f"T.reduce_{kind} reduces a whole fragment or shared buffer into another, "
                            f"not {_b.describe(value)}")
        if kind in BITWISE_KINDS and any(not b.dtype.is_int for b in (buffer, out)):
            raise error(f"T.reduce_{kind} combines integers (or booleans) bit by bit; "
                        f"{buffer.name} is {buffer.dtype.name} and {out.name} {out.dtype.name}")
        # TileLang's batch groups its rows' cross-warp steps behind shared barriers: how, not what,
        # so it is checked and left to our lowering (one barrier pair per reduction through shared memory)
        if _b.constant_int(batch, f"T.reduce_{kind}: batch") < 1:
            raise error(f"T.reduce_{kind}: batch must be at least 1, got {batch}")
        _reduce_annotations(kind, annotations)
        if fragment_view(out) is not None:
            raise error(f"T.reduce_{kind}: the output {out.name} is a view of a fragment (T.reshape); reduce "
                        f"into {fragment_view(out).base.name} itself")
        nd = buffer.ndim
        dim = _b.constant_int(dim, f"T.reduce_{kind}: dim")
        d = dim + nd if dim < 0 else dim
        if not 0 <= d < nd:
            raise error(f"T.reduce_{kind}: dim {dim} out of range for a {nd}-D buffer")
        expect = [s for i, s in enumerate(buffer.static_shape()) if i != d] or [1]
        if list(out.static_shape()) != expect:
            raise error(f"T.reduce_{kind}: output shape {out.static_shape()} should be {tuple(expect)}")
        view = fragment_view(buffer)
        if view is not None:
            _b.current().emit(_reduce_of_view(kind, view, out, d, _py_bool(clear)))
            return
        _b.current().emit(ir.Reduce(kind, buffer, out, d, _py_bool(clear)))

    reduce.__name__ = f"reduce_{kind}"
    return reduce


BITWISE_KINDS = ("bitand", "bitor", "bitxor")


def _reduce_of_view(kind, view, out, d, clear) -> ir.Reduce:
    """``T.reduce_*`` of a fragment view along its dimension ``d``: of the fragment along the
    dimension ``d`` is (part of), in runs where the view splits that dimension (the FP8 indexers'
    ``(block_N, block_Q, heads)`` scores summed over the heads: runs of ``heads`` along the
    fragment's ``block_Q * heads``)."""
    runs = view.reduced_runs(d)
    base = view.base
    if runs is not None:
        base_dim, segment = runs
        shape = list(base.static_shape())
        n = shape[base_dim]
        # (run length, the destination's shape): the whole dimension reduced away, or kept as runs
        forms = [(None, shape[:base_dim] + shape[base_dim + 1:] or [1])] if segment is None else []
        forms.append((segment or n, shape[:base_dim] + [n // (segment or n)] + shape[base_dim + 1:]))
        for run, want in forms:
            if list(out.static_shape()) == want:
                return ir.Reduce(kind, base, out, base_dim, clear, segment=run)
    raise error(f"T.reduce_{kind}: {view.view.name} {tuple(view.view.static_shape())} is a view of the fragment "
                f"{base.name} {tuple(base.static_shape())}; a view is reduced along a dimension the fragment has, or "
                "along the inner part of one it splits ((N, Q * H) seen as (N, Q, H), along H), into a fragment "
                "shaped as the rest of the fragment's dimensions: not this one (not supported yet)")


def _reduce_annotations(kind, annotations):
    """TileLang's lowering controls: ``enable_fadd2`` (packed float adds on sm_100) changes no value
    and is accepted; ``nan_propagate`` (a NaN wins max/min) is not what our max/min do (fmaxf drops
    NaN), so asking for it is refused rather than silently ignored."""
    for key, value in (annotations or {}).items():
        if key == "nan_propagate" and value:
            raise error(f"T.reduce_{kind}: annotations={{'nan_propagate': True}} is not supported yet "
                        "(our max and min drop NaN, as fmaxf does)")
        if key not in ("nan_propagate", "enable_fadd2"):
            raise error(f"T.reduce_{kind}: unknown annotation {key!r}")


reduce_sum = _reduce("sum")
reduce_max = _reduce("max")
reduce_min = _reduce("min")
reduce_abssum = _reduce("abssum")
reduce_absmax = _reduce("absmax")
reduce_bitand = _reduce("bitand")
reduce_bitor = _reduce("bitor")
reduce_bitxor = _reduce("bitxor")


def _scan(kind):
    name = f"T.cum{kind}"

    def scan(src, dst=None, dim=0, reverse=False, annotations=None):
        s = as_region(src, f"{name} source")
        d = s if dst is None else as_region(dst, f"{name} destination")
        for r, role in ((s, "source"), (d, "destination")):
            if isinstance(r, _b.Point) or r.buffer.scope not in ("shared", "fragment"):
                raise error(f"{name} scans a shared or fragment tile (or a slice of a shared one); "
                            f"its {role} is {_b.describe(r.buffer if not isinstance(r, _b.Point) else r)}")
            if r.static_extents() is None:
                raise error(f"{name}: the {role}'s extents must be known when the kernel is built")
            if r.buffer.scope == "fragment" and not r.is_full:
                raise error(f"{name}: a fragment {role} is scanned whole; {r.buffer.name} is sliced "
                            "(copy the part to a shared tile, or scan a slice of a shared tile)")
            if r.buffer.dtype.name == "bool" or not (r.buffer.dtype.is_float or r.buffer.dtype.is_int):
                raise error(f"{name} needs numbers; {r.buffer.name} is {r.buffer.dtype.name}")
        if s.static_extents() != d.static_extents():
            raise error(f"{name}: the destination's extents {d.static_extents()} differ from the "
                        f"source's {s.static_extents()}")
        rank = len(s.extents)
        dim = _b.constant_int(dim, f"{name}: dim")
        axis = dim + rank if dim < 0 else dim
        if not 0 <= axis < rank:
            raise error(f"{name}: dim {dim} out of range for a {rank}-D tile")
        _b.current().emit(ir.Scan(kind, s, d, axis, _py_bool(reverse)))

    scan.__name__ = f"cum{kind}"
    scan.__doc__ = (f"``{name}(src, dst=None, dim=0, reverse=False)``: the running {kind} of a shared or "
                    "fragment tile along ``dim`` (inclusive; from the end with ``reverse``), into ``dst`` "
                    "or in place.")
    return scan


cumsum = _scan("sum")
cummax = _scan("max")


def _one_stage(r, all_columns: _py_bool) -> _py_bool:
    """A region of one whole stage of a 3-D stack of tiles: every row of the stage, and every
    column (``all_columns``: ``A_shared[slot, :, :]``, a ring of tiles the program versions itself,
    as a pipeline's versioned tiles are) or a constant number of them from any column
    (``KV_shared[stage, :, 256:]``: wgmma reads them where they stand, ``rules.gemm.column_block``)."""
    shape = r.buffer.static_shape()
    extents = r.static_extents()
    if shape is None or extents is None or len(shape) != 3:
        return False
    rows = extents[0] == 1 and extents[1] == shape[1] and ir.const_int(r.starts[1]) == 0
    return rows and (not all_columns or (extents[2] == shape[2] and ir.const_int(r.starts[2]) == 0))


def _columns_from(r) -> _py_bool:
    """``Q_shared_l[:, j * 64:(j + 1) * 64]``: a constant number of a 2-D tile's columns from a
    column the program computes (whether wgmma can read them in place, whole 128-byte panels, is
    ``rules.gemm.column_block``'s to say)."""
    shape = r.buffer.static_shape()
    extents = r.static_extents()
    return shape is not None and extents is not None and len(shape) == 2 and extents[0] == shape[0] and \
        ir.const_int(r.starts[0]) == 0
