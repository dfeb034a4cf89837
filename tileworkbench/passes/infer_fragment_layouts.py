"""infer_fragment_layouts: give every fragment the layout that says which thread holds what.

Expects: IR where fragments are still whole-block tiles (``alloc_fragment``).
Guarantees: ``buffer.attrs["layout"]`` on every fragment: for a ``T.gemm`` accumulator, the
wgmma layout of ``tw::wgmma_gemm_ss`` when ``choose_shared_layouts`` put its gemms on the wgmma
path (``Gemm.plan``), else the mma.sync layout of ``tw::gemm_ss`` (the warp grid chosen so the block's warps tile
the accumulator); a blocked layout (element ``i`` in thread ``i % threads``)
for every other fragment. Later passes rewrite all accesses through this one layout.
The fragments' registers per thread are estimated (their elements each thread holds, in 32-bit
words); past ``REGISTER_LIMIT`` the kernel is refused at the fragment that crosses it: a thread has
255 registers, and NVRTC's time grows fast past that (8 s at 1024 words, 39 s at 2048 on the CPU
machine), so such a kernel would take minutes to compile only to spill.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.layout import BlockedLayout, MmaAccumLayout, WgmmaAccumLayout, choose_warp_grid
from ..ir.visitor import collect
from .manager import register

REGISTER_LIMIT = 1024  # 32-bit words of fragments per thread; 4x the 255 registers a thread has


@register("infer_fragment_layouts", "tile")
def infer_fragment_layouts(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    threads = func.launch.threads
    layouts: dict[int, object] = {}
    for gemm in collect(func.body, ir.Gemm):
        c = gemm.c.buffer
        if c.scope != "fragment":
            raise CompileError("T.gemm accumulates into a fragment (T.alloc_fragment)", gemm.loc)
        if c.dtype.name != "float32":
            raise CompileError(f"T.gemm accumulates in float32; {c.name} is {c.dtype.name}", gemm.loc)
        m, n = c.static_shape()
        if threads % 32:
            raise CompileError("T.gemm needs whole warps (threads a multiple of 32)", gemm.loc)
        plan = gemm.plan
        grid = choose_warp_grid(m, n, threads // 32)
        if plan is None and grid is None:
            raise CompileError(f"T.gemm: a {m}x{n} accumulator cannot be split over {threads // 32} warps "
                               "in 16x8 mma tiles; use tile sizes that are multiples of 16 per warp", gemm.loc)
        layout = WgmmaAccumLayout((m, n), plan.warpgroups) if plan else MmaAccumLayout((m, n), *grid)
        previous = layouts.get(id(c))
        if previous is not None and previous != layout:
            raise CompileError(f"{c.name} is the accumulator of two gemms with different shapes", gemm.loc)
        layouts[id(c)] = layout
        c.attrs["layout"] = layout
    words, parts = 0, []
    for alloc in collect(func.body, ir.Allocate):
        buf = alloc.buffer
        if buf.scope != "fragment":
            continue
        if id(buf) not in layouts:
            buf.attrs["layout"] = BlockedLayout(buf.static_shape(), threads)
        layout = buf.attrs["layout"]
        own = -(-layout.local_size * buf.dtype.storage_bits // 32)
        words += own
        parts.append(f"{buf.name}: {'x'.join(map(str, buf.static_shape()))} {buf.dtype.name} over {threads} "
                     f"threads is {own}")
        if words > REGISTER_LIMIT:
            raise CompileError(f"the kernel's fragments need about {words} 32-bit registers per thread "
                               f"({'; '.join(parts)}); a thread has 255, and past {REGISTER_LIMIT} the CUDA "
                               f"compiler would run for minutes: use smaller tiles or more threads", alloc.loc)
    return func.with_body(func.body)
