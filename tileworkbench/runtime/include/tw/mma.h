// tw/mma.h - block-tile GEMM on tensor cores with ldmatrix + mma.sync (m16n8k16, fp16/bf16 -> fp32;
// m16n8k64, int4 -> int32).
//
// C (M x N, fp32) += A (M x K) * B (K x N) with A and B in shared memory, row-major (or
// transposed: A stored K x M, B stored N x K), each optionally swizzled with the TMA pattern of
// span SWA / SWB bytes. The block's warps form a WM x WN grid; warp (wr, wc) owns the
// (M/WM) x (N/WN) sub-tile. Thread accumulator j = ((mi * NI + ni) * 4 + h * 2 + e) holds
//   row = wr * M/WM + mi * 16 + lane / 4 + 8 h,   col = wc * N/WN + ni * 8 + (lane % 4) * 2 + e
// which is the layout the compiler's MmaAccumLayout describes (python side, ir/layout.py).
#pragma once
#include "common.h"

namespace tw {

__device__ __forceinline__ void ldmatrix_x4(unsigned int* r, unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int* r, unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned int* r, unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned int* r, unsigned int addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// Four signed 4-bit integers, the unit gemm_ss walks an int4 tile in (T.int4, stored as int4x2
// bytes: passes/store_int4_as_bytes.py). An m16n8k64 s4 step takes the same 32 bytes of K per row as
// an m16n8k16 f16 step, and its fragments hold the same bytes (a register: 8 values of one row, K
// 8t .. 8t + 7 for lane 4g + t, the even value in the low nibble), so the 16-bit ldmatrix
// addressing serves both, K counted in these 16-bit units (a quarter of the int4 K).
struct int4x4 {
  unsigned short bits;
};
template <typename T>
struct is_int4x4 {
  static constexpr bool value = false;
};
template <>
struct is_int4x4<int4x4> {
  static constexpr bool value = true;
};

__device__ __forceinline__ void mma_16816(float* c, const unsigned int* a, const unsigned int* b, half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_16816(float* c, const unsigned int* a, const unsigned int* b, bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Hopper has no int4 tensor-core path of its own: ptxas widens the operands to int8 for IMMA.
__device__ __forceinline__ void mma_16816(int* c, const unsigned int* a, const unsigned int* b, int4x4) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Shared address of element (row, col) of a 16-bit tile laid out as tile_offset says (rows of
// pitch_bytes, or panels), swizzled with span SW as tw::swizzled does.
template <int SW, int PANEL = 0, int ROWS = 0>
__device__ __forceinline__ unsigned int tile_addr(unsigned int base, int row, int col_elems, int pitch_bytes) {
  return base + swizzle<SW>(tile_offset<PANEL, ROWS, 2>(row, col_elems, pitch_bytes));
}

// PA, PB: elements per 128-byte panel of an operand tile stored in panels (0: rows of its own width).
// T names the 16-bit unit (half, bfloat16, or int4x4 for int4 tiles, K-major only: ldmatrix's
// transpose moves 16-bit elements); ACC is float, or int for int4.
template <int M, int N, int K, int WM, int WN, bool TA, bool TB, int SWA, int SWB, typename T, int PA = 0, int PB = 0,
          typename ACC>
__device__ __forceinline__ void gemm_ss(const void* A, const void* B, ACC* acc, int thread) {
  constexpr int TM = M / WM, TN = N / WN, MI = TM / 16, NI = TN / 8;
  static_assert(TM % 16 == 0 && TN % 8 == 0 && K % 16 == 0, "tile not divisible by the mma shape");
  static_assert(sizeof(T) == 2 && sizeof(ACC) == 4, "16-bit units into 32-bit accumulators");
  static_assert(!is_int4x4<T>::value || (!TA && TB), "int4 tiles are read K-major: A stored M x K, B N x K");
  constexpr int PITCH_A = (TA ? M : K) * 2, PITCH_B = (TB ? K : N) * 2;
  constexpr int ROWS_A = TA ? K : M, ROWS_B = TB ? N : K;  // of the tiles as stored
  const int warp = thread / 32, lane = thread % 32;
  const int wr = warp / WN, wc = warp % WN;
  const unsigned int a_base = operand_addr(A), b_base = operand_addr(B);
#pragma unroll
  for (int kk = 0; kk < K; kk += 16) {
    unsigned int a[MI][4];
    unsigned int b[NI][2];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
      const int m0 = wr * TM + mi * 16;
      if constexpr (!TA) {
        ldmatrix_x4(a[mi], tile_addr<SWA, PA, ROWS_A>(a_base, m0 + lane % 16, kk + (lane / 16) * 8, PITCH_A));
      } else {
        const int k = kk + lane % 8 + 8 * (lane / 16), m = m0 + 8 * ((lane / 8) % 2);
        ldmatrix_x4_trans(a[mi], tile_addr<SWA, PA, ROWS_A>(a_base, k, m, PITCH_A));
      }
    }
#pragma unroll
    for (int ni = 0; ni + 1 < NI; ni += 2) {
      const int n0 = wc * TN + ni * 8;
      unsigned int r[4];
      if constexpr (!TB) {
        const int k = kk + lane % 8 + 8 * ((lane / 8) % 2), n = n0 + 8 * (lane / 16);
        ldmatrix_x4_trans(r, tile_addr<SWB, PB, ROWS_B>(b_base, k, n, PITCH_B));
      } else {
        const int n = n0 + lane % 8 + 8 * (lane / 16), k = kk + 8 * ((lane / 8) % 2);
        ldmatrix_x4(r, tile_addr<SWB, PB, ROWS_B>(b_base, n, k, PITCH_B));
      }
      b[ni][0] = r[0];
      b[ni][1] = r[1];
      b[ni + 1][0] = r[2];
      b[ni + 1][1] = r[3];
    }
    if constexpr (NI % 2 == 1) {
      const int n0 = wc * TN + (NI - 1) * 8;
      if constexpr (!TB) {
        const int k = kk + lane % 8 + 8 * ((lane / 8) % 2);
        ldmatrix_x2_trans(b[NI - 1], tile_addr<SWB, PB, ROWS_B>(b_base, k, n0, PITCH_B));
      } else {
        const int n = n0 + lane % 8, k = kk + 8 * ((lane / 8) % 2);
        ldmatrix_x2(b[NI - 1], tile_addr<SWB, PB, ROWS_B>(b_base, n, k, PITCH_B));
      }
    }
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        mma_16816(acc + (mi * NI + ni) * 4, a[mi], b[ni], T{});
      }
    }
  }
}

}  // namespace tw
