// tw/tma.h - the bulk copy engine: descriptorless 1D bulk copies and tensor-map (tiled) copies.
#pragma once
#include "sync.h"

namespace tw {

// The 128-byte opaque tensor map the driver encodes (cuTensorMapEncodeTiled), passed to the
// kernel by value as a __grid_constant__ parameter (kernels that take one alias it by its
// driver name, so the word appears in a generated source exactly when a descriptor is used).
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

__device__ __forceinline__ unsigned long long desc_addr(const TensorMap& desc) {
  return reinterpret_cast<unsigned long long>(&desc);
}

__device__ __forceinline__ void prefetch_tma_descriptor(const TensorMap& desc) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(desc_addr(desc)) : "memory");
}

// Global -> shared, contiguous bytes (multiple of 16), completing on `bar`.
__device__ __forceinline__ void tma_load(void* smem_dst, const void* gmem_src, unsigned int bytes,
                                         Barrier& bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(bar.addr())
      : "memory");
}

// Global -> shared through a tensor map; coordinates innermost first.
__device__ __forceinline__ void tma_load(const TensorMap& desc, Barrier& bar, void* smem_dst, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(desc_addr(desc)), "r"(bar.addr()), "r"(c0)
      : "memory");
}
__device__ __forceinline__ void tma_load(const TensorMap& desc, Barrier& bar, void* smem_dst, int c0,
                                         int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(desc_addr(desc)), "r"(bar.addr()), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load(const TensorMap& desc, Barrier& bar, void* smem_dst, int c0,
                                         int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(desc_addr(desc)), "r"(bar.addr()), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load(const TensorMap& desc, Barrier& bar, void* smem_dst, int c0,
                                         int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(desc_addr(desc)), "r"(bar.addr()), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void tma_load(const TensorMap& desc, Barrier& bar, void* smem_dst, int c0,
                                         int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(
          smem_addr(smem_dst)),
      "l"(desc_addr(desc)), "r"(bar.addr()), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// Shared -> global, contiguous bytes, in the current bulk group.
__device__ __forceinline__ void tma_store(void* gmem_dst, const void* smem_src, unsigned int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void tma_store(const TensorMap& desc, const void* smem_src, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];" ::"l"(desc_addr(desc)),
               "r"(smem_addr(smem_src)), "r"(c0)
               : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap& desc, const void* smem_src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   desc_addr(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap& desc, const void* smem_src, int c0, int c1,
                                          int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   desc_addr(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap& desc, const void* smem_src, int c0, int c1,
                                          int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   desc_addr(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
__device__ __forceinline__ void tma_store(const TensorMap& desc, const void* smem_src, int c0, int c1,
                                          int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(
          desc_addr(desc)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// Shared -> global, each float added into its element atomically (T.atomic_add(..., use_tma=True)),
// in the current bulk group: contiguous bytes, or a tensor map's box (what lies outside the
// tensor is not added).
__device__ __forceinline__ void tma_store_add(float* gmem_dst, const void* smem_src, unsigned int bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void tma_store_add(const TensorMap& desc, const void* smem_src, int c0) {
  asm volatile("cp.reduce.async.bulk.tensor.1d.global.shared::cta.add.tile.bulk_group [%0, {%2}], [%1];" ::"l"(
                   desc_addr(desc)),
               "r"(smem_addr(smem_src)), "r"(c0)
               : "memory");
}
__device__ __forceinline__ void tma_store_add(const TensorMap& desc, const void* smem_src, int c0, int c1) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   desc_addr(desc)),
               "r"(smem_addr(smem_src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_store_add(const TensorMap& desc, const void* smem_src, int c0, int c1,
                                              int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
          desc_addr(desc)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_store_add(const TensorMap& desc, const void* smem_src, int c0, int c1,
                                              int c2, int c3) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          desc_addr(desc)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void tma_store_add(const TensorMap& desc, const void* smem_src, int c0, int c1,
                                              int c2, int c3, int c4) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.5d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], "
      "[%1];" ::"l"(desc_addr(desc)),
      "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

__device__ __forceinline__ void tma_store_arrive() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Wait for all committed bulk stores; READ: only until their shared sources may be reused.
template <bool READ>
__device__ __forceinline__ void tma_store_wait() {
  if constexpr (READ) {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  } else {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

}  // namespace tw
