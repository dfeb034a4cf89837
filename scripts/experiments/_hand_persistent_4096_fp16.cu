// The kernel of scripts/experiments/persistent_variants.py's "hand-edited" variant: the persistent
// warp-specialised GEMM (4096^3 fp16, 128x256x64, 3 stages) written by hand before the compiler
// made it. The script puts the compiler's current headers and wgmma functors in front of it.
extern "C" __global__ void __launch_bounds__(384, 1) main_kernel(
    tw::half* __restrict__ A,
    tw::half* __restrict__ B,
    tw::half* __restrict__ C,
    const __grid_constant__ CUtensorMap A_desc,
    const __grid_constant__ CUtensorMap B_desc,
    const __grid_constant__ CUtensorMap C_desc) {
  extern __shared__ __align__(1024) unsigned char tw_smem[];
  const int tx = threadIdx.x;
  tw::half* A_shared = reinterpret_cast<tw::half*>(tw_smem + 0);
  tw::half* B_shared = reinterpret_cast<tw::half*>(tw_smem + 49152);
  tw::half* C_local_out = reinterpret_cast<tw::half*>(tw_smem + 148480);
  float C_local[128];
  tw::Barrier* stage_full = reinterpret_cast<tw::Barrier*>(tw_smem + 147456);
  tw::Barrier* stage_empty = reinterpret_cast<tw::Barrier*>(tw_smem + 147480);
  if (tx == 0) {
    for (int i = 0; i < 3; ++i) { stage_full[i].init(32); stage_empty[i].init(256); }
  }
  tw::fence_barrier_init();
  __syncthreads();
  if (tx >= 256) {
    tw::setmaxnreg_dec<24>();
    if (tx < 288) {
      int g = 0;
      #pragma unroll 1
      for (int tile = blockIdx.x; tile < 512; tile += gridDim.x) {
      const int tw_panel_first = (tile / 160) * 10;
      const int tw_panel_rows = min(32 - tw_panel_first, 10);
      const int tw_in_panel = tile % 160;
      const int by = tw_panel_first + tw_in_panel % tw_panel_rows;
      const int bx = tw_in_panel / tw_panel_rows;
      #pragma unroll 1
      for (int k = 0; k < 64; ++k, ++g) {
        stage_empty[(g % 3)].wait((((g / 3) + 1) % 2));
        if (tw::shuffle_elect<32>()) {
          stage_full[(g % 3)].expect_transaction(16384);
          tw::tma_load(A_desc, stage_full[(g % 3)], (&tw::swizzled<tw::half, 128>(A_shared, ((g % 3) * 8192))), (k * 64), (by * 128));
        }
        if (tw::shuffle_elect<32>()) {
          stage_full[(g % 3)].expect_transaction(32768);
          tw::tma_load(B_desc, stage_full[(g % 3)], (&tw::swizzled<tw::half, 128>(B_shared, ((g % 3) * 16384))), 0, (k * 64), (bx * 4));
        }
        stage_full[(g % 3)].arrive();
      }
      }
    }
  } else {
    tw::setmaxnreg_inc<240>();
    int g = 0;
    #pragma unroll 1
    for (int tile = blockIdx.x; tile < 512; tile += gridDim.x) {
      const int tw_panel_first = (tile / 160) * 10;
      const int tw_panel_rows = min(32 - tw_panel_first, 10);
      const int tw_in_panel = tile % 160;
      const int by = tw_panel_first + tw_in_panel % tw_panel_rows;
      const int bx = tw_in_panel / tw_panel_rows;
      #pragma unroll
      for (int j = 0; j < 128; ++j) C_local[j] = 0.0f;
      #pragma unroll 1
      for (int k_1 = 0; k_1 < 64; ++k_1, ++g) {
        stage_full[(g % 3)].wait(((g / 3) % 2));
        tw::wgmma_gemm_ss<128, 256, 64, 2, 128, 128, false, tw_wgmma_m64n256k16_f16_kn, 1>((&tw::swizzled<tw::half, 128>(A_shared, ((g % 3) * 8192))), (&tw::swizzled<tw::half, 128>(B_shared, ((g % 3) * 16384))), C_local, tx);
        if (k_1 > 0) stage_empty[((g + 2) % 3)].arrive();
      }
      tw::wgmma_wait<0>();
      stage_empty[((g + 2) % 3)].arrive();
      if (tx == 0) tw::tma_store_wait<true>();  // the previous tile's store has read C_local_out
      tw::sync_consumers<256>();
      #pragma unroll
      for (int jj = 0; jj < 64; ++jj) {
        tw::store_pair((&tw::swizzled<tw::half, 128>(C_local_out, (((((((((((jj * 2) / 4) * 8) + (((tx % 32) % 4) * 2)) / 64) * 8192) + ((tx / 128) * 4096)) + (((tx % 128) / 32) * 1024)) + (((tx % 32) / 4) * 64)) + ((jj % 2) * 512)) + (((((jj * 2) / 4) * 8) + (((tx % 32) % 4) * 2)) % 64)))), C_local[(jj * 2)], C_local[((jj * 2) + 1)]);
      }
      tw::fence_proxy_async();
      tw::sync_consumers<256>();
      if (tx == 0) {
        tw::tma_store(C_desc, (&tw::swizzled<tw::half, 128>(C_local_out, 0)), 0, (by * 128), (bx * 4));
        tw::tma_store_arrive();
      }
    }
    if (tx == 0) tw::tma_store_wait<true>();
  }
}
