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

// Block barrier of the first THREADS threads only (named barrier 1): the consumer warpgroups of a
// warp-specialised kernel sync with it while the producer warpgroup runs its own loop.
template <int THREADS>
__device__ __forceinline__ void sync_consumers() {
  asm volatile("bar.sync 1, %0;" ::"n"(THREADS) : "memory");
}

// Block barrier of one `T.ws` scope's THREADS threads (named barrier ID, 1..15): the scope's
// warpgroups sync with it while the others run their own code.
template <int ID, int THREADS>
__device__ __forceinline__ void sync_named() {
  static_assert(ID >= 1 && ID < 16 && THREADS % 32 == 0, "named barriers 1..15 of whole warps");
  asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

// Warp specialisation hands registers from the producer warpgroup to the consumers (sm_90a).
// Every thread of a warpgroup executes the same one; the kernel needs __launch_bounds__(n, 1).
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// >>> debug mode: only generated code with tw.debug_barrier_timeout gets this (codegen strips it)
// ---- debug mode (pass config tw.debug_barrier_timeout) ------------------------------------------
// Every mbarrier wait gives up after a time limit instead of spinning forever. The host passes a
// zeroed record of debug::WORDS words as the kernel's last parameter. The first thread whose wait
// runs out of time claims it (FLAG), writes where it was stuck and leaves the kernel (PTX `exit`,
// from inside the wait: the generated code around the wait is exactly the plain kernel's, so
// the compiler schedules it the same way). Every other bounded wait, in any block, sees the
// claim (within POLL_NS) and exits too. A thread that exits releases the block barriers the
// others wait at (PTX `exit`: a CTA-wide barrier held up only by exited threads is released), so
// block barriers stay plain `__syncthreads()`; the threads that pass one reach a bounded wait
// next and leave there. No thread is left waiting: the kernel ends and the context stays usable.
namespace debug {

enum : unsigned int {
  FLAG, BLOCK_X, BLOCK_Y, BLOCK_Z, THREAD, BARRIER, SLOT, PARITY, SITE, LINE, WAITED_US, WORDS = 16
};
constexpr unsigned long long POLL_NS = 1000000;  // a waiting thread checks the record once a millisecond
constexpr unsigned int TRIES_PER_CLOCK = 64;      // failed try_waits between two reads of the clock

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Some wait in the grid has timed out: leave.
__device__ __forceinline__ bool aborted(const unsigned int* record) {
  return *reinterpret_cast<const volatile unsigned int*>(record + FLAG) != 0u;
}

// End this thread here (PTX exit), wherever in the kernel it is.
__device__ __forceinline__ void leave() { asm volatile("exit;" ::: "memory"); }

__device__ __noinline__ void report(unsigned int* record, unsigned int barrier, int slot, int parity,
                                    unsigned int site, unsigned int line, unsigned long long waited_ns) {
  if (atomicCAS(record + FLAG, 0u, 1u) != 0u) return;  // another thread reported first
  record[BLOCK_X] = blockIdx.x;
  record[BLOCK_Y] = blockIdx.y;
  record[BLOCK_Z] = blockIdx.z;
  record[THREAD] = threadIdx.x;
  record[BARRIER] = barrier;
  record[SLOT] = (unsigned int)slot;
  record[PARITY] = (unsigned int)parity;
  record[SITE] = site;
  record[LINE] = line;
  record[WAITED_US] = (unsigned int)(waited_ns / 1000ull);
  __threadfence();
}

}  // namespace debug

// <<< debug mode
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

  // Arrive once every cp.async this thread issued before has landed; the arrival counts towards
  // the phase's expected arrivals (.noinc: TileLang's cp_async_barrier_noinc).
  __device__ __forceinline__ void arrive_after_copies() {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(addr()) : "memory");
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
  // >>> debug mode

  // Debug mode: wait at most timeout_ns, then report and exit the thread; exit as well when
  // another wait has reported. barrier/site/line identify the wait for the host's message
  // (barrier: index among the kernel's barriers, site: the lowered statement, line: the kernel
  // line when the code generator knows it, else 0). One try_wait inline; a wait that outlasts
  // it calls the bounded loop, a separate function, so the kernel's own loop stays as compact as
  // without debug mode. Measured on the H200 (spec GEMM 8192^3, scripts/experiments/
  // debug_sync_variants.py): the bounded loop inlined cost 8-17%, any inline retry loop 13%,
  // this 3-7% (0-3% since the leader election stopped using elect.sync); a first try with a
  // 1 ms suspend hint was no better.
  __device__ __forceinline__ void wait_debug(int parity, unsigned int* record, unsigned int barrier, int slot,
                                             unsigned int site, unsigned int line,
                                             unsigned long long timeout_ns) const {
    if (!try_wait(parity)) wait_bounded(parity, record, barrier, slot, site, line, timeout_ns);
  }

  // The rest of a debug-mode wait. A waiting thread reads %globaltimer only once every
  // TRIES_PER_CLOCK failed tries (each try already suspends the thread for a while in hardware)
  // and the record (a global load) once per POLL_NS. The clock starts at its first read, a few
  // microseconds after the wait began.
  __device__ __forceinline__ void bounded_loop(int parity, unsigned int* record, unsigned int barrier, int slot,
                                               unsigned int site, unsigned int line,
                                               unsigned long long timeout_ns) const {
    unsigned long long start = 0, poll = 0;
    for (unsigned int tries = 1;; ++tries) {
      if (try_wait(parity)) return;
      if (tries % debug::TRIES_PER_CLOCK) continue;
      const unsigned long long now = debug::now_ns();
      if (start == 0) {
        start = now;
        poll = now + debug::POLL_NS;
        continue;
      }
      if (now < poll) continue;
      if (debug::aborted(record)) debug::leave();
      if (now - start > timeout_ns) {
        debug::report(record, barrier, slot, parity, site, line, now - start);
        debug::leave();
      }
      poll = now + debug::POLL_NS;
    }
  }

  __device__ __noinline__ void wait_bounded(int parity, unsigned int* record, unsigned int barrier, int slot,
                                            unsigned int site, unsigned int line,
                                            unsigned long long timeout_ns) const {
    bounded_loop(parity, record, barrier, slot, site, line, timeout_ns);
  }

  // The same wait with the bounded loop inline, for a kernel that hands registers over itself
  // (setmaxnreg): with the call of wait_debug, ptxas drops the kernel's setmaxnreg (C7507) and
  // serialises its wgmma (C7512) for TileLang's MLA decode example, which then runs at the
  // launch's register count (1.55 ms against 0.72 on an H100); with the loop inline NVRTC for
  // sm_90a reports neither. (The debug-mode GPU tests pass with it, H100; that example's debug-mode
  // time with it was not measured.)
  __device__ __forceinline__ void wait_debug_inline(int parity, unsigned int* record, unsigned int barrier,
                                                    int slot, unsigned int site, unsigned int line,
                                                    unsigned long long timeout_ns) const {
    if (!try_wait(parity)) bounded_loop(parity, record, barrier, slot, site, line, timeout_ns);
  }

  // <<< debug mode
};

}  // namespace tw
