// tw/grid_sync.h - T.sync_grid: a barrier of every thread of every block of the launch.
#pragma once
#include "common.h"

namespace tw {

// The host launches a kernel that calls this cooperatively (cuLaunchCooperativeKernel: the driver
// refuses a grid whose blocks cannot all be resident at once, so none waits for a block that
// cannot start) and passes `word`, one unsigned int it zeroed for this launch alone.
//
// Each block's first thread adds to `word` once per barrier: block 0 adds 0x80000000 - (blocks - 1),
// every other block 1, so a barrier's arrivals sum to 0x80000000 and flip the word's top bit once,
// whatever the order, leaving the low bits as they were for the next barrier. A thread waits until
// the top bit differs from the one its own add saw, which happens exactly when the last block has
// added; `while_waiting` runs before each look at the word. The fences make each block's global
// writes before the barrier visible to every block after it.
template <typename WhileWaiting>
__device__ __forceinline__ void grid_barrier(unsigned int* word, WhileWaiting while_waiting) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first_block = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const unsigned int add = first_block ? 0x80000000u - (blocks - 1u) : 1u;
    __threadfence();
    const unsigned int before = ::atomicAdd(word, add);
    unsigned int now;
    do {
      while_waiting();
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(word) : "memory");
    } while (((before ^ now) & 0x80000000u) == 0u);
    __threadfence();
  }
  __syncthreads();
}

__device__ __forceinline__ void grid_sync(unsigned int* word) {
  grid_barrier(word, [] {});
}

// >>> debug mode: only generated code with tw.debug_barrier_timeout gets this (codegen strips it)
// In debug mode a thread whose mbarrier wait timed out leaves the kernel (tw/sync.h); a block it
// leaves may then never reach the grid barrier, so the waiting threads watch the debug record
// too and leave once a wait anywhere has reported.
__device__ __forceinline__ void grid_sync(unsigned int* word, const unsigned int* record) {
  grid_barrier(word, [record] {
    if (debug::aborted(record)) debug::leave();
  });
}
// <<< debug mode

}  // namespace tw
