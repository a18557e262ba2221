// Alternative (honest): structured differently from solution.cu. Not persistent and not pipelined: one CTA
// per 64 x 64 float32 tile (a 2-D grid), square TMA boxes instead of 32 x 128, one mbarrier used once, 256
// threads. Thread 0 arms the barrier and issues the TMA tensor load; everyone waits on parity 0, computes
// y = alpha * x + b in place (each thread keeps one float4 of b: its column is fixed), fences the async proxy,
// and thread 0 stores the tile with a TMA tensor store, commits the bulk group and waits for it to finish
// reading shared memory before the CTA exits. Latency is hidden by many resident CTAs, not by a ring. TMA
// zero-fills the out-of-range part of edge boxes and clips the store at the tensor edge.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdint>

constexpr int BOX = 64;  // 64 x 64 floats = 16 KiB per tile
constexpr int THREADS = 256;
constexpr uint32_t TILE_FLOATS = BOX * BOX;
constexpr uint32_t TILE_BYTES = TILE_FLOATS * 4;

__global__ void __launch_bounds__(THREADS) bias_scale(const __grid_constant__ CUtensorMap xmap,
                                                      const __grid_constant__ CUtensorMap ymap,
                                                      const float* __restrict__ b, int cols, float alpha) {
  __shared__ __align__(128) float tile[TILE_FLOATS];
  __shared__ __align__(8) uint64_t full;
  const int tid = threadIdx.x;
  const int c0 = blockIdx.x * BOX, r0 = blockIdx.y * BOX;
  const uint32_t bar = ptxrag::smem_u32(&full);
  if (tid == 0) {
    ptxrag::mbarrier_init(bar, 1);
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    ptxrag::mbarrier_arrive_expect_tx(bar, TILE_BYTES);
    ptxrag::tma_load_2d(ptxrag::smem_u32(tile), &xmap, c0, r0, bar);
  }
  // float4 index q = tid + 256 k of the tile: row q / 16, columns 4 (q % 16) .. +3, and q % 16 = tid % 16
  const int c = c0 + 4 * (tid % 16);
  float4 bias = make_float4(0.f, 0.f, 0.f, 0.f);
  if (c < cols) bias = __ldg(reinterpret_cast<const float4*>(b + c));  // cols % 4 == 0: all four in range
  ptxrag::mbarrier_wait_parity(bar, 0);
  float4* t4 = reinterpret_cast<float4*>(tile);
#pragma unroll
  for (int k = 0; k < (int)(TILE_FLOATS / 4 / THREADS); ++k) {
    float4 v = t4[tid + k * THREADS];
    v.x = fmaf(alpha, v.x, bias.x);
    v.y = fmaf(alpha, v.y, bias.y);
    v.z = fmaf(alpha, v.z, bias.z);
    v.w = fmaf(alpha, v.w, bias.w);
    t4[tid + k * THREADS] = v;
  }
  ptxrag::fence_proxy_async_shared_cta();  // the generic-proxy writes must be visible to the TMA store
  __syncthreads();
  if (tid == 0) {
    ptxrag::tma_store_2d(&ymap, c0, r0, ptxrag::smem_u32(tile));
    ptxrag::bulk_commit_group();
    ptxrag::bulk_wait_group_read<0>();  // shared memory must stay valid until the store has read it
  }
}

static int encode_2d(CUtensorMap* map, void* base, uint64_t cols, uint64_t rows) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {cols * 4};
  const uint32_t box[2] = {BOX, BOX};
  return ptxrag::make_tensor_map(map, base, PTXRAG_F32, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1 || a->n_scalars != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& b = a->inputs[1];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || b.dtype != PTXRAG_F32 || y.dtype != PTXRAG_F32 || x.ndim != 2 || y.ndim != 2 ||
      !ptxrag_is_contiguous(&x) || !ptxrag_is_contiguous(&y) || !ptxrag_is_contiguous(&b))
    return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  if (cols % 4 != 0 || b.shape[0] != cols || y.shape[0] != rows || y.shape[1] != cols) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  if (rows > INT32_MAX || cols > INT32_MAX || (rows + BOX - 1) / BOX > 65535) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  if (rows == 0 || cols == 0) return 0;
  CUtensorMap xmap, ymap;
  int rc = encode_2d(&xmap, x.data, cols, rows);
  if (rc == 0) rc = encode_2d(&ymap, y.data, cols, rows);
  if (rc != 0) return rc;
  dim3 grid((unsigned)((cols + BOX - 1) / BOX), (unsigned)((rows + BOX - 1) / BOX));
  bias_scale<<<grid, THREADS, 0, a->stream>>>(xmap, ymap, (const float*)b.data, (int)cols, (float)a->scalars[0]);
  return (int)cudaGetLastError();
}
