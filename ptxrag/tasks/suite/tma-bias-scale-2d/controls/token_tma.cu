// Control (adversarial, class 5, token use): CTA 0 moves tile (0, 0) with the full TMA sequence (mbarrier,
// tensor load, try_wait.parity, fence.proxy.async, tensor store, bulk group); every other element is computed
// with plain float4 loads and stores. Correct, and each required instruction is executed (once or by one CTA),
// but one TMA load per call against the reference's 4096: the execution minimum must fail it.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdint>

constexpr int BOX_C = 128;  // columns per tile (512 bytes)
constexpr int BOX_R = 32;   // rows per tile
constexpr int STAGES = 4;
constexpr int THREADS = 256;
constexpr uint32_t TILE_FLOATS = BOX_C * BOX_R;
constexpr uint32_t TILE_BYTES = TILE_FLOATS * 4;
constexpr int SMEM_BYTES = STAGES * TILE_BYTES;

// arm the stage's mbarrier for one full tile, then issue the TMA load that completes on it
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int c, int r, uint32_t bar) {
  ptxrag::mbarrier_arrive_expect_tx(bar, TILE_BYTES);
  ptxrag::tma_load_2d(dst, map, c, r, bar);
}

// TMA store of one tile as its own bulk group
__device__ __forceinline__ void tma_store(const CUtensorMap* map, int c, int r, uint32_t src) {
  ptxrag::tma_store_2d(map, c, r, src);
  ptxrag::bulk_commit_group();
}

__global__ void __launch_bounds__(THREADS) bias_scale(const __grid_constant__ CUtensorMap xmap,
                                                      const __grid_constant__ CUtensorMap ymap,
                                                      const float* __restrict__ b, int cols, int tiles_c,
                                                      long long n_tiles, float alpha) {
  extern __shared__ __align__(1024) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[STAGES];
  float* buf = reinterpret_cast<float*>(smem);
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
    ptxrag::fence_mbarrier_init();
    ptxrag::prefetch_tensormap(&xmap);
    ptxrag::prefetch_tensormap(&ymap);
  }
  __syncthreads();
  auto tile_of = [&](long long it) { return (long long)blockIdx.x + it * gridDim.x; };
  if (tid == 0) {
    for (int it = 0; it < STAGES - 1 && tile_of(it) < n_tiles; ++it) {
      const long long t = tile_of(it);
      tma_load(ptxrag::smem_u32(buf + it * TILE_FLOATS), &xmap, (int)(t % tiles_c) * BOX_C,
               (int)(t / tiles_c) * BOX_R, ptxrag::smem_u32(&full[it]));
    }
  }
  for (long long it = 0; tile_of(it) < n_tiles; ++it) {
    const long long t = tile_of(it);
    const int s = (int)(it % STAGES);
    const int c0 = (int)(t % tiles_c) * BOX_C, r0 = (int)(t / tiles_c) * BOX_R;
    // this thread always handles the same 4 columns of a tile: float4 index tid + 256 k has column tid % 32
    const int c = c0 + 4 * (tid % 32);
    float4 bias = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < cols) bias = __ldg(reinterpret_cast<const float4*>(b + c));
    ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full[s]), (uint32_t)((it / STAGES) & 1));
    float4* tile = reinterpret_cast<float4*>(buf + s * TILE_FLOATS);
#pragma unroll
    for (int k = 0; k < (int)(TILE_FLOATS / 4 / THREADS); ++k) {
      float4 v = tile[tid + k * THREADS];
      v.x = fmaf(alpha, v.x, bias.x);
      v.y = fmaf(alpha, v.y, bias.y);
      v.z = fmaf(alpha, v.z, bias.z);
      v.w = fmaf(alpha, v.w, bias.w);
      tile[tid + k * THREADS] = v;
    }
    ptxrag::fence_proxy_async_shared_cta();  // make the writes visible to the copy engine
    __syncthreads();
    if (tid == 0) {
      tma_store(&ymap, c0, r0, ptxrag::smem_u32(tile));
      // the buffer refilled next held tile it-1; its store must have finished reading shared memory
      ptxrag::bulk_wait_group_read<1>();
      const long long nt = tile_of(it + STAGES - 1);
      if (nt < n_tiles) {
        const int ns = (int)((it + STAGES - 1) % STAGES);
        tma_load(ptxrag::smem_u32(buf + ns * TILE_FLOATS), &xmap, (int)(nt % tiles_c) * BOX_C,
                 (int)(nt / tiles_c) * BOX_R, ptxrag::smem_u32(&full[ns]));
      }
    }
  }
  if (tid == 0) ptxrag::bulk_wait_group<0>();
}

__global__ void __launch_bounds__(THREADS) bias_scale_token(const __grid_constant__ CUtensorMap xmap,
                                                            const __grid_constant__ CUtensorMap ymap,
                                                            const float* __restrict__ x, const float* __restrict__ b,
                                                            float* __restrict__ y, long long rows, long long cols,
                                                            float alpha) {
  __shared__ __align__(128) float tile[TILE_FLOATS];
  __shared__ __align__(8) uint64_t full;
  const int tid = threadIdx.x;
  if (blockIdx.x == 0) {  // the token: tile (0, 0) goes through TMA load, fence.proxy.async and TMA store
    if (tid == 0) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full), 1);
      ptxrag::fence_mbarrier_init();
    }
    __syncthreads();
    if (tid == 0) tma_load(ptxrag::smem_u32(tile), &xmap, 0, 0, ptxrag::smem_u32(&full));
    ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full), 0);
    const int c = 4 * (tid % 32);
    float4 bias = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < cols) bias = __ldg(reinterpret_cast<const float4*>(b + c));
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
    ptxrag::fence_proxy_async_shared_cta();
    __syncthreads();
    if (tid == 0) {
      tma_store(&ymap, 0, 0, ptxrag::smem_u32(tile));
      ptxrag::bulk_wait_group<0>();
    }
  }
  // everything else: plain float4 loads and stores, skipping the elements of tile (0, 0)
  const long long cols4 = cols / 4, n4 = rows * cols4;
  for (long long i = blockIdx.x * (long long)THREADS + tid; i < n4; i += (long long)gridDim.x * THREADS) {
    const long long r = i / cols4, c = 4 * (i % cols4);
    if (r < BOX_R && c < BOX_C) continue;
    float4 v = __ldg(reinterpret_cast<const float4*>(x) + i);
    const float4 bb = __ldg(reinterpret_cast<const float4*>(b + c));
    v.x = fmaf(alpha, v.x, bb.x);
    v.y = fmaf(alpha, v.y, bb.y);
    v.z = fmaf(alpha, v.z, bb.z);
    v.w = fmaf(alpha, v.w, bb.w);
    reinterpret_cast<float4*>(y)[i] = v;
  }
}

// float32 [rows, cols] row-major, BOX_R x BOX_C boxes, no swizzle, 256-byte L2 promotion (cuTensorMapEncodeTiled
// through ptxrag_get_driver_fn, inside ptxrag::make_tensor_map)
static int encode_2d(CUtensorMap* map, void* base, uint64_t cols, uint64_t rows) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {cols * 4};
  const uint32_t box[2] = {BOX_C, BOX_R};
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
  if (cols % 4 != 0 || b.shape[0] != cols) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap xmap, ymap;
  int rc = encode_2d(&xmap, x.data, cols, rows);
  if (rc == 0) rc = encode_2d(&ymap, y.data, cols, rows);
  if (rc != 0) return rc;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  bias_scale_token<<<sms * 8, THREADS, 0, a->stream>>>(xmap, ymap, (const float*)x.data, (const float*)b.data,
                                                      (float*)y.data, rows, cols, (float)a->scalars[0]);
  return (int)cudaGetLastError();
}
