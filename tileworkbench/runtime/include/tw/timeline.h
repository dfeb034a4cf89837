// tw/timeline.h - timeline mode (pass config tw.timeline): a kernel records when its barrier waits,
// arrivals, TMA issues, wgmma issues and waits and TMA stores happen. Only kernels compiled with
// tw.timeline include this header (passes/instrument_timeline.py places the records).
//
// The buffer (the kernel's last parameter, zeroed by the host) holds, for every EVERY-th block in
// launch order, one stream per recording thread (the first thread of each warpgroup of a role):
// HEADER words, then at most CAPACITY events of two words each: the low 32 bits of clock64 and
// site | slot << 16 | parity << 31. The header keeps %globaltimer and clock64 when the stream
// opens and closes (the host puts every SM's clock64 on the global timer's nanoseconds with them),
// the number of events the thread tried to record (more than CAPACITY: the rest were dropped),
// the SM, the block and the thread. Events are stored as they happen, one 8-byte store by one
// thread: a stored event is fire-and-forget, and the pipeline's shared memory stays the kernel's.
// A thread records the sites it runs once it has opened a stream (the passes give each warpgroup of
// a role its first thread).
#pragma once
#include "common.h"

namespace tw {

template <unsigned int CAPACITY, unsigned int STREAMS>
struct Timeline {
  enum : unsigned int {
    GT_OPEN = 0, CLOCK_OPEN = 2, GT_CLOSE = 4, CLOCK_CLOSE = 6, COUNT = 8, SM = 9, BLOCK = 10, THREAD = 11,
    CLOSED = 12, HEADER = 16, STREAM_WORDS = HEADER + 2 * CAPACITY
  };
  unsigned int* streams;  // this block's streams; null in a block that does not record
  unsigned int* mine;     // this thread's stream: null but in a recording thread of a recording block
  unsigned int n;         // events this thread has come to (a recorder's count of its events)
  unsigned int tile_every;  // a persistent kernel's blocks record their every tile_every-th tile

  // BLOCK_EVERY: every how many blocks record; TILE_EVERY: in a persistent kernel, every how many
  // of a block's tiles (1 when blocks are sampled).
  __device__ __forceinline__ Timeline(unsigned int* buffer, unsigned int block_every, unsigned int tile_every = 1)
      : mine(nullptr), n(0), tile_every(tile_every) {
    const unsigned int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    streams = block % block_every == 0
        ? buffer + (unsigned long long)(block / block_every) * STREAMS * STREAM_WORDS : nullptr;
  }

  // Whether this block records (the pass keeps a plain copy of the body for blocks that do not).
  __device__ __forceinline__ bool samples_block() const { return streams != nullptr; }
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

  // Thread TX writes stream STREAM (of a recording block): its header now, its events from here on.
  template <int TX, int STREAM>
  __device__ __forceinline__ void open() {
    if (threadIdx.x == TX && streams != nullptr) {
      mine = streams + STREAM * STREAM_WORDS;
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

  // Every thread running the site comes here; only a recording thread stores, by a predicated
  // store and no branch, so the warp does not diverge and the loop around keeps its shape. (A
  // branch on the recording thread cost more; so did holding the clock for the next record to
  // store, which needs a register and a second store: docs/experiments.md, "Measured timelines".)
  __device__ __forceinline__ void record(unsigned int site, int slot, int parity) {
    const unsigned int info = site | ((unsigned int)slot & 0x7fffu) << 16 | ((unsigned int)parity & 1u) << 31;
    const unsigned int on = mine != nullptr && n < CAPACITY;
    unsigned int* e = mine + HEADER + 2 * n;
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.u32 p, %3, 0;\n @p st.global.v2.u32 [%0], {%1, %2};\n}\n" ::"l"(e),
        "r"((unsigned int)clock()), "r"(info), "r"(on));
    ++n;
  }

  template <int TX, int STREAM>
  __device__ __forceinline__ void close() {
    if (threadIdx.x == TX && mine != nullptr) {
      put64(mine + CLOCK_CLOSE, clock());
      put64(mine + GT_CLOSE, global_ns());
      mine[COUNT] = n;
      mine[CLOSED] = 1u;
    }
  }
};

}  // namespace tw
