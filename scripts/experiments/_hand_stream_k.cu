// The kernel of scripts/experiments/stream_k.py: the compiler's persistent warp-specialised GEMM
// (128x256x64 tiles, 3 stages, two consumer warpgroups) rewritten by hand with a stream-K first
// wave. The script puts the compiler's headers and wgmma functor in front and fills in ELEM
// (element type), WGMMA (functor), TILES_M, TILES_N, K_ITERS and PANEL.
//
// Schedule (P = gridDim.x blocks, one per multiprocessor, all resident):
//   - SK_TILES = TILES % P tiles (the ones that would make a partial last wave) are shared out by
//     K iterations: block b takes iterations [b * SK_ITERS / P, (b + 1) * SK_ITERS / P) of the
//     SK tiles laid end to end, so it computes at most a tile's tail and the next tile's head.
//     It computes the head first: then every block starts at k = 0 and stays within a few
//     iterations of the others, so the blocks read the same K slices of A and B at about the same
//     time and L2 serves them (in tile order, tails first, they read all of K at once and ran at
//     HBM speed: 590 instead of 730 TFLOP/s at 4096^3).
//   - the remaining tiles are data-parallel: block b takes SK_TILES + b, + P, + 2P, ...
// A piece that does not reach the tile's last iteration writes its fp32 accumulators to workspace
// slot b and sets flag b; the block holding the tile's last piece waits for the flags of the
// blocks before it that share the tile, adds their partials and stores the tile. A block writes at
// most one partial, in its first piece, so none waits before it has published what others wait for.
//
// Switches (see stream_k.py): SK_OFF (every tile data-parallel, decided at compile time),
// SK_RUNTIME_OFF (the same, decided at run time), SK_AT_END (the stream-K tiles are the last ones in
// raster order), DP_FIRST (data-parallel tiles before the stream-K pieces), ZERO_TRIP_LOOP (the
// main loop written as a for loop), SK_TIMES (per-block timeline).
#define TILES (TILES_M * TILES_N)
// SK_AT_END: the stream-K tiles are the last TILES % P in raster order (default: the first).
#if defined(SK_OFF) || defined(SK_RUNTIME_OFF)
#define SK_TILE0 0
#define DP_TILE0 0
#elif defined(SK_AT_END)
#define SK_TILE0 (TILES - TILES % (int)gridDim.x)
#define DP_TILE0 0
#else
#define SK_TILE0 0
#define DP_TILE0 (TILES % (int)gridDim.x)
#endif

__device__ float4 tw_sk_workspace[SK_SLOTS * 32 * 256];
__device__ int tw_sk_flags[SK_SLOTS];
#ifdef SK_TIMES
// Per block: [0] start, [1 + i] the end of unit i (up to 6), [7] nanoseconds spent waiting for flags.
__device__ unsigned long long tw_sk_times[SK_SLOTS * 8];
__device__ __forceinline__ unsigned long long sk_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define SK_STAMP(i, value) if (tx == 0) tw_sk_times[b * 8 + (i)] = (value)
#else
#define SK_STAMP(i, value)
#endif

__device__ __forceinline__ void sk_signal(int* flag) {
  asm volatile("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.b32 [%0], %1;" ::"l"(flag), "r"(1) : "memory");
}

__device__ __forceinline__ void sk_wait(int* flag) {
  int v = 0;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
  } while (v == 0);
}

struct SkUnit {
  int tile, k0, k1;
};

// Block b's units: its stream-K pieces (at most two: the piece of the last tile its range touches
// first, then the piece of the first) and its data-parallel tiles.
struct Schedule {
  int lo, hi;          // the block's stream-K iterations [lo, hi)
  int dp_first, dp_count;
  int sk_count;

  __device__ __forceinline__ Schedule(int b, int P, int sk_tiles) {
    const long long sk_iters = (long long)sk_tiles * K_ITERS;
    lo = (int)(b * sk_iters / P);
    hi = (int)((b + 1) * sk_iters / P);
    sk_count = lo < hi ? (hi - 1) / K_ITERS - lo / K_ITERS + 1 : 0;
    dp_first = DP_TILE0 + b;
    const int dp_end = DP_TILE0 + TILES - sk_tiles;
    dp_count = dp_first < dp_end ? (dp_end - dp_first + P - 1) / P : 0;
  }

  __device__ __forceinline__ int count() const { return sk_count + dp_count; }

  __device__ __forceinline__ SkUnit unit(int i, int P) const {
#ifdef DP_FIRST
    const bool dp = i < dp_count;
    const int j = dp ? i : i - dp_count;
#else
    const bool dp = i >= sk_count;
    const int j = dp ? i - sk_count : i;
#endif
    SkUnit u;
    if (dp) {
      u.tile = dp_first + j * P;
      u.k0 = 0;
      u.k1 = K_ITERS;
    } else {
      const int sk_tile = (hi - 1) / K_ITERS - j;
      u.tile = SK_TILE0 + sk_tile;
      u.k0 = max(lo - sk_tile * K_ITERS, 0);
      u.k1 = min(hi - sk_tile * K_ITERS, K_ITERS);
    }
    return u;
  }
};

__device__ __forceinline__ void tile_coords(int tile, int& by, int& bx) {
  const int panel_first = (tile / (PANEL * TILES_N)) * PANEL;
  const int panel_rows = min(TILES_M - panel_first, PANEL);
  const int in_panel = tile % (PANEL * TILES_N);
  by = panel_first + in_panel % panel_rows;
  bx = in_panel / panel_rows;
}

extern "C" __global__ void __launch_bounds__(384, 1) main_kernel(
    ELEM* __restrict__ A,
    ELEM* __restrict__ B,
    ELEM* __restrict__ C,
    const __grid_constant__ CUtensorMap A_desc,
    const __grid_constant__ CUtensorMap B_desc,
    const __grid_constant__ CUtensorMap C_desc) {
  extern __shared__ __align__(1024) unsigned char tw_smem[];
  const int tx = threadIdx.x;
  ELEM* A_shared = reinterpret_cast<ELEM*>(tw_smem + 0);
  ELEM* B_shared = reinterpret_cast<ELEM*>(tw_smem + 49152);
  float C_local[128];
  ELEM* C_local_out = reinterpret_cast<ELEM*>(tw_smem + 147456);
  tw::Barrier* stage_full = reinterpret_cast<tw::Barrier*>(tw_smem + 212992);
  tw::Barrier* stage_empty = reinterpret_cast<tw::Barrier*>(tw_smem + 213016);
  if (tx == 0) {
    for (int i = 0; i < 3; ++i) {
      stage_full[i].init(32);
      stage_empty[i].init(256);
    }
  }
  tw::fence_barrier_init();
  __syncthreads();
  const int P = gridDim.x;
  const int b = blockIdx.x;
#if defined(SK_OFF)
  const int sk_tiles = 0;  // every tile data-parallel: the schedule's own cost
#elif defined(SK_RUNTIME_OFF)
  const int sk_tiles = (TILES % P) * ((int)gridDim.y - 1);  // 0, but not known to the compiler
#else
  const int sk_tiles = TILES % P;
#endif
  const int sk_iters = sk_tiles * K_ITERS;
  const Schedule schedule(b, P, sk_tiles);
  if (tx >= 256) {  // producer warpgroup
    tw::setmaxnreg_dec<24>();
    if (tx < 288) {
      int slot = 0, phase = 0;
      #pragma unroll 1
      for (int i = 0; i < schedule.count(); ++i) {
        const SkUnit u = schedule.unit(i, P);
        int by, bx;
        tile_coords(u.tile, by, bx);
        #pragma unroll 1
        for (int k = u.k0; k < u.k1; ++k) {
          stage_empty[slot].wait(1 - phase);
          if (tw::shuffle_elect<32>()) {
            stage_full[slot].expect_transaction(16384);
            tw::tma_load(A_desc, stage_full[slot], (&tw::swizzled<ELEM, 128>(A_shared, (slot * 8192))), (k * 64), (by * 128));
          }
          if (tw::shuffle_elect<32>()) {
            stage_full[slot].expect_transaction(32768);
            tw::tma_load(B_desc, stage_full[slot], (&tw::swizzled<ELEM, 128>(B_shared, (slot * 16384))), 0, (k * 64), (bx * 4));
          }
          stage_full[slot].arrive();
          slot = (slot == 2) ? 0 : slot + 1;
          phase = (slot == 0) ? 1 - phase : phase;
        }
      }
    }
  } else {  // consumer warpgroups
    tw::setmaxnreg_inc<240>();
    int slot = 0, phase = 0, last = 2;
#ifdef SK_TIMES
    int unit = 0;
    unsigned long long waited = 0;
    SK_STAMP(0, sk_now());
#endif
    #pragma unroll 1
    for (int i = 0; i < schedule.count(); ++i) {
      const SkUnit u = schedule.unit(i, P);
      int by, bx;
      tile_coords(u.tile, by, bx);
      #pragma unroll
      for (int j = 0; j < 128; ++j) C_local[j] = 0.0f;
      // Every unit has at least one iteration. Written as a for loop, which to ptxas may run zero
      // times, the kernel ran 17% slower even where no stream-K piece ever ran (see stream_k.py).
#ifdef ZERO_TRIP_LOOP
      #pragma unroll 1
      for (int k = u.k0; k < u.k1; ++k) {
#else
      int k = u.k0;
      #pragma unroll 1
      do {
#endif
        stage_full[slot].wait(phase);
        tw::wgmma_gemm_ss<128, 256, 64, 2, 128, 128, false, WGMMA, 1>((&tw::swizzled<ELEM, 128>(A_shared, (slot * 8192))), (&tw::swizzled<ELEM, 128>(B_shared, (slot * 16384))), C_local, tx);
        if (k > u.k0) stage_empty[last].arrive();
        last = slot;
        slot = (slot == 2) ? 0 : slot + 1;
        phase = (slot == 0) ? 1 - phase : phase;
#ifdef ZERO_TRIP_LOOP
      }
#else
      } while (++k < u.k1);
#endif
      tw::wgmma_wait<0>();
      stage_empty[last].arrive();
      if (u.k1 != K_ITERS) {  // a head or middle piece: publish the partial sums for the tile's owner
        float4* mine = tw_sk_workspace + (size_t)b * 32 * 256;
        #pragma unroll
        for (int j = 0; j < 32; ++j)
          __stcg(mine + j * 256 + tx, make_float4(C_local[4 * j], C_local[4 * j + 1], C_local[4 * j + 2], C_local[4 * j + 3]));
        tw::sync_consumers<256>();
        if (tx == 0) sk_signal(&tw_sk_flags[b]);
#ifdef SK_TIMES
        SK_STAMP(1 + min(unit, 5), sk_now());
        ++unit;
#endif
        continue;
      }
      if (u.k0 != 0) {  // the tail of a shared tile: add the earlier blocks' pieces
        const int tile_start = (u.tile - SK_TILE0) * K_ITERS;
        #pragma unroll 1
        for (int c = b - 1; c >= 0 && (int)((long long)(c + 1) * sk_iters / P) > tile_start; --c) {
#ifdef SK_TIMES
          const unsigned long long wait_start = sk_now();
#endif
          if (tx == 0) sk_wait(&tw_sk_flags[c]);
#ifdef SK_TIMES
          waited += sk_now() - wait_start;
#endif
          tw::sync_consumers<256>();
          const float4* theirs = tw_sk_workspace + (size_t)c * 32 * 256;
          #pragma unroll
          for (int j = 0; j < 32; ++j) {
            const float4 v = __ldcg(theirs + j * 256 + tx);
            C_local[4 * j] += v.x;
            C_local[4 * j + 1] += v.y;
            C_local[4 * j + 2] += v.z;
            C_local[4 * j + 3] += v.w;
          }
          if (tx == 0) tw_sk_flags[c] = 0;  // for the next launch; nobody else reads it in this one
        }
      }
      tw::tma_store_wait<true>();
      tw::sync_consumers<256>();
      const int C_local_out_thread = ((((((tx / 128) * 4096) + (((tx % 128) / 32) * 1024)) + (((tx % 32) % 8) * 64)) + ((((tx % 32) / 8) % 2) * 512)) + ((((tx % 32) / 8) / 2) * 8));
      #pragma unroll
      for (int mm = 0; mm < 16; ++mm) {
        tw::store_matrix_x4((&tw::swizzled<ELEM, 128>(C_local_out, (C_local_out_thread + ((((mm * 16) / 64) * 8192) + ((mm * 16) % 64))))), C_local[(mm * 8)], C_local[((mm * 8) + 1)], C_local[((mm * 8) + 2)], C_local[((mm * 8) + 3)], C_local[((mm * 8) + 4)], C_local[((mm * 8) + 5)], C_local[((mm * 8) + 6)], C_local[((mm * 8) + 7)]);
      }
      tw::fence_proxy_async();
      tw::sync_consumers<256>();
      if (tx == 0) {
        tw::tma_store(C_desc, (&tw::swizzled<ELEM, 128>(C_local_out, 0)), 0, (by * 128), (bx * 4));
        tw::tma_store_arrive();
      }
#ifdef SK_TIMES
      SK_STAMP(1 + min(unit, 5), sk_now());
      ++unit;
#endif
    }
    tw::tma_store_wait<true>();
#ifdef SK_TIMES
    SK_STAMP(7, waited);
#endif
  }
}
