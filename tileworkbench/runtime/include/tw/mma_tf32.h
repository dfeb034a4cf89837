// tw/mma_tf32.h - block-tile GEMM on float32 tiles with mma.sync m16n8k8 in TF32 (inlined only
// into kernels that call tw::gemm_ss_tf32: the other kernels' sources stay as they were).
#pragma once
#include "common.h"

namespace tw {

// Float32 tiles, each operand rounded to TF32 (cvt.rna: to nearest, ties away from zero;
// the tensor core itself would drop the low 13 mantissa bits) and multiplied on mma.sync
// m16n8k8 into the same accumulator layout as gemm_ss (row lane / 4 + 8 h, column
// (lane % 4) * 2 + e). ldmatrix moves 16-bit elements only, so each thread loads its operand
// elements one by one: A's a0..a3 are (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) of the 16 x 8
// block (g = lane / 4, t = lane % 4); B's b0, b1 are (k = t, n = g) and (k = t + 4, n = g).
__device__ __forceinline__ unsigned int to_tf32(float x) {
  unsigned int r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_1688_tf32(float* c, const unsigned int* a, const unsigned int* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Element (row, col) of a float32 tile laid out as tile_offset says (rows of PITCH bytes, or
// panels), swizzled with span SW.
template <int SW, int PITCH, int PANEL = 0, int ROWS = 0>
__device__ __forceinline__ unsigned int tf32_at(const float* tile, int row, int col) {
  const char* base = reinterpret_cast<const char*>(tile);
  return to_tf32(*reinterpret_cast<const float*>(base + swizzle<SW>(tile_offset<PANEL, ROWS, 4>(row, col, PITCH))));
}

// PA, PB: elements per 128-byte panel of an operand tile stored in panels (0: rows of its own width).
template <int M, int N, int K, int WM, int WN, bool TA, bool TB, int SWA, int SWB, int PA = 0, int PB = 0>
__device__ __forceinline__ void gemm_ss_tf32(const float* A, const float* B, float* acc, int thread) {
  constexpr int TM = M / WM, TN = N / WN, MI = TM / 16, NI = TN / 8;
  static_assert(TM % 16 == 0 && TN % 8 == 0 && K % 8 == 0, "tile not divisible by the mma shape");
  constexpr int PITCH_A = (TA ? M : K) * 4, PITCH_B = (TB ? K : N) * 4;
  constexpr int ROWS_A = TA ? K : M, ROWS_B = TB ? N : K;  // of the tiles as stored
  const int warp = thread / 32, lane = thread % 32, g = lane / 4, t = lane % 4;
  const int wr = warp / WN, wc = warp % WN;
#pragma unroll
  for (int kk = 0; kk < K; kk += 8) {
    unsigned int a[MI][4];
    unsigned int b[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m = wr * TM + mi * 16 + g;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = m + 8 * (r % 2), col = kk + t + 4 * (r / 2);  // (m, k) of A
        a[mi][r] = TA ? tf32_at<SWA, PITCH_A, PA, ROWS_A>(A, col, row) : tf32_at<SWA, PITCH_A, PA, ROWS_A>(A, row, col);
      }
    }
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int n = wc * TN + ni * 8 + g;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int k = kk + t + 4 * r;
        b[ni][r] = TB ? tf32_at<SWB, PITCH_B, PB, ROWS_B>(B, n, k) : tf32_at<SWB, PITCH_B, PB, ROWS_B>(B, k, n);
      }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        mma_1688_tf32(acc + (mi * NI + ni) * 4, a[mi], b[ni]);
      }
    }
  }
}

}  // namespace tw
