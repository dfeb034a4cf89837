// tw/random.h - a thread's random numbers (T.rng_init, T.rng_rand, T.rng_rand_float): the Philox
// 4x32-10 counter-based generator (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11), stepped as cuRAND's curandStatePhilox4_32_10_t is, so that T.rng_rand() gives the same
// integers as curand() after curand_init(seed, subsequence, offset), which TileLang's kernels call
// (and as Triton's randint4x at counter offset / 4). Inlined only into kernels that draw; the
// kernel declares one generator a thread, tw_rng. The CPU interpreters step the same generator
// (interpreter/random.py).
#pragma once
#include "common.h"

namespace tw {

struct Philox {
  enum : unsigned int { M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u };
  uint4 counter;   // the 128-bit counter, x lowest
  uint2 key;       // the seed
  uint4 output;    // the four words of the counter's block
  unsigned int at;  // the next word of output to hand out
  int has_normal;   // a Box-Muller pair's second value is waiting (float, then double)
  float normal;
  int has_normal_double;
  double normal_double;

  static __device__ __forceinline__ uint4 round(uint4 c, uint2 k) {
    const unsigned int hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
    const unsigned int hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
    return make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }

  static __device__ __forceinline__ uint4 block(uint4 c, uint2 k) {
#pragma unroll
    for (int r = 0; r < 9; ++r) {
      c = round(c, k);
      k.x += W0;
      k.y += W1;
    }
    return round(c, k);
  }

  // The counter plus n (a 64-bit step into the 128-bit counter).
  __device__ __forceinline__ void advance(unsigned long long n) {
    const unsigned int lo = (unsigned int)n;
    unsigned int hi = (unsigned int)(n >> 32);
    counter.x += lo;
    if (counter.x < lo) ++hi;
    counter.y += hi;
    if (hi <= counter.y) return;
    if (++counter.z) return;
    ++counter.w;
  }

  // curand_init(seed, subsequence, offset): subsequence steps the counter's upper 64 bits, offset
  // words along the sequence.
  __device__ __forceinline__ void init(unsigned long long seed, unsigned long long subsequence,
                                       unsigned long long offset) {
    counter = make_uint4(0u, 0u, 0u, 0u);
    key = make_uint2((unsigned int)seed, (unsigned int)(seed >> 32));
    has_normal = 0;
    has_normal_double = 0;
    const unsigned int sub_lo = (unsigned int)subsequence;
    unsigned int sub_hi = (unsigned int)(subsequence >> 32);
    counter.z += sub_lo;
    if (counter.z < sub_lo) ++sub_hi;
    counter.w += sub_hi;
    at = (unsigned int)(offset & 3u);
    advance(offset >> 2);
    output = block(counter, key);
  }

  // The next 32-bit word (curand()).
  __device__ __forceinline__ unsigned int rand() {
    const unsigned int word = at == 0 ? output.x : at == 1 ? output.y : at == 2 ? output.z : output.w;
    if (++at == 4) {
      advance(1);
      output = block(counter, key);
      at = 0;
    }
    return word;
  }

  // Uniform in (0, 1] from one word (curand_uniform's formula).
  __device__ __forceinline__ float uniform() {
    const float scale = 2.3283064365386963e-10f;  // 2^-32
    return rand() * scale + scale / 2.0f;
  }

  // Uniform in (0, 1] with 53 bits from two words (curand_uniform_double's).
  __device__ __forceinline__ double uniform_double() {
    const unsigned int a = rand(), b = rand();
    const unsigned long long z = (unsigned long long)a ^ ((unsigned long long)b << 21);
    const double scale = 1.1102230246251565e-16;  // 2^-53
    return z * scale + scale / 2.0;
  }

  // Standard normal by Box-Muller on two uniform draws; the pair's second value is the next call's.
  __device__ __forceinline__ float normal_value() {
    if (has_normal) {
      has_normal = 0;
      return normal;
    }
    const float u = uniform(), v = uniform() * 6.2831853071795865f;
    const float s = sqrtf(-2.0f * logf(u));
    normal = s * cosf(v);
    has_normal = 1;
    return s * sinf(v);
  }

  __device__ __forceinline__ double normal_double_value() {
    if (has_normal_double) {
      has_normal_double = 0;
      return normal_double;
    }
    const double u = uniform_double(), v = uniform_double() * 6.283185307179586;
    const double s = sqrt(-2.0 * log(u));
    normal_double = s * cos(v);
    has_normal_double = 1;
    return s * sin(v);
  }
};

}  // namespace tw
