// Unit kernel: TMA load of a 32x64 tile; threads double it into a second shared tile (generic proxy), fence,
// barrier, TMA store -> y. The loaded tile itself goes to z with a TMA store, then (next bulk group, after the
// store completed) a TMA add-reduction of the same tile: z = x + x.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int BR = 32, BC = 64, THREADS = 256;

__global__ void __launch_bounds__(THREADS) store_units(const __grid_constant__ CUtensorMap xmap,
                                                       const __grid_constant__ CUtensorMap ymap,
                                                       const __grid_constant__ CUtensorMap zmap, int rows, int cols) {
  __shared__ __align__(128) float xt[BR * BC];
  __shared__ __align__(128) float yt[BR * BC];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar), xs = ptxrag::smem_u32(xt), ys = ptxrag::smem_u32(yt);
  const int tiles_c = (cols + BC - 1) / BC, n_tiles = tiles_c * ((rows + BR - 1) / BR);
  const bool leader = threadIdx.x == 0;
  if (leader) ptxrag::mbarrier_init(b, 1);
  __syncthreads();
  uint32_t phase = 0;
  for (int t = blockIdx.x; t < n_tiles; t += gridDim.x) {
    const int r0 = (t / tiles_c) * BR, c0 = (t % tiles_c) * BC;
    if (leader) {
      ptxrag::bulk_wait_group_read<0>();  // last tile's stores have read xt and yt
      ptxrag::mbarrier_arrive_expect_tx(b, BR * BC * 4);
      ptxrag::tma_load_2d(xs, &xmap, c0, r0, b);
    }
    __syncthreads();  // nobody writes yt before the leader knows the old stores finished reading it
    ptxrag::mbarrier_wait_parity(b, phase);
    phase ^= 1u;
    for (int i = threadIdx.x; i < BR * BC; i += THREADS) yt[i] = 2.f * xt[i];
    ptxrag::fence_proxy_async_shared_cta();  // generic writes of yt -> visible to the TMA store
    __syncthreads();
    if (leader) {
      ptxrag::tma_store_2d(&ymap, c0, r0, ys);
      ptxrag::tma_store_2d(&zmap, c0, r0, xs);
      ptxrag::bulk_commit_group();
      ptxrag::bulk_wait_group<0>();  // z holds x before the reduction adds to it (no order inside a group)
      ptxrag::tma_reduce_add_2d(&zmap, c0, r0, xs);
      ptxrag::bulk_commit_group();
    }
  }
  if (leader) ptxrag::bulk_wait_group<0>();
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 2) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  if (x.dtype != PTXRAG_F32 || x.ndim != 2 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const int rows = (int)x.shape[0], cols = (int)x.shape[1];
  if ((cols * 4) % 16 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  alignas(64) CUtensorMap maps[3];
  const void* bases[3] = {x.data, a->outputs[0].data, a->outputs[1].data};
  for (int i = 0; i < 3; ++i) {
    const int rc = ptxrag::make_tensor_map_2d(&maps[i], bases[i], PTXRAG_F32, rows, cols, cols, BR, BC);
    if (rc != 0) return rc;
  }
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int n_tiles = ((rows + BR - 1) / BR) * ((cols + BC - 1) / BC);
  const int blocks = n_tiles < sms * 4 ? n_tiles : sms * 4;
  store_units<<<blocks, THREADS, 0, a->stream>>>(maps[0], maps[1], maps[2], rows, cols);
  return (int)cudaGetLastError();
}
