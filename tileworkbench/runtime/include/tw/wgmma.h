// tw/wgmma.h - Hopper warpgroup GEMM: C (fp32, registers) += A (shared) * B (shared) with
// wgmma.mma_async (sm_90a). The instruction itself (one m64nNk16 shape, with its 4N/8 output
// registers) is a small functor the code generator emits next to the kernel; this header builds
// the shared-memory descriptors and walks the tile.
#pragma once
#include "common.h"

namespace tw {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Swizzle span in bytes -> the descriptor's layout field (bits 62-63).
template <int SPAN>
struct WgmmaSwizzle {
  static constexpr unsigned long long mode = SPAN == 128 ? 1 : SPAN == 64 ? 2 : SPAN == 32 ? 3 : 0;
};

// A shared-memory matrix descriptor: start address, leading- and stride-dimension byte offsets
// (all in 16-byte units) and the swizzle mode.
template <int SPAN>
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned int smem_byte_addr, unsigned int lbo_bytes,
                                                         unsigned int sbo_bytes) {
  return (unsigned long long)((smem_byte_addr & 0x3FFFF) >> 4) |
         ((unsigned long long)((lbo_bytes >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo_bytes >> 4) & 0x3FFF) << 32) | (WgmmaSwizzle<SPAN>::mode << 62);
}

// M x K (A: K-major rows of SWA bytes, or with A_K_MAJOR false stored K x M: M-major rows of 128
// bytes, each 64-row block of M one panel of K rows) times K x N (B: K-major rows of SWB bytes
// when B_K_MAJOR, else N-major rows of SWB bytes, in panels of PANEL_BYTES when N is wider than
// one row). Warpgroup g computes rows [g*M/WG, (g+1)*M/WG) in 64-row blocks.
// IN_FLIGHT: wgmma groups this thread may leave running on return (0: all of them are done).
template <int M, int N, int K, int WG, int SWA, int SWB, bool B_K_MAJOR, typename Mma, int IN_FLIGHT = 0,
          bool A_K_MAJOR = true, typename T>
__device__ __forceinline__ void wgmma_gemm_ss(const T* A, const T* B, float* acc, int thread) {
  constexpr int ROWS_PER_GROUP = M / WG, MI = ROWS_PER_GROUP / 64;
  const int group = thread / 128;
  const unsigned int a_base = smem_addr(A), b_base = smem_addr(B);
  wgmma_fence();
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
      const int m0 = group * ROWS_PER_GROUP + mi * 64;
      unsigned long long da;
      if constexpr (A_K_MAJOR) {
        da = wgmma_desc<SWA>(a_base + m0 * SWA + kk * 2, 16, 8 * SWA);
      } else {
        // M-major: rows m0 .. m0+63 are panel m0/64 (K rows of 128 bytes); 16 K-rows from row kk.
        da = wgmma_desc<SWA>(a_base + (m0 / 64) * (K * SWA) + kk * SWA, K * SWA, 8 * SWA);
      }
      unsigned long long db;
      if constexpr (B_K_MAJOR) {
        db = wgmma_desc<SWB>(b_base + kk * 2, 16, 8 * SWB);
      } else {
        // N-major: 16 K-rows of SWB bytes; the next SWB-byte slice of N starts one panel later.
        db = wgmma_desc<SWB>(b_base + kk * SWB, K * SWB, 8 * SWB);
      }
      Mma::mma(acc + mi * (N / 2), da, db);
    }
  }
  wgmma_commit();
  wgmma_wait<IN_FLIGHT>();
}

}  // namespace tw
