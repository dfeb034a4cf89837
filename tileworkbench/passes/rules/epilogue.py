"""Epilogue rules: an accumulator copied to global memory goes through shared memory and a TMA store.

Used by ``warp_specialize`` (the consumers' epilogue) and ``stage_epilogue`` (every other
pipelined GEMM on sm_90a). A fragment -> 16-bit (or FP8) global ``T.copy`` stored from registers writes
each thread's two neighbouring results at scattered rows (half-filled 32-byte sectors); written
to a swizzled shared tile and stored by one TMA bulk copy it leaves in whole lines.
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir import nodes as ir
from ...ir.visitor import collect
from . import gemm as gemm_rules
from . import tma as tma_rules


def shared_round_trip(epilogue: list, top: list) -> tuple[list, ir.Buffer] | None:
    """``T.copy(fragment, S); T.copy(S, global tile)``, a result staged through a shared tile ``S`` of
    the global tensor's type that no other statement of ``top`` (the kernel's top level) names (TileLang's examples stage their
    TMA store so): ``([the one T.copy(fragment, global tile) it amounts to], S)``, else None.
    Both convert the fragment's values to the tensor's type once, so the stores are the same. The
    caller takes it only where ``staged_store`` stages the one copy through a tile of its own
    (swizzled, and placed where the kernel's schedule allows), and then drops ``S``'s allocation;
    elsewhere the user's staging stays as written."""
    pre, epilogue = _leading_register_work(epilogue, 2)
    if len(epilogue) != 2 or not all(isinstance(x, ir.Copy) and x.instruction is None for x in epilogue):
        return None
    into, out = epilogue
    tile = into.dst.buffer
    if into.src.buffer.scope != "fragment" or tile.scope != "shared" or not into.dst.is_full:
        return None
    if out.src.buffer is not tile or not out.src.is_full or out.dst.buffer.scope != "global":
        return None
    if tile.dtype != out.dst.buffer.dtype:
        return None  # a round trip through another type rounds where the one copy would not
    rest = [x for x in top if all(x is not y for y in epilogue)
            and not (isinstance(x, ir.Allocate) and x.buffer is tile)]
    if any(b is tile for x in rest for b in collect(x, ir.Buffer)):
        return None
    return pre + [ir.Copy(into.src, out.dst, loc=out.loc)], tile


def _leading_register_work(epilogue: list, tail: int) -> tuple[list, list]:
    """(the statements before the last ``tail`` that touch no shared memory, the rest): attention's
    ``acc_o[i, j] /= logsum[i]`` runs in registers ahead of its staged copies, and stays where it is."""
    cut = max(0, len(epilogue) - tail)
    pre = epilogue[:cut]
    if any(b.scope == "shared" for x in pre for b in collect(x, ir.Buffer)):
        return [], epilogue
    return pre, epilogue[cut:]


def staged_store(epilogue: list, available_bytes: int | None, mode: str) -> tuple[ir.Buffer, list] | None:
    """An epilogue that is one ``T.copy(fragment, global tile)`` of 16-bit (or FP8) results, rewritten to go
    through a shared tile and one TMA store: (the shared tile, the new statements), else None
    (also when the tile needs more than ``available_bytes``, the pipeline's dead bytes).

    ``mode`` says who runs it and where the tile lives:
      * ``"consumers"`` (a warp-specialised block): over the pipeline's tiles
        (``attrs["reuses_pipeline_tiles"]``), dead once every consumer is past its last wgmma, so
        a consumer barrier comes first;
      * ``"persistent"``: bytes of its own (the producer refills the pipeline's meanwhile); before
        it is rewritten the previous tile's store must have read it (every thread waits, then the
        barrier); the caller waits for the block's last store after the tile loop;
      * ``"block"`` (every thread, after its pipelined loop): a plain shared tile first used after
        the loop, which ``plan_shared_memory`` places over the dead pipeline tiles behind an
        async-proxy fence and a block barrier.
    """
    pre, epilogue = _leading_register_work(epilogue, 1)
    if len(epilogue) != 1 or not isinstance(epilogue[0], ir.Copy):
        return None
    copy = epilogue[0]
    src, dst = copy.src, copy.dst
    if src.buffer.scope != "fragment" or dst.buffer.scope != "global" or not src.is_full:
        return None
    if dst.buffer.dtype.name not in ("float16", "bfloat16", "float8_e4m3", "float8_e5m2") or \
            dst.static_extents() is None:
        return None
    shape = [e for e in dst.static_extents() if e != 1]
    if shape != list(src.buffer.static_shape()):
        return None
    if any(ir.const_int(s) is None for s in dst.buffer.effective_strides()[:-1]):
        return None  # a row stride known only at run time (T.dynamic) may be no multiple of TMA's 16 bytes
    tile = ir.Buffer(f"{src.buffer.name}_out", tuple(ir.const(n) for n in shape), dst.buffer.dtype, "shared",
                     attrs={"reuses_pipeline_tiles": True} if mode == "consumers" else {}, loc=copy.loc)
    if available_bytes is not None and tile.dtype.bytes_for(tile.numel) > available_bytes:
        return None
    # with the panels choose_shared_layouts will give the tile (a 512-column one: 64 a panel), where
    # it can (gemm_rules.panels_fit is its test too)
    panel = tma_rules.wide_tile_panel(tile)
    if panel and not gemm_rules.panels_fit(tile, panel, [(dst, tile)]):
        panel = 0
    try:
        tma_rules.build_descriptor(dst, tile, copy.loc, panel or None)
    except CompileError:
        return None
    write, store = ir.Copy(src, ir.Region.full(tile), loc=copy.loc), ir.TmaCopy(ir.Region.full(tile), dst, loc=copy.loc)
    if mode == "persistent":
        return tile, pre + [ir.TmaStoreWait(read=True, loc=copy.loc),  # the previous tile's store has read the tile
                            ir.SyncThreads(), write, store]
    done = ir.TmaStoreWait(read=True, loc=copy.loc)  # the tile is read before the block may exit
    if mode == "consumers":
        return tile, pre + [ir.SyncThreads(),  # every consumer is past its last wgmma: the pipeline's bytes are free
                            write, store, done]
    return tile, pre + [write, store, done]
