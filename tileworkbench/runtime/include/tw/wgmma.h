// tw/wgmma.h - Hopper warpgroup GEMM: C (fp32, registers) += A (shared or registers) * B (shared) with
// wgmma.mma_async (sm_90a). The instruction itself (one m64nNk16 shape, with its 4N/8 output
// registers) is a small functor the code generator emits next to the kernel; this header builds
// the shared-memory descriptors and walks the tile.
#pragma once
#include "common.h"

namespace tw {

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// The accumulator's registers as values the compiler must have final before this point: placed
// before a gemm's fence, the program's own work on them (attention's rescale of its output
// accumulator) is finished before the fence rather than sunk between the wgmmas, where ptxas
// would have to inject a warpgroup.arrive of its own (its C7519 note) to let wgmma read them.
template <int COUNT>
__device__ __forceinline__ void settle_registers(float* r) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) asm volatile("" : "+f"(r[i]));
}
template <int COUNT>
__device__ __forceinline__ void settle_registers(int* r) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) asm volatile("" : "+r"(r[i]));
}
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// A point ptxas moves no instruction across (bar.warp.sync: free, the warp is converged after a
// gemm's wait). After a wgmma gemm in a kernel short of registers (isolate_starved_wgmmas) it
// keeps the next statements' work out of the wgmma's wait, where its registers would sit beside
// the wgmma's accumulator and both would spill.
__device__ __forceinline__ void schedule_fence() { __syncwarp(); }

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

// A descriptor moved on by BYTES (a multiple of 16) in shared memory: its start-address field
// (bits 0-13, in 16-byte units) plus BYTES / 16, as one 32-bit add. Every operand lies in the
// shared window (below 2^18 bytes), so the field never carries into the leading offset. A gemm
// builds each operand's descriptor once and moves it along K, as TileLang's does, rather than
// building one per instruction (masks, shifts and moves to uniform registers for every wgmma).
__device__ __forceinline__ unsigned long long wgmma_desc_plus(unsigned long long desc, unsigned int bytes) {
  const unsigned int start = (unsigned int)desc + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | start;
}

// B's descriptor at its first K-row, for one wgmma's K (32/EB rows; EB bytes an element): K x N
// (B_K_MAJOR false: N-major rows of SWB bytes, the next SWB-byte slice of N one panel later) or
// N x K (K-major: rows of SWB bytes, in panels of SWB bytes when K is wider than one row).
template <int K, int SWB, bool B_K_MAJOR>
__device__ __forceinline__ unsigned long long wgmma_b_desc0(unsigned int b_base) {
  return B_K_MAJOR ? wgmma_desc<SWB>(b_base, 16, 8 * SWB) : wgmma_desc<SWB>(b_base, K * SWB, 8 * SWB);
}

// The byte offset of B's K-rows kk .. in the layout wgmma_b_desc0 describes.
template <int N, int SWB, bool B_K_MAJOR, int EB = 2>
__device__ __forceinline__ constexpr unsigned int wgmma_b_rows(int kk) {
  if constexpr (B_K_MAJOR) {
    constexpr int PANEL = SWB / EB;  // elements in one swizzled row
    return (kk / PANEL) * (N * SWB) + (kk % PANEL) * EB;
  } else {
    return kk * SWB;
  }
}

// The byte offset in B of the columns n0 .. of warpgroups side by side along N (wgmma_gemm_ss's
// NG): K-major, rows n0 .. of every K panel; N-major, the panel column n0 starts (n0 a whole
// number of panels: a descriptor starts at a panel).
template <int K, int SWB, bool B_K_MAJOR, int EB>
__device__ __forceinline__ unsigned int wgmma_b_columns(int n0) {
  if constexpr (B_K_MAJOR) {
    return n0 * SWB;
  } else {
    return (n0 / (SWB / EB)) * (K * SWB);
  }
}

// M x K (A: K-major rows of SWA bytes, in panels of SWA bytes when K is wider than one row, or
// with A_K_MAJOR false stored K x M: M-major rows of 128 bytes, each 64-row block of M one panel of
// K rows) times K x N (B: see wgmma_b_desc0). The warpgroups are WG along M times NG along N:
// warpgroup g computes rows [gm*M/WG, (gm+1)*M/WG) in 64-row blocks (gm = g / NG) and columns
// [gn*N/NG, (gn+1)*N/NG) (gn = g % NG; Mma is the m64n(N/NG) instruction); each wgmma takes 32
// bytes of K (16 16-bit or 32 FP8 or int8 elements); Acc is float (int for int8 operands).
// IN_FLIGHT: wgmma groups this thread may leave running on return (0: all of them are done; -1: no
// wait at all, the program waits itself: TileLang's T.wgmma_gemm and T.wait_wgmma).
// NC: instructions side by side along a warpgroup's columns (Mma is then m64n(N/NG/NC)), each on
// its own registers (the accumulator's elements of those columns are consecutive) and B columns.
// Each chunk's instructions run back to back (K inner): a kernel short of registers (the sparse
// MLA backward's 64 x 512 float dQ) then keeps one chunk in registers at a time, where chunks
// taken in turn at every K step make ptxas spill and reload each chunk once per step.
template <int M, int N, int K, int WG, int SWA, int SWB, bool B_K_MAJOR, typename Mma, int IN_FLIGHT = 0,
          bool A_K_MAJOR = true, int NG = 1, int NC = 1, typename T, typename Acc>
__device__ __forceinline__ void wgmma_gemm_ss(const T* A, const T* B, Acc* acc, int thread) {
  constexpr int EB = sizeof(T), K_STEP = 32 / EB, NW = N / NG, NI = NW / NC;
  constexpr int ROWS_PER_GROUP = M / WG, MI = ROWS_PER_GROUP / 64, A_PANEL = SWA / EB;
  static_assert(NG == 1 || B_K_MAJOR || NW % (SWB / EB) == 0, "each warpgroup's columns of an N-major B are whole panels");
  static_assert(NC == 1 || B_K_MAJOR || NI % (SWB / EB) == 0, "each instruction's columns of an N-major B are whole panels");
  const int group = WG == 1 ? 0 : thread / 128 / NG;  // one warpgroup along M: known, so its descriptors are uniform
  const unsigned int b_base = operand_addr(B) + (NG == 1 ? 0u : wgmma_b_columns<K, SWB, B_K_MAJOR, EB>((thread / 128 % NG) * NW));
  // Each operand's descriptor at this warpgroup's first rows; every instruction's is one add on.
  // A K-major: rows m0 .. (SWA bytes each, in panels of M rows along K). M-major: rows m0 .. m0+63
  // are panel m0/64 (K rows of SWA bytes); 16 K-rows from row kk.
  const unsigned long long a_desc0 =
      A_K_MAJOR ? wgmma_desc<SWA>(operand_addr(A) + group * ROWS_PER_GROUP * SWA, 16, 8 * SWA)
                : wgmma_desc<SWA>(operand_addr(A) + group * (ROWS_PER_GROUP / 64) * (K * SWA), K * SWA, 8 * SWA);
  const unsigned long long b_desc0 = wgmma_b_desc0<K, SWB, B_K_MAJOR>(b_base);
  settle_registers<MI * (NW / 2)>(acc);
  wgmma_fence();
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const unsigned int b_chunk = NC == 1 ? 0u : wgmma_b_columns<K, SWB, B_K_MAJOR, EB>(c * NI);
#pragma unroll
      for (int kk = 0; kk < K; kk += K_STEP) {
        const unsigned int a_bytes = A_K_MAJOR ? (kk / A_PANEL) * (M * SWA) + mi * 64 * SWA + (kk % A_PANEL) * EB
                                               : mi * (K * SWA) + kk * SWA;
        Mma::mma(acc + mi * (NW / 2) + c * (NI / 2), wgmma_desc_plus(a_desc0, a_bytes),
                 wgmma_desc_plus(b_desc0, b_chunk + wgmma_b_rows<N, SWB, B_K_MAJOR, EB>(kk)));
      }
    }
  }
  wgmma_commit();
  if constexpr (IN_FLIGHT >= 0) wgmma_wait<IN_FLIGHT>();
}

// Two 16-bit values as one 32-bit register, the first in the low half.
template <typename T>
__device__ __forceinline__ unsigned int bits2(const T* p) {
  return (unsigned int)p[0].bits | ((unsigned int)p[1].bits << 16);
}

// C += A * B with A in registers: a's M x K elements in the layout of an M x K wgmma accumulator
// (element j = mi*K/2 + ni*4 + h*2 + e: row 64 mi + 16 warp + lane/4 + 8 h, column 8 ni + 2 (lane % 4)
// + e), which is the layout wgmma reads A in: for K-rows kk .. kk+15 the thread's eight elements
// from mi*K/2 + kk/2 are its four A registers. Attention's P @ V keeps P where Q @ K^T left it.
// Every A register is packed before the wgmma fence: a register a wgmma reads must be written
// before the fence (warpgroup.arrive), or ptxas injects an arrive of its own before that wgmma
// (its C7519 note; 14 of them in the attention forward when the pairs were packed between the
// instructions).
template <int M, int N, int K, int WG, int SWB, bool B_K_MAJOR, typename Mma, int IN_FLIGHT = 0, typename T>
__device__ __forceinline__ void wgmma_gemm_rs(const T* a, const T* B, float* acc, int thread) {
  constexpr int MI = M / WG / 64, KS = K / 16;
  const unsigned long long b_desc0 = wgmma_b_desc0<K, SWB, B_K_MAJOR>(operand_addr(B));
  unsigned int regs[MI][KS][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const T* p = a + mi * (K / 2) + ks * 8;
      regs[mi][ks][0] = bits2(p);
      regs[mi][ks][1] = bits2(p + 2);
      regs[mi][ks][2] = bits2(p + 4);
      regs[mi][ks][3] = bits2(p + 6);
    }
  }
  settle_registers<MI * (N / 2)>(acc);
  wgmma_fence();
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      Mma::mma(acc + mi * (N / 2), regs[mi][ks][0], regs[mi][ks][1], regs[mi][ks][2], regs[mi][ks][3],
               wgmma_desc_plus(b_desc0, wgmma_b_rows<N, SWB, B_K_MAJOR>(ks * 16)));
    }
  }
  wgmma_commit();
  if constexpr (IN_FLIGHT >= 0) wgmma_wait<IN_FLIGHT>();
}

}  // namespace tw
