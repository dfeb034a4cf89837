"""The pass pipeline: every pass, in order. This list *is* the compiler.

Each entry names a registered pass. ``PIPELINE`` lowers the tile program to the IR the analyses
read (``Artifact.func``); ``CODEGEN`` then decides what the code generator would otherwise decide
while printing (flat offsets, integer widths, loop forms), so that it only spells out the IR. The
trace records one snapshot per pass.
"""

from __future__ import annotations

from ..target import PassConfigKey

from . import (  # noqa: F401 - importing registers the passes
    carry_stage_counters,
    choose_shared_layouts,
    elide_private_syncs,
    elide_proxy_fences,
    emulate_exp2,
    fence_before_arrivals,
    guard_global_accesses,
    infer_fragment_layouts,
    inline_index_lets,
    instrument_timeline,
    inject_software_pipeline,
    insert_thread_syncs,
    isolate_starved_wgmmas,
    lower_tile_ops,
    linearize_accesses,
    localize_read_fragments,
    lower_tma,
    merge_parallel_dims,
    name_buffers_uniquely,
    partition_parallel_loops,
    peel_first_iteration,
    plan_shared_memory,
    prefetch_gather_indices,
    rasterize_blocks,
    reread_thread_index,
    rebase_shifted_nests,
    resolve_int_arithmetic,
    scalarize_loop_temporaries,
    scope_consumer_syncs,
    share_view_storage,
    simplify_ir,
    split_column_blocks,
    split_uniform_selects,
    stage_epilogue,
    stage_fragment_operands,
    store_int4_as_bytes,
    store_last_tile_by_tma,
    unwrap_persistent_walk,
    vectorize_loops,
    verify_draws,
    verify_register_counts,
    verify_scope_races,
    verify_shared_views,
    verify_tile_ops,
    verify_wgmma_waits,
    warp_specialize,
)

PIPELINE = [
    "store_int4_as_bytes",  # tile: int4 tensors and tiles -> their bytes (int4x2), addressed in bytes
    "verify_tile_ops",  # tile: reject what cannot be lowered, with the kernel line
    "verify_shared_views",  # tile: reject reading through one name what a T.view of a shared tile wrote through another
    "verify_draws",  # tile: reject random draws whose order or number the code would not keep
    "verify_register_counts",  # tile: reject T.set_max_nreg counts the block cannot hand over (a hang)
    "verify_wgmma_waits",  # tile: reject touching what a running T.wgmma_gemm reads or writes before T.wait_wgmma
    "split_column_blocks",  # tile: a shared tile gemms read in column blocks -> one tile a block
    "unwrap_persistent_walk",  # tile: a T.Persistent GEMM walk becomes a grid (made persistent again below)
    "inline_index_lets",  # tile: names for tile offsets (m0 = by * 128, kk = k * 64) replaced by their values
    "rebase_shifted_nests",  # tile: T.Parallel reading F[i + c, j] (c set outside) -> a nest over F's own indices
    "merge_parallel_dims",  # tile: T.Parallel(N, Q, H) indexing a fragment at [n, q * H + h] -> T.Parallel(N, Q * H)
    "stage_fragment_operands",  # tile: a fragment a gemm or a transposing loop cannot read from registers -> shared
    "localize_read_fragments",  # tile: a fragment read outside T.Parallel, written whole, is a per-thread array
    "rasterize_blocks",  # tile: GEMM blocks visited in panels for L2 reuse
    "warp_specialize",  # tile: producer warpgroup + full/empty mbarriers for a TMA/wgmma GEMM loop
    "stage_epilogue",  # tile: any other pipelined GEMM stores its result through shared memory + TMA
    "store_last_tile_by_tma",  # tile: a kernel's last copy of a whole shared tile to global memory is one TMA store
    "inject_software_pipeline",  # tile: T.Pipelined -> prologue/steady/epilogue, versioned buffers
    "choose_shared_layouts",  # tile: swizzle of every shared tile
    "share_view_storage",  # tile: a T.view of a shared tile lies over the tile's bytes where the syncs can order them
    "insert_thread_syncs",  # tile: __syncthreads between threads' shared-memory accesses
    "verify_scope_races",  # tile: reject a T.ws scope's read of what a scope beside it writes with no arrival after
    "infer_fragment_layouts",  # tile: which thread holds which fragment element
    "guard_global_accesses",  # tile: T.Parallel accesses to global tensors kept inside their shapes
    "isolate_starved_wgmmas",  # tile: where fragments outgrow the registers, no work scheduled into a wgmma's wait
    "lower_tma",  # lower: TMA copies, mbarriers -> tw:: calls; tensor-map descriptors
    "lower_tile_ops",  # lower: copy/fill/gemm/reduce -> loops and tw:: calls
    "split_uniform_selects",  # lower: a T.if_then_else decided alike for the whole tile is decided once per tile
    "partition_parallel_loops",  # lower: T.Parallel -> per-thread loops, fragments -> registers
    "vectorize_loops",  # lower: T.vectorized copies between a thread's array and a tensor in 16-byte accesses
    "elide_proxy_fences",  # lower: no per-iteration proxy fence where only wgmma/TMA read tiles
    "fence_before_arrivals",  # lower: a tile threads wrote for wgmma/TMA is fenced before an mbarrier arrival
    "scope_consumer_syncs",  # lower: consumer-side block barriers become named barriers
    "name_buffers_uniquely",  # lower: no two buffers share a name (scratch tiles of two scans of one tile)
    "plan_shared_memory",  # memory: offsets and alignment in dynamic shared memory
    "simplify",  # lower: index arithmetic canonicalised, decided branches dropped
    "elide_private_syncs",  # lower: no block barrier where each thread meets only its own elements across it
    "carry_stage_counters",  # lower: a 3-stage ring's slot/phase carried across iterations, not divided out
    "scalarize_loop_temporaries",  # lower: a thread's array carrying values only within a loop iteration -> a scalar
    "prefetch_gather_indices",  # lower: a pipelined gather's row indices loaded during the iteration before its issue
]


CODEGEN = [
    "peel_first_iteration",  # codegen: an overlapped two-gemm consumer loop runs its first iteration ahead of the loop
    "linearize_accesses",  # codegen: every access one element offset; result stores from a hoisted base
    "resolve_int_arithmetic",  # codegen: int64 where values may pass int32, C division where exact, loop forms
]


def pass_list(configs: dict) -> list[str]:
    return list(PIPELINE)


def codegen_pass_list(configs: dict) -> list[str]:
    # reread_thread_index runs where tw.reread_thread_index asks for it (jit.lower also tries it
    # where ptxas spills) and instrument_timeline (tw.timeline) last, only when asked for: other
    # kernels' traces and sources stay as they were.
    passes = list(CODEGEN)
    if emulate_exp2.exp2_emulation(configs):  # after the peel, so that both copies of the loop get it
        passes.insert(passes.index("peel_first_iteration") + 1, "emulate_exp2")
    return passes + (REREAD if configs.get(PassConfigKey.TW_REREAD_THREAD_INDEX.value) else []) + \
        (["instrument_timeline"] if instrument_timeline.timeline_every(configs) else [])


# What jit.lower runs after CODEGEN to compile a kernel a second way when ptxas spills
REREAD = ["reread_thread_index"]
