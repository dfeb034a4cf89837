// tw/timeline.h - timeline mode (pass config tw.timeline): a kernel records when its barrier waits,
// arrivals, TMA issues, wgmma issues and waits and TMA stores happen. Only kernels compiled with
// tw.timeline include this header (passes/instrument_timeline.py places the records).
//
// The buffer (the kernel's timeline parameter, zeroed by the host) holds, for every BLOCK_EVERY-th
// block in launch order, one stream per recording thread (the first thread of each warpgroup of a
// role): HEADER words, then at most CAPACITY events of two words each: the low 32 bits of clock64
// and site | slot << 16 | parity << 31. The header keeps %globaltimer and clock64 when the stream
// opens and closes (the host puts every SM's clock64 on the global timer's nanoseconds with them),
// the number of events the thread tried to record (more than CAPACITY: the rest were dropped),
// the SM, the block and the thread.
//
// The recording thread's warp keeps the events: event i is held in lane i % 32's registers (a
// predicated move), and every 32 events the warp stores the 32 at once, one coalesced 256-byte
// store, so that a record costs no store of its own (a store before an arrival, which releases the
// thread's writes, held the arrival back: docs/experiments.md, "Measured timelines"). The lanes of
// the warp run every record together (the pass records only where whole warps run), so they count
// alike; the close checks that and marks the stream DIVERGED where they did not.
//
// Sampled blocks (BLOCK_EVERY > 1) of the grid's last wave (WAVE: the blocks resident at once, which
// the host passes) do not record when the grid has more than one: a recording block runs a little
// longer, and one running at the end lengthens the whole kernel (docs/experiments.md, "Measured
// timelines"). Their streams stay unopened; the sample is of the kernel before its tail.
#pragma once
#include "common.h"

namespace tw {

template <unsigned int CAPACITY, unsigned int STREAMS>
struct Timeline {
  enum : unsigned int {
    GT_OPEN = 0, CLOCK_OPEN = 2, GT_CLOSE = 4, CLOCK_CLOSE = 6, COUNT = 8, SM = 9, BLOCK = 10, THREAD = 11,
    CLOSED = 12, DIVERGED = 13, HEADER = 16, STREAM_WORDS = HEADER + 2 * CAPACITY
  };
  enum : unsigned int { NONE = ~0u };
  unsigned int* buffer;  // the kernel's timeline parameter (fewer than 2^32 words: the host checks)
  unsigned int first;    // this block's first stream's word in the buffer (NONE: the block does not record)
  unsigned int at;       // this warp's stream's word (NONE but in a recording warp of a recording block)
  unsigned int n;         // events this thread has come to (in a recording warp, its stream's count)
  unsigned int tile_every;  // a persistent kernel's blocks record their every tile_every-th tile
  unsigned int held_clock, held_info;  // the event this lane holds until the warp stores 32

  // BLOCK_EVERY: every how many blocks record; TILE_EVERY: in a persistent kernel, every how many
  // of a block's tiles (1 when blocks are sampled).
  __device__ __forceinline__ Timeline(unsigned int* buffer, unsigned int block_every, unsigned int tile_every = 1,
                                      unsigned int wave = 0)
      : buffer(buffer), at(NONE), n(0), tile_every(tile_every), held_clock(0), held_info(0) {
    const unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    first = block % block_every == 0 ? block / block_every * STREAMS * STREAM_WORDS : NONE;
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    if (block_every > 1 && blocks > wave && block >= blocks - wave) first = NONE;  // the last wave
  }

  // Whether this block records (the pass keeps a plain copy of the body for blocks that do not).
  __device__ __forceinline__ bool samples_block() const { return first != NONE; }
  // Whether this block records its tile_iter-th tile: staggered by block, so that the tiles
  // recorded at one time are spread over the grid.
  __device__ __forceinline__ bool samples_tile(int tile_iter) const {
    return ((unsigned int)tile_iter + blockIdx.x) % tile_every == 0;
  }

  static __device__ __forceinline__ unsigned long long clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t));
    return t;
  }
  static __device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  static __device__ __forceinline__ void put64(unsigned int* at, unsigned long long v) {
    at[0] = (unsigned int)v;
    at[1] = (unsigned int)(v >> 32);
  }

  // Thread TX's warp writes stream STREAM (of a recording block): TX its header now, the warp its
  // events from here on.
  template <int TX, int STREAM>
  __device__ __forceinline__ void open() {
    if ((threadIdx.x >> 5) == (TX >> 5) && first != NONE) {
      at = first + STREAM * STREAM_WORDS;
    }
    if (threadIdx.x == TX && first != NONE) {
      unsigned int* mine = buffer + at;
      unsigned int sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      put64(mine + GT_OPEN, global_ns());
      put64(mine + CLOCK_OPEN, clock());
      mine[SM] = sm;
      mine[BLOCK] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      mine[THREAD] = TX;
      mine[CLOSED] = 0u;  // the buffer is zeroed once, not per launch: a stream counts once this launch closes it
    }
  }

  // The warp stores the events its lanes below LANES hold, events FROM, FROM + 1, ... (those
  // within the capacity; the rest are dropped, counted by the header).
  __device__ __forceinline__ void store_held(unsigned int from, unsigned int lanes) {
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int on = at != NONE && lane < lanes && from + lane < CAPACITY;
    unsigned int* e = buffer + at + HEADER + 2 * (from + lane);
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.u32 p, %3, 0;\n @p st.global.v2.u32 [%0], {%1, %2};\n}\n" ::"l"(e),
        "r"(held_clock), "r"(held_info), "r"(on));
  }

  // Every thread running the site comes here, the lanes of a warp together: lane n % 32 takes the
  // event (no branch, no store), and the 32nd event of a run has the warp store the run (a branch
  // the warp takes as one). Outside a recording warp the moves go nowhere and nothing is stored.
  __device__ __forceinline__ void record(unsigned int site, int slot, int parity) {
    const unsigned int info = site | ((unsigned int)slot & 0x7fffu) << 16 | ((unsigned int)parity & 1u) << 31;
    const unsigned int t = (unsigned int)clock();
    const unsigned int at = n & 31u;
    if ((threadIdx.x & 31u) == at) {
      held_clock = t;
      held_info = info;
    }
    if (at == 31u) store_held(n - 31u, 32u);
    ++n;
  }

  template <int TX, int STREAM>
  __device__ __forceinline__ void close() {
    if ((threadIdx.x >> 5) == (TX >> 5) && at != NONE) {
      store_held(n & ~31u, n & 31u);  // the last, partial run
      const unsigned int warp = __activemask();
      const bool diverged = warp != 0xffffffffu || !__all_sync(warp, __shfl_sync(warp, n, TX & 31) == n);
      if (threadIdx.x == TX) {
        unsigned int* mine = buffer + at;
        put64(mine + CLOCK_CLOSE, clock());
        put64(mine + GT_CLOSE, global_ns());
        mine[COUNT] = n;
        mine[DIVERGED] = diverged ? 1u : 0u;
        mine[CLOSED] = 1u;
      }
    }
  }
};

}  // namespace tw
