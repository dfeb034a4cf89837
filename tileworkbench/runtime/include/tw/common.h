// tw/common.h - types and helpers every generated kernel uses.
// Include-light on purpose: no toolkit headers and no template libraries, so NVRTC compiles in
// milliseconds and needs no CUDA toolkit headers on the machine.
#pragma once

namespace tw {

typedef unsigned long long uint64_t;
typedef unsigned int uint32_t;

// 16-bit floats are stored as raw bits and computed in float32 by generated code.
struct alignas(2) half { unsigned short bits; };
struct alignas(2) bfloat16 { unsigned short bits; };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ float to_float(bfloat16 h) {
  return __uint_as_float(((unsigned int)h.bits) << 16);
}

template <typename T> __device__ __forceinline__ T from_float(float f);
template <> __device__ __forceinline__ float from_float<float>(float f) { return f; }
template <> __device__ __forceinline__ half from_float<half>(float f) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
template <> __device__ __forceinline__ bfloat16 from_float<bfloat16>(float f) {
  bfloat16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}

// T.reinterpret: the bits of a value as another type of the same width.
template <typename To, typename From>
__device__ __forceinline__ To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "T.reinterpret keeps the width");
  union { From from; To to; } u;  // CUDA's compilers read a union's other member as its bits
  u.from = v;
  return u.to;
}

// A float converted to an integer type: towards zero, saturated to the type's range, NaN to 0. C
// leaves NaN and values out of range undefined, and the GPU's answers differ by type (measured,
// scripts/experiments/float_to_int.py: NaN is 0 from float to 32 bits but the lowest integer from
// double, or from float to 64 bits; a narrow type keeps the low bits of a 32-bit conversion), so
// every float-to-integer cast in generated code comes here. The CPU interpreters convert the same
// way (interpreter/values.py, to_integer).
template <typename I> struct narrow_range;
template <> struct narrow_range<signed char> { static constexpr int low = -128, high = 127; };
template <> struct narrow_range<unsigned char> { static constexpr int low = 0, high = 255; };
template <> struct narrow_range<short> { static constexpr int low = -32768, high = 32767; };
template <> struct narrow_range<unsigned short> { static constexpr int low = 0, high = 65535; };
template <typename I> __device__ __forceinline__ I clamped_to(int v) {
  return (I)min(max(v, narrow_range<I>::low), narrow_range<I>::high);
}
// cvt.rzi: towards zero and saturated; NaN 0 only from float to 32 bits, so tested elsewhere
template <typename I> __device__ __forceinline__ I to_integer(float x) { return clamped_to<I>(__float2int_rz(x)); }
template <> __device__ __forceinline__ int to_integer<int>(float x) { return __float2int_rz(x); }
template <> __device__ __forceinline__ unsigned to_integer<unsigned>(float x) { return __float2uint_rz(x); }
template <> __device__ __forceinline__ long long to_integer<long long>(float x) {
  return x != x ? 0ll : __float2ll_rz(x);
}
template <> __device__ __forceinline__ unsigned long long to_integer<unsigned long long>(float x) {
  return x != x ? 0ull : __float2ull_rz(x);
}
template <typename I> __device__ __forceinline__ I to_integer(double x) {
  return x != x ? I(0) : clamped_to<I>(__double2int_rz(x));
}
template <> __device__ __forceinline__ int to_integer<int>(double x) { return x != x ? 0 : __double2int_rz(x); }
template <> __device__ __forceinline__ unsigned to_integer<unsigned>(double x) {
  return x != x ? 0u : __double2uint_rz(x);
}
template <> __device__ __forceinline__ long long to_integer<long long>(double x) {
  return x != x ? 0ll : __double2ll_rz(x);
}
template <> __device__ __forceinline__ unsigned long long to_integer<unsigned long long>(double x) {
  return x != x ? 0ull : __double2ull_rz(x);
}

// FP8 values are raw bytes in memory (unsigned char) and float32 in generated arithmetic; the
// conversions round to nearest and saturate to the largest finite value (sm_89 and later).
__device__ __forceinline__ unsigned char e4m3_from_float(float f) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));  // f in the low byte
  return (unsigned char)(r & 0xFF);
}
__device__ __forceinline__ unsigned char e5m2_from_float(float f) {
  unsigned short r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));
  return (unsigned char)(r & 0xFF);
}
__device__ __forceinline__ float e4m3_to_float(unsigned char x) {
  unsigned int h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)x));
  return to_float(half{(unsigned short)(h2 & 0xFFFF)});
}
__device__ __forceinline__ float e5m2_to_float(unsigned char x) {
  unsigned int h2;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)x));
  return to_float(half{(unsigned short)(h2 & 0xFFFF)});
}

// FP4 (e2m1) codes held one a byte: sign bit 3, then two exponent bits (bias 1) and one mantissa
// bit, magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. sm_90a has no conversion instruction for them (the
// e2m1x2 cvt is sm_100's), so these are arithmetic: to nearest, ties to the even code, saturating
// at 6 (infinities too), NaN to a zero of the other sign, as ml_dtypes converts in the CPU
// interpreters (e2m1 has no NaN; which zero is arbitrary, matching them keeps the two comparable).
// tests/test_fp4_conversions.py compiles the text between the markers for the host and compares
// every float near the grid with ml_dtypes.
// e2m1 begin
__device__ __forceinline__ float e2m1_to_float(unsigned int code) {
  const unsigned int m = code & 7u;
  const float mag = m < 2u ? 0.5f * (float)m : 0.5f * (float)(2u + (m & 1u)) * (float)(1u << ((m >> 1) - 1u));
  return (code & 8u) ? -mag : mag;
}
__device__ __forceinline__ unsigned char e2m1_from_float(float x) {
  const unsigned int bits = __float_as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (unsigned char)(((bits >> 31) ^ 1u) << 3);  // NaN
  const float a = __uint_as_float(bits & 0x7fffffffu);
  const unsigned int m = a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u
                       : a <= 2.5f ? 4u : a < 3.5f ? 5u : a <= 5.0f ? 6u : 7u;
  return (unsigned char)((bits >> 31) << 3 | m);
}
// The code of element i of a packed FP4 array (two a byte, the even element in the low nibble).
__device__ __forceinline__ unsigned int fp4_code(const unsigned char* p, long long i) {
  return (unsigned int)(p[i >> 1] >> ((i & 1) << 2)) & 0xFu;
}
// Two neighbouring FP4 results with one byte store at p (the byte of an even element): the first
// in the low nibble. A thread writes whole bytes of a packed tile only.
__device__ __forceinline__ void store_pair_e2m1(unsigned char* p, float lo, float hi) {
  *p = (unsigned char)(e2m1_from_float(lo) | e2m1_from_float(hi) << 4);
}
// e2m1 end

// Two neighbouring FP8 results with one 16-bit store (p 2-byte aligned), the first at p.
__device__ __forceinline__ void store_pair_e4m3(unsigned char* p, float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  *reinterpret_cast<unsigned short*>(p) = r;
}
__device__ __forceinline__ void store_pair_e5m2(unsigned char* p, float lo, float hi) {
  unsigned short r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  *reinterpret_cast<unsigned short*>(p) = r;
}

// Pack two floats into one 32-bit register of two 16-bit values (low half first).
__device__ __forceinline__ unsigned int pack2(half, float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}
__device__ __forceinline__ unsigned int pack2(bfloat16, float lo, float hi) {
  unsigned int r;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

// Two neighbouring 16-bit results with one 32-bit store (p 4-byte aligned).
template <typename T>
__device__ __forceinline__ void store_pair(T* p, float lo, float hi) {
  *reinterpret_cast<unsigned int*>(p) = pack2(T{}, lo, hi);
}

// Four neighbouring float32 results rounded to 16 bits and stored with one 8-byte access (p 8-byte
// aligned): a fragment held in runs written to a 16-bit tensor.
template <typename T>
__device__ __forceinline__ void store_rounded4(T* p, const float* v) {
  *reinterpret_cast<uint2*>(p) = make_uint2(pack2(T{}, v[0], v[1]), pack2(T{}, v[2], v[3]));
}

// Two neighbouring float32 results with one 64-bit store (p 8-byte aligned).
__device__ __forceinline__ void store_pair(float* p, float lo, float hi) {
  *reinterpret_cast<float2*>(p) = make_float2(lo, hi);
}

// A sum added atomically to a 16-bit float in global or shared memory (red.add.noftz: the sum
// rounded to the type, subnormals kept; f16 from sm_70, bf16 from sm_90). The generated code calls
// atomicAdd(p, v) with a value held as float32; these overloads are found through p's type.
__device__ __forceinline__ void atomicAdd(half* p, float v) {
  asm volatile("red.add.noftz.f16 [%0], %1;" ::"l"(p), "h"(from_float<half>(v).bits) : "memory");
}
__device__ __forceinline__ void atomicAdd(bfloat16* p, float v) {
  asm volatile("red.add.noftz.bf16 [%0], %1;" ::"l"(p), "h"(from_float<bfloat16>(v).bits) : "memory");
}

// Two neighbouring float32 sums added with one 8-byte atomic (p 8-byte aligned): sm_90 adds a
// float2 in one L2 operation, half the atomic instructions of two scalar adds.
__device__ __forceinline__ void atomic_add_pair(float* p, float lo, float hi) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(lo, hi));
#else
  atomicAdd(p, lo);
  atomicAdd(p + 1, hi);
#endif
}

// T.atomic_addx2 / x4 (and T.atomic_add in T.Parallel, in runs) into a float32 tensor: the neighbours
// added with one 8- or 16-byte atomic (sm_90's float2 / float4 atomicAdd: one L2 operation where
// element atomics take two or four); p is a multiple of the vector's size.
__device__ __forceinline__ void atomic_add_x2(float* p, float a, float b) { atomic_add_pair(p, a, b); }
__device__ __forceinline__ void atomic_add_x4(float* p, float a, float b, float c, float d) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float4*>(p), make_float4(a, b, c, d));
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
  atomicAdd(p + 2, c);
  atomicAdd(p + 3, d);
#endif
}

// Four 8x8 matrices of 16-bit results with one stmatrix (sm_90), a warp-wide instruction every
// lane of the warp must execute. Lane l gives the address where row l % 8 of matrix l / 8 goes (8
// contiguous elements, 16-byte aligned) and holds, of each matrix k, row l / 4, columns
// 2 (l % 4) and 2 (l % 4) + 1: the values (m[2k], m[2k + 1]).
template <typename T>
__device__ __forceinline__ void store_matrix_x4(T* row, float m0, float m1, float m2, float m3, float m4,
                                                float m5, float m6, float m7) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(
                   (unsigned int)__cvta_generic_to_shared(row)),
               "r"(pack2(T{}, m0, m1)), "r"(pack2(T{}, m2, m3)), "r"(pack2(T{}, m4, m5)), "r"(pack2(T{}, m6, m7))
               : "memory");
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
__device__ __forceinline__ int floordiv(int a, int b) { int q = a / b; return (q * b > a) ? q - 1 : q; }
__device__ __forceinline__ int floormod(int a, int b) { int r = a % b; return (r < 0) ? r + b : r; }

// Byte offset -> swizzled byte offset. SPAN is the swizzle span in bytes (0: none):
//  * 32, 64, 128: the pattern TMA writes for CU_TENSOR_MAP_SWIZZLE_{32,64,128}B (bits [4,
//    4+log2(span/16)) XOR bits [7, 7+...));
//  * a power of two above 128: a tile whose rows are SPAN bytes, only threads and mma.sync
//    touch it (TMA cannot write this): the 16-byte chunk bits [4, 7) XOR the row's low three
//    bits, so the same chunk of 8 consecutive rows (what one ldmatrix phase reads) falls on 8
//    different bank groups, where TMA's 128B pattern, keyed by 128-byte line, would put them
//    on 4 (a two-way conflict) and no swizzle on 1 (eight-way).
template <int SPAN>
__device__ __forceinline__ unsigned int swizzle(unsigned int byte_offset) {
  if constexpr (SPAN == 0) {
    return byte_offset;
  } else if constexpr (SPAN <= 128) {
    constexpr unsigned int mask = (SPAN / 16 - 1) << 4;
    return byte_offset ^ ((byte_offset >> 3) & mask);
  } else {
    static_assert((SPAN & (SPAN - 1)) == 0, "a wide-row swizzle keys on rows of a power-of-two bytes");
    constexpr int row_shift = SPAN == 256 ? 8 : SPAN == 512 ? 9 : SPAN == 1024 ? 10 : SPAN == 2048 ? 11 : -1;
    static_assert(row_shift > 0, "wide-row swizzle: rows of 256 to 2048 bytes");
    return byte_offset ^ (((byte_offset >> row_shift) & 7u) << 4);
  }
}

// Byte offset (before any swizzle) of element (row, col) of a tile of ELEM_BYTES elements: rows of
// pitch_bytes or, where PANEL (elements per 128-byte panel) is set, ROWS-row panels of 128 bytes side
// by side, the layout choose_shared_layouts gives a tile a wgmma gemm reads (the mma.sync gemms,
// 16-bit and TF32, read such tiles through it).
template <int PANEL, int ROWS, int ELEM_BYTES>
__device__ __forceinline__ unsigned int tile_offset(int row, int col, int pitch_bytes) {
  if constexpr (PANEL != 0) {
    return (unsigned int)((col / PANEL) * ROWS * 128 + row * 128 + (col % PANEL) * ELEM_BYTES);
  } else {
    return (unsigned int)(row * pitch_bytes + col * ELEM_BYTES);
  }
}

template <typename T, int SPAN>
__device__ __forceinline__ T& swizzled(T* base, int index) {
  unsigned int off = swizzle<SPAN>((unsigned int)(index * sizeof(T)));
  return *reinterpret_cast<T*>(reinterpret_cast<char*>(base) + off);
}

// The same element as swizzled(base, index + aligned), where aligned is a multiple of the
// pattern's period (8 SPAN bytes): the pattern repeats, so only index goes through it and a loop
// that moves aligned alone keeps swizzle(index) (codegen/swizzled.py's split_swizzle_period).
template <typename T, int SPAN>
__device__ __forceinline__ T& swizzled(T* base, int index, int aligned) {
  unsigned int off = swizzle<SPAN>((unsigned int)(index * sizeof(T))) + (unsigned int)(aligned * sizeof(T));
  return *reinterpret_cast<T*>(reinterpret_cast<char*>(base) + off);
}

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
  return (unsigned int)__cvta_generic_to_shared(p);
}

// A gemm operand's shared address as a value the compiler cannot see through, so that what is
// built from it (wgmma descriptors, ldmatrix addresses) is worked out at each gemm rather than
// hoisted out of the loop around it: a kernel with many gemms on fixed tiles otherwise keeps all
// of those live across the loop and spills them (FlashMLA's warp-specialised decode: 1164 bytes
// of spill with its descriptors hoisted, 24 without). Recomputing them is a few integer
// instructions a gemm.
__device__ __forceinline__ unsigned int operand_addr(const void* p) {
  unsigned int addr = smem_addr(p);
  asm volatile("" : "+r"(addr));
  return addr;
}

// Warp votes as TileLang types them: a ballot is 64 bits (CUDA's 32, zero-extended), so a shift
// of it by 32 or more is defined (T.ballot_sync, T.ballot, T.activemask).
__device__ __forceinline__ unsigned long long ballot_sync(unsigned int mask, int predicate) {
  return __ballot_sync(mask, predicate);
}
__device__ __forceinline__ unsigned long long activemask() { return __activemask(); }

// One thread of every group of N consecutive threads (N a multiple of 32) returns true.
template <int N>
__device__ __forceinline__ bool shuffle_elect() {
  // The leader (TileLang's tl_shuffle_elect<N>) is lane 0 of the group's first warp. An
  // `elect.sync` over the full warp would need all 32 lanes to reach it (lane 0 among them) and
  // elect some fixed lane; any one lane serves every use here, and lane 0 is known without it.
  // elect.sync cost the spec GEMM 7-21%: ptxas wraps it in a divergence check and a convergence
  // barrier inside the loop (scripts/experiments/elect_variants.py). Code that only some lanes
  // reach elects no one in a group whose lane 0 is not among them; the barrier analysis models
  // exactly this and reports the phases that then cannot complete.
  static_assert(N % 32 == 0, "leader scopes are whole warps");
  return threadIdx.x % N == 0;
}

// Vector copy of BYTES (4, 8 or 16) between naturally aligned addresses.
template <int BYTES>
__device__ __forceinline__ void copy_vec(void* dst, const void* src) {
  if constexpr (BYTES == 16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (BYTES == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (BYTES == 4) {
    *reinterpret_cast<unsigned int*>(dst) = *reinterpret_cast<const unsigned int*>(src);
  } else if constexpr (BYTES == 2) {
    *reinterpret_cast<unsigned short*>(dst) = *reinterpret_cast<const unsigned short*>(src);
  } else {
    *reinterpret_cast<unsigned char*>(dst) = *reinterpret_cast<const unsigned char*>(src);
  }
}

template <int BYTES>
__device__ __forceinline__ void zero_vec(void* dst) {
  if constexpr (BYTES == 16) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
  } else if constexpr (BYTES == 8) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(0, 0);
  } else if constexpr (BYTES == 4) {
    *reinterpret_cast<unsigned int*>(dst) = 0u;
  } else if constexpr (BYTES == 2) {
    *reinterpret_cast<unsigned short*>(dst) = 0;
  } else {
    *reinterpret_cast<unsigned char*>(dst) = 0;
  }
}

// atomicMax / atomicMin for float: non-negative floats order as their bits do as signed ints,
// negative ones in reverse as unsigned ints, so one integer atomic of the right kind does it
// (the two kinds agree across signs: see the case analysis in language/atomics.py).
__device__ __forceinline__ void atomic_max(float* addr, float v) {
  if (v >= 0.0f) {
    atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v));
  } else {
    atomicMin(reinterpret_cast<unsigned int*>(addr), __float_as_uint(v));
  }
}

__device__ __forceinline__ void atomic_min(float* addr, float v) {
  if (v >= 0.0f) {
    atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v));
  } else {
    atomicMax(reinterpret_cast<unsigned int*>(addr), __float_as_uint(v));
  }
}

// 2^x without the MUFU unit (passes/emulate_exp2.py, tw.exp2_emulation): x rounded to the nearest
// integer n by adding 1.5 * 2^23 (n is then t's low mantissa bits), f = x - n in [-0.5, 0.5], a
// cubic for 2^f (least squares on Chebyshev nodes: relative error 7.7e-5, below float16's 4.9e-4
// that P is stored in), and n added to the result's exponent bits. FADD, FFMA and one LEA: the FMA
// and integer pipes, beside the MUFU's ex2. x below -126 is taken as -126 (a result of about
// 1e-38: a masked score's exp2(-inf) is 0 within float16 and the row sum's precision; at -127 the
// exponent bits of a p below 1 would borrow from the sign).
__device__ __forceinline__ float exp2_poly(float x) {
  x = fmaxf(x, -126.0f);
  const float magic = 12582912.0f;  // 1.5 * 2^23
  const float t = x + magic;
  const float f = x - (t - magic);
  const float p = fmaf(fmaf(fmaf(0.05508876591920853f, f, 0.24260465800762177f), f, 0.6932762861251831f), f,
                       0.999928891658783f);
  return __int_as_float(__float_as_int(p) + ((__float_as_int(t) - 0x4B400000) << 23));
}

// The thread's index read again: an asm volatile read of %tid.x, which NVVM neither lifts out of a
// loop nor merges with another read, so what a loop computes from it stays in the loop
// (passes/reread_thread_index.py: addresses ptxas would otherwise spill at its register limit).
// The asm hides what NVVM knows of threadIdx.x, its range (PTX: %tid.x < %ntid.x <= 1024), so it
// is stated again: without it every `flat / 512` and `flat % 64` of the loop's thread-dependent
// addresses is a signed division (sign fix-ups per copy: the fine-tuning sparse MLA forward's loop
// was 1987 SASS instructions with them, 1759 without).
__device__ __forceinline__ int thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  __builtin_assume(t >= 0 && t < 1024);
  return t;
}

}  // namespace tw
