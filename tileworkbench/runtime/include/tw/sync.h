// tw/sync.h - mbarriers and the fences around them (PTX ISA: mbarrier, fence.proxy.async).
#pragma once
#include "common.h"

namespace tw {

__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Orders this thread's generic-proxy shared-memory accesses before later async-proxy ones
// (TMA, wgmma) and the other way round.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// An mbarrier in shared memory (8 bytes). Generated code names arrays of them after the user's
// barrier and calls these members.
struct alignas(8) Barrier {
  uint64_t state;

  __device__ __forceinline__ unsigned int addr() const { return smem_addr(this); }

  __device__ __forceinline__ void init(int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(addr()), "r"(count) : "memory");
  }

  __device__ __forceinline__ void arrive() {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(addr())
                 : "memory");
  }

  // Raise the transaction count the current phase waits for, without arriving.
  __device__ __forceinline__ void expect_transaction(unsigned int bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(addr()), "r"(bytes)
                 : "memory");
  }

  __device__ __forceinline__ void arrive_and_expect_tx(unsigned int bytes) {
    asm volatile(
        "{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(addr()),
        "r"(bytes)
        : "memory");
  }

  __device__ __forceinline__ bool try_wait(int parity) const {
    unsigned int done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr()), "r"(parity)
        : "memory");
    return done != 0;
  }

  // Wait until the phase with this parity has completed.
  __device__ __forceinline__ void wait(int parity) const {
    while (!try_wait(parity)) {
    }
  }
};

}  // namespace tw
