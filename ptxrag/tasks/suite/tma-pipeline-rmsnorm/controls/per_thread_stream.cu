// Control (adversarial, class 8, off stream): the reference pipeline, launched on cudaStreamPerThread (the
// calling thread's own default stream) instead of args->stream. Nothing orders it with args->stream, but a
// caller that synchronises the whole device still reads the right y. A per-launch stream record must fail it
// at correctness; today the timing stage's event time (empty args->stream) disagrees with the
// device-synchronised time, and the time is below the roofline bound.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdint>

constexpr int BOXC = 256;                 // floats per box row (1 KB)
constexpr int STAGES = 3;
constexpr int CONSUMER_WARPS = 8;
constexpr int THREADS = (CONSUMER_WARPS + 1) * 32;
constexpr int STAGE_BUDGET = 32 * 1024;   // bytes per stage
constexpr int SMEM_BYTES = STAGES * STAGE_BUDGET;

__global__ void __launch_bounds__(THREADS) rmsnorm(const __grid_constant__ CUtensorMap xmap, const float* __restrict__ w,
                                                   float* __restrict__ y, int rows, int cols, int R, int nb,
                                                   long long n_tiles, float eps) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t stage_bytes = (uint32_t)R * nb * BOXC * 4;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), CONSUMER_WARPS);
    }
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == CONSUMER_WARPS) {  // producer
    if (lane == 0) {
      long long it = 0;
      for (long long t = blockIdx.x; t < n_tiles; t += gridDim.x, ++it) {
        const int s = (int)(it % STAGES);
        if (it >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (uint32_t)((it / STAGES - 1) & 1));
        const uint32_t bar = ptxrag::smem_u32(&full[s]), dst = ptxrag::smem_u32(smem + s * STAGE_BUDGET);
        ptxrag::mbarrier_arrive_expect_tx(bar, stage_bytes);
        for (int j = 0; j < nb; ++j)
          ptxrag::tma_load_2d(dst + (uint32_t)j * R * BOXC * 4, &xmap, j * BOXC, (int)(t * R), bar);
      }
    }
    return;
  }
  const int c4n = cols / 4;
  long long it = 0;
  for (long long t = blockIdx.x; t < n_tiles; t += gridDim.x, ++it) {
    const int s = (int)(it % STAGES);
    ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full[s]), (uint32_t)((it / STAGES) & 1));
    const float4* st = reinterpret_cast<const float4*>(smem + s * STAGE_BUDGET);
    for (int r = warp; r < R; r += CONSUMER_WARPS) {
      const long long row = t * R + r;
      if (row >= rows) break;
      // float4 q of the row: box q / 64, offset (q % 64) within the box row
      float ss = 0.f;
      for (int q = lane; q < c4n; q += 32) {
        const float4 v = st[(q / 64) * R * 64 + r * 64 + q % 64];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
      const float inv = rsqrtf(ss / (float)cols + eps);
      float4* out = reinterpret_cast<float4*>(y + row * cols);
      const float4* w4 = reinterpret_cast<const float4*>(w);
      for (int q = lane; q < c4n; q += 32) {
        const float4 v = st[(q / 64) * R * 64 + r * 64 + q % 64];
        const float4 g = __ldg(w4 + q);
        out[q] = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
      }
    }
    __syncwarp();
    if (lane == 0) ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[s]));
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1 || a->n_scalars != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& w = a->inputs[1];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || w.dtype != PTXRAG_F32 || y.dtype != PTXRAG_F32 || x.ndim != 2 ||
      !ptxrag_is_contiguous(&x) || !ptxrag_is_contiguous(&y) || !ptxrag_is_contiguous(&w))
    return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  if (cols % 4 != 0 || cols < BOXC || cols > 8192 || w.shape[0] != cols || rows > INT32_MAX)
    return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  const int nb = (int)((cols + BOXC - 1) / BOXC);
  int R = STAGE_BUDGET / (nb * BOXC * 4);
  if (R > 16) R = 16;
  if (R < 1) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap xmap;
  const uint64_t dims[2] = {(uint64_t)cols, (uint64_t)rows};
  const uint64_t strides[1] = {(uint64_t)cols * 4};
  const uint32_t box[2] = {BOXC, (uint32_t)R};
  const int rc = ptxrag::make_tensor_map(&xmap, x.data, PTXRAG_F32, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  if (rc != 0) return rc;
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(rmsnorm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  const long long n_tiles = (rows + R - 1) / R;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const long long grid = n_tiles < 2LL * sms ? n_tiles : 2LL * sms;
  rmsnorm<<<(int)grid, THREADS, SMEM_BYTES, cudaStreamPerThread>>>(xmap, (const float*)w.data, (float*)y.data, (int)rows,
                                                         (int)cols, R, nb, n_tiles, (float)a->scalars[0]);
  return (int)cudaGetLastError();
}
