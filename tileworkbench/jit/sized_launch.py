"""C launchers for a kernel with ``T.dynamic`` sizes, one per set of sizes (issue 18).

A kernel whose sizes are known only at run time has no fixed shapes for the C launch path
(``backend/fastcall.c``) to check. Its Python launcher, though, decides everything a call needs
once the sizes are known: each tensor's shape, strides, dtype and alignment, the sizes it passes as
scalars, the tensor maps' fields and the grid. ``CallRecorder`` stands between that launcher and
the runtime for one call and notes those decisions (the real runtime makes every check and the
launch as before); ``sized_plan`` turns them into a fast-call plan for exactly these sizes (the
static plan's form, ``codegen.host.fast_call_plan``) and the kernel's parameter layout with the
sizes as constants (``Launcher.interleave``). ``Kernel`` keeps such launchers per set of sizes
(``SIZED_KEPT`` of them, each made on its sizes' second call: ``called_before``) and makes the
last one its entry, so the next call of the same sizes runs no Python frame; a call of other
sizes is handed back to the Python launcher by the C checks (the shapes differ), which then
switches the entry to those sizes' launcher.

The C launcher checks what the recorded call's launcher checked, as plain numbers: a tensor it
takes has the shapes, strides, dtype, device and alignment of that call, from which the Python
launcher would derive the same sizes, grid and tensor-map fields. On by default (the GPU tests of
it, tests/gpu/test_launch.py, passed on the H200 at 51d633b); ``TILEWORKBENCH_FASTCALL_SIZED=0``
turns it off.
"""

from __future__ import annotations

import os

from ..backend.tensors import row_major_strides

ENV = "TILEWORKBENCH_FASTCALL_SIZED"
SIZED_KEPT = 16  # launchers a kernel keeps, one per set of sizes (the oldest dropped first)
CALLED_KEPT = 64  # sets of sizes a kernel remembers having been called with once
_SCALAR_BYTES = {"int32": 4, "uint32": 4, "int64": 8, "uint64": 8}


def enabled() -> bool:
    """Whether ``T.dynamic`` kernels get C launchers per set of sizes (yes unless ``TILEWORKBENCH_FASTCALL_SIZED=0``)."""
    return os.environ.get(ENV, "1") != "0"


def called_before(called: dict, sizes) -> bool:
    """Whether a kernel was called with ``sizes`` before (``called``: the kernel's record of the sets
    of sizes it was called with once, the last ``CALLED_KEPT``), noting them. A launcher is made on a
    set of sizes' second call: making one costs about a third of a Python launch, which a loop of
    one size repays at once and calls whose sizes change every time would pay on every call."""
    if sizes in called:
        return True
    if len(called) >= CALLED_KEPT:
        called.pop(next(iter(called)))
    called[sizes] = True
    return False


class CallRecorder:
    """The runtime as one call of a generated launcher sees it: every method is the runtime's, and
    ``tensor``, ``scalar``, ``encode_tiled`` and ``launch`` also note what the launcher decided.
    ``others``: the other runtime methods the launcher used (a debug record, a timeline buffer,
    persistent blocks: calls a plan for fixed sizes does not cover)."""

    def __init__(self, runtime):
        self._runtime = runtime
        self.params: list = []  # ("tensor", {name, dtype, shape, strides, align, address}) or ("scalar", value, dtype)
        self.maps: list = []    # (name, address, fields)
        self.launched = None    # (grid, block, smem_bytes)
        self.others: list = []

    def tensor(self, name, value, shape, dtype, strides, align=1):
        address = self._runtime.tensor(name, value, shape=shape, dtype=dtype, strides=strides, align=align)
        self.params.append(("tensor", {"name": name, "dtype": dtype, "shape": [int(s) for s in shape],
                                       "strides": [int(s) for s in strides], "align": int(align),
                                       "address": int(address)}))
        return address

    def scalar(self, name, value, dtype):
        checked = self._runtime.scalar(name, value, dtype)
        self.params.append(("scalar", checked, dtype))
        return checked

    def encode_tiled(self, name, global_address, fields):
        self.maps.append((name, int(global_address), fields))
        return self._runtime.encode_tiled(name, global_address, fields)

    def launch(self, kernel_name, grid, block, smem_bytes, args, stream=0):
        self.launched = (tuple(int(g) for g in grid), tuple(int(b) for b in block), int(smem_bytes))
        return self._runtime.launch(kernel_name, grid, block, smem_bytes, args, stream)

    def __getattr__(self, name):
        self.others.append(name)
        return getattr(self._runtime, name)


def sized_plan(recorder: CallRecorder, out_idx) -> tuple | None:
    """(plan, layout, maps) for the sizes of the call ``recorder`` saw, or None where a plan for
    fixed sizes cannot stand for it: ``plan`` as ``codegen.host.fast_call_plan`` makes one (its
    tensors only), ``layout`` the kernel's parameters before its maps for ``Launcher.interleave``
    (a tensor's index, or (value, bytes) for a size), ``maps`` (name, tensor index, fields) of each
    tensor map; ``out_idx`` are indices of the kernel's parameters."""
    if recorder.launched is None or recorder.others:
        return None
    tensors, layout, outputs = [], [], set()
    for k, param in enumerate(recorder.params):
        if param[0] == "tensor":
            if k in out_idx:
                outputs.add(len(tensors))
            layout.append(len(tensors))
            tensors.append(param[1])
            continue
        _, value, dtype = param
        if dtype not in _SCALAR_BYTES:  # a float scalar: a call-time value, not a size
            return None
        layout.append((int(value), _SCALAR_BYTES[dtype]))
    addresses = [t["address"] for t in tensors]
    maps = []
    for name, address, fields in recorder.maps:
        if address not in addresses:
            return None
        maps.append((name, addresses.index(address), fields))
    grid, block, smem = recorder.launched
    params = [{"name": t["name"], "dtype": t["dtype"], "shape": t["shape"], "strides": t["strides"],
               "row_major": tuple(t["strides"]) == row_major_strides(t["shape"]), "align": t["align"]}
              for t in tensors]
    plan = {"grid": list(grid), "persistent_tiles": None, "block": list(block), "smem_bytes": smem,
            "params": params, "maps": [{"name": name, "tensor": i} for name, i, _ in maps], "outputs": sorted(outputs)}
    return plan, tuple(layout), maps
