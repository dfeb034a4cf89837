"""The host launcher, generated as readable Python source.

The launcher checks every argument against the kernel's signature (shape, dtype, strides,
alignment, device), encodes each TMA tensor map with every field spelled out, and launches the
kernel on the stream it is given. It talks to the GPU only through the ``rt`` object it is given
(``backend.runtime.Runtime``), so the same text is what ``get_host_source()`` shows and what runs.
What does not change from call to call is written once, above ``launch``: the grid, and each
tensor map's fields (``A_desc_FIELDS``) where they do not depend on the call's scalars, so a
call builds nothing it built before (microsecond launches, issue 18).

In debug mode (``debug_timeout_s``) the launcher also passes a zeroed debug record as the
kernel's last argument and, after the launch, has ``rt`` read it: a wait that timed out becomes a
``KernelRuntimeError`` naming the barrier, slot, parity, block, thread and kernel line.

A kernel with ``T.sync_grid`` gets a word zeroed for the launch (``rt.grid_barrier_word``), in
which its grid barriers count arrivals, and is launched cooperatively (``cooperative=True``: the
driver refuses a grid whose blocks cannot all be resident at once).

In timeline mode (``timeline``, the kernel's ``ir.records.TimelinePlan``) the launcher passes a
zeroed buffer sized for the launch's grid (``rt.timeline_buffer``), which ``kernel.timeline()``
reads after the call.
"""

from __future__ import annotations

from ..version import __version__
from ..dtypes import TMA_TYPE_NAMES
from ..ir import nodes as ir
from ..ir.printer import expr_text
from ..ir.visitor import collect, substitute
from .cuda import DEBUG_PARAM, TIMELINE_PARAM, TIMELINE_WAVE_PARAM, barrier_names

_SWIZZLE = {0: "NONE", 1: "32B", 2: "64B", 3: "128B"}
_L2 = {0: "NONE", 1: "64B", 2: "128B", 3: "256B"}


def _py(e, renamed: dict | None = None) -> str:
    """An int or a size expression as Python (scalar parameters under their launcher names)."""
    v = ir.const_int(e)
    if v is not None:
        return str(v)
    return expr_text(substitute(e, renamed) if renamed else e)


def _tuple(items, renamed: dict | None = None) -> str:
    items = [_py(i, renamed) if not isinstance(i, (int, str)) else str(i) for i in items]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


# Names the launcher itself uses: a kernel parameter or descriptor of the same name gets another.
_LAUNCHER_NAMES = {"rt", "grid", "launch", "stream", "KERNEL", "PARAMS", "BLOCK", "GRID", "SMEM_BYTES",
                   "DEBUG_TIMEOUT_S", "DEBUG_BARRIERS", DEBUG_PARAM, "TIMELINE", TIMELINE_PARAM,
                   TIMELINE_WAVE_PARAM, ir.GRID_BARRIER_PARAM}


def _local_names(func: ir.PrimFunc) -> dict:
    """The launcher's Python name for each parameter and descriptor (keyed by its own name), and
    for each descriptor's fields (``<name>_FIELDS``): the same name unless the launcher needs it
    or another already has it."""
    taken = set(_LAUNCHER_NAMES)
    out = {}
    descriptors = [d.name for d in func.attrs.get("tma_descriptors", [])]
    for name in [p.name for p in func.params] + descriptors + [f"{d}_FIELDS" for d in descriptors]:
        local = name
        while local in taken:
            local += "_"
        taken.add(local)
        out[name] = local
    return out


def _uses_scalars(values, scalars: set) -> bool:
    return any(isinstance(v, ir.Expr) and any(u in scalars for u in collect(v, ir.Var)) for v in values)


def _fields_lines(d, renamed, indent: str) -> list:
    """The fields of ``cuTensorMapEncodeTiled`` but the address, as a ``dict(...)``'s lines."""
    return [
        f"{indent}data_type={d.data_type},  # CU_TENSOR_MAP_DATA_TYPE_{TMA_TYPE_NAMES.get(d.data_type, '?')}",
        f"{indent}rank={d.rank},",
        f"{indent}global_dims={_tuple(d.global_dims, renamed)},  # innermost first, elements",
        f"{indent}global_strides_bytes={_tuple(d.global_strides_bytes, renamed) if d.global_strides_bytes else '()'},",
        f"{indent}box_dims={_tuple(d.box_dims)},",
        f"{indent}element_strides={_tuple(d.element_strides)},",
        f"{indent}interleave={d.interleave},  # CU_TENSOR_MAP_INTERLEAVE_NONE",
        f"{indent}swizzle={d.swizzle},  # CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[d.swizzle]}",
        f"{indent}l2_promotion={d.l2_promotion},  # CU_TENSOR_MAP_L2_PROMOTION_L2_{_L2[d.l2_promotion]}",
        f"{indent}oob_fill={d.oob_fill},  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
    ]


def generate_host(func: ir.PrimFunc, kernel_name: str, out_idx=None, debug_timeout_s: float | None = None,
                  timeline=None) -> str:
    launch = func.launch
    grid = _grid3(launch)
    local = _local_names(func)
    names = [local[p.name] for p in func.params]
    renamed = {p: ir.Var(local[p.name], p.dtype) for p in func.params
               if isinstance(p, ir.Var) and local[p.name] != p.name}
    scalars = {p for p in func.params if isinstance(p, ir.Var)}
    descriptors = func.attrs.get("tma_descriptors", [])
    static_fields = {d.name for d in descriptors
                     if not _uses_scalars((*d.global_dims, *d.global_strides_bytes), scalars)}
    static_grid = not launch.persistent_tiles and not _uses_scalars(grid, scalars)
    lines = [
        f'"""Host launcher for {kernel_name} (generated by tileworkbench {__version__})."""',
        "",
        f"KERNEL = {kernel_name!r}",
        f"PARAMS = {tuple(p.name for p in func.params)!r}",
        f"BLOCK = ({launch.total_threads}, 1, 1)",
        f"SMEM_BYTES = {func.attrs.get('smem_bytes', 0)}",
    ]
    if static_grid:
        lines.append(f"GRID = ({', '.join(_py(g) for g in grid)})")
    if debug_timeout_s:
        lines += [
            f"DEBUG_TIMEOUT_S = {float(debug_timeout_s)!r}  # tw.debug_barrier_timeout: waits give up after this",
            f"DEBUG_BARRIERS = {tuple(barrier_names(func))!r}  # barrier ids of the debug record",
        ]
    if timeline is not None:
        lines.append(f"TIMELINE = ({timeline.block_every}, {len(timeline.recorders)}, {timeline.stream_words})"
                     "  # tw.timeline: every k-th block records, streams per block, words per stream")
    for d in descriptors:
        if d.name in static_fields:
            lines += ["", f"# {d.name}: cuTensorMapEncodeTiled's fields but the tensor's address",
                      f"{local[d.name + '_FIELDS']} = dict("] + _fields_lines(d, renamed, "    ") + [")"]
    lines += [
        "",
        "",
        f"def launch(rt, {', '.join(names)}, stream=0):",
    ]
    args = []
    aligns = _alignments(func)
    if any(isinstance(p, ir.Buffer) for p in func.params):
        lines.append("    # each tensor checked against the kernel's signature; what comes back is its device pointer")
    for p in func.params:
        name = local[p.name]
        if isinstance(p, ir.Buffer):
            strides = _tuple(p.effective_strides(), renamed)
            lines.append(f"    {name} = rt.tensor({p.name!r}, {name}, shape={_tuple(p.shape, renamed)}, "
                         f"dtype={p.dtype.name!r}, strides={strides}, align={aligns[p.name]})")
        else:
            lines.append(f"    {name} = rt.scalar({p.name!r}, {name}, dtype={p.dtype.name!r})")
        args.append(name)
    for d in descriptors:
        if d.name in static_fields:
            lines.append(f"    {local[d.name]} = rt.encode_tiled({d.name!r}, {local[d.buffer]}, "
                         f"{local[d.name + '_FIELDS']})")
        else:
            lines += [f"    {local[d.name]} = rt.encode_tiled({d.name!r}, {local[d.buffer]}, dict("] + \
                _fields_lines(d, renamed, "        ") + ["    ))"]
        args.append(local[d.name])
    cooperative = ir.syncs_grid(func.body)
    if cooperative:
        lines.append(f"    {ir.GRID_BARRIER_PARAM} = rt.grid_barrier_word(stream)  # zeroed for this launch; "
                     "T.sync_grid counts arrivals in it")
        args.append(f"{ir.GRID_BARRIER_PARAM}.data.ptr")
    if debug_timeout_s:
        lines.append(f"    {DEBUG_PARAM} = rt.debug_record(stream)  # zeroed; a timed-out wait writes where it was")
        args.append(f"{DEBUG_PARAM}.data.ptr")
    if launch.persistent_tiles:
        lines.append(f"    # persistent: the {'x'.join(_py(g) for g in launch.grid)} tiles walked by the fewest blocks that "
                     "take as few rounds as all resident blocks would")
        lines.append(f"    grid = (rt.persistent_blocks(KERNEL, {launch.persistent_tiles}, BLOCK, SMEM_BYTES), 1, 1)")
    elif not static_grid:
        lines.append(f"    grid = ({', '.join(_py(g, renamed) for g in grid)})")
    if timeline is not None:
        lines.append(f"    {TIMELINE_PARAM} = rt.timeline_buffer(KERNEL, {'GRID' if static_grid else 'grid'}, TIMELINE, "
                     "stream)  # zeroed; kernel.timeline() reads it")
        lines.append(f"    {TIMELINE_WAVE_PARAM} = rt.timeline_wave(KERNEL, BLOCK, SMEM_BYTES)  # blocks resident at once")
        args += [TIMELINE_PARAM, TIMELINE_WAVE_PARAM]
    lines.append(f"    rt.launch(KERNEL, {'GRID' if static_grid else 'grid'}, BLOCK, SMEM_BYTES, "
                 f"({', '.join(args)}{',' if len(args) == 1 else ''}), stream"
                 f"{', cooperative=True' if cooperative else ''})")
    if debug_timeout_s:
        lines.append(f"    rt.check_debug_record(KERNEL, {DEBUG_PARAM}, DEBUG_BARRIERS, DEBUG_TIMEOUT_S, stream)")
    return "\n".join(lines) + "\n"


def _grid3(launch) -> list:
    """The launch's grid in three dimensions (the ones it leaves out are 1)."""
    return list(launch.grid) + [ir.const(1)] * (3 - len(launch.grid))


def _alignments(func: ir.PrimFunc) -> dict:
    """Each tensor parameter's alignment in bytes: the largest its own accesses or those of its
    views (``T.Tensor(shape, dtype, p.data)``) need."""
    views: dict = {}
    for alloc in collect(func.body, ir.Allocate):
        if alloc.buffer.attrs.get("view_of") is not None:
            views.setdefault(alloc.buffer.attrs["view_of"], []).append(alloc.buffer)
    return {p.name: max([p.attrs.get("align_bytes", 1)] + [v.attrs.get("align_bytes", 1) for v in views.get(p, ())])
            for p in func.params if isinstance(p, ir.Buffer)}


def fast_call_plan(func: ir.PrimFunc, debug_timeout_s: float | None = None, timeline=None) -> dict | None:
    """What the C launch path (``backend/fastcall.c``) needs to check and launch a call of this
    kernel, or None where it cannot: it takes kernels whose parameters are all tensors of fixed
    shape and strides (and the TMA tensor maps of them), launched on a fixed grid with no debug
    record, timeline buffer or grid barrier. The checks are the generated launcher's (``generate_host``), as
    plain numbers: ``{"grid", "persistent_tiles", "block", "smem_bytes", "params": [{"name",
    "dtype", "shape", "strides", "row_major": whether those are the row-major ones, "align"}], "maps": [{"name", "tensor": its tensor's index,
    "fields": the name of the launcher's constant that holds its other encoding fields}]}``. A
    persistent kernel's grid is None: ``persistent_tiles`` tiles over the blocks the runtime picks
    for the device (as its launcher asks ``rt.persistent_blocks``)."""
    launch = func.launch
    if launch.persistent_tiles:  # the runtime picks the blocks per device, once (Runtime.persistent_blocks)
        grid = None
    else:
        grid = [ir.const_int(g) for g in _grid3(launch)]
        if None in grid:
            return None
    if debug_timeout_s or timeline is not None or not func.params or ir.syncs_grid(func.body):
        return None  # (a grid barrier: a word zeroed per launch, a cooperative launch)
    aligns = _alignments(func)
    params = []
    for p in func.params:
        if not isinstance(p, ir.Buffer) or p.dtype.packed:
            return None
        shape = [ir.const_int(s) for s in p.shape]
        strides = [ir.const_int(s) for s in p.effective_strides()]
        if None in shape or None in strides:
            return None
        row_major = [ir.const_int(s) for s in p.row_major_strides()]
        params.append({"name": p.name, "dtype": p.dtype.name, "shape": shape, "strides": strides,
                       "row_major": strides == row_major, "align": aligns[p.name]})
    local = _local_names(func)
    names = [p.name for p in func.params]
    maps = [{"name": d.name, "tensor": names.index(d.buffer), "fields": local[d.name + "_FIELDS"]}
            for d in func.attrs.get("tma_descriptors", [])]
    return {"grid": grid, "persistent_tiles": launch.persistent_tiles or None, "block": [launch.total_threads, 1, 1],
            "smem_bytes": func.attrs.get("smem_bytes", 0), "params": params, "maps": maps}
