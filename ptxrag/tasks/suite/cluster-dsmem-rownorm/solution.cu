// Reference solution: a cluster of 4 CTAs per row (CTA rank q owns columns [q * cols/4, (q+1) * cols/4)).
// Thread 0 of each CTA initialises two mbarriers: `loaded` (the 1-D bulk copy of the quarter row) and `parts`
// (armed for 4 incoming partial sums, 16 bytes). A cluster barrier makes every CTA's `parts` barrier valid
// before anyone sends. Each CTA sums squares of its quarter from shared memory, then thread 0 sends the partial
// to slot q of every CTA in the cluster with st.async (mapa gives the peer addresses), completing on the peer's
// `parts` barrier. Every CTA adds the four slots in the same order, so all quarters use the same norm, and
// scales its quarter straight from shared memory. A last cluster barrier keeps CTAs alive until all are done.
// All the PTX (mbarrier, bulk copy, cluster rank/barrier, mapa, st.async) comes from the ptxrag_sm90.cuh
// template header.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int CL = 4;  // CTAs per cluster (and per row)
constexpr int THREADS = 256;
constexpr int MAX_COLS = 65536;

__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS) rownorm(const float* __restrict__ x,
                                                                             float* __restrict__ y, int cols) {
  extern __shared__ __align__(128) float4 quarter[];
  __shared__ __align__(8) uint64_t loaded, parts;
  __shared__ float slots[CL];
  __shared__ float warp_sums[THREADS / 32];
  const uint32_t rank = ptxrag::cluster_ctarank();
  const long long row = blockIdx.x / CL;
  const int chunk = cols / CL;  // floats, a multiple of 4
  const int chunk4 = chunk / 4;
  const float* src = x + row * cols + (long long)rank * chunk;
  if (threadIdx.x == 0) {
    ptxrag::mbarrier_init(ptxrag::smem_u32(&loaded), 1);
    ptxrag::mbarrier_init(ptxrag::smem_u32(&parts), 1);
    ptxrag::fence_mbarrier_init();
    ptxrag::mbarrier_arrive_expect_tx(ptxrag::smem_u32(&parts), CL * 4);
    ptxrag::mbarrier_arrive_expect_tx(ptxrag::smem_u32(&loaded), chunk * 4);
    ptxrag::bulk_load(ptxrag::smem_u32(quarter), src, chunk * 4, ptxrag::smem_u32(&loaded));
  }
  ptxrag::cluster_sync();  // every CTA's `parts` barrier is initialised and armed before any partial is sent

  ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&loaded), 0);
  float ss = 0.f;
  for (int i = threadIdx.x; i < chunk4; i += THREADS) {
    const float4 v = quarter[i];
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffff, ss, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float part = 0.f;
    for (int w = 0; w < THREADS / 32; ++w) part += warp_sums[w];
    for (uint32_t peer = 0; peer < CL; ++peer) {
      const uint32_t slot = ptxrag::mapa_shared(ptxrag::smem_u32(&slots[rank]), peer);
      const uint32_t bar = ptxrag::mapa_shared(ptxrag::smem_u32(&parts), peer);
      ptxrag::st_async_f32(slot, part, bar);
    }
  }
  ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&parts), 0);  // all four partial sums have landed in `slots`
  float total = 0.f;
#pragma unroll
  for (int q = 0; q < CL; ++q) total += slots[q];
  const float inv = 1.f / sqrtf(total);
  float4* dst = reinterpret_cast<float4*>(y + row * cols + (long long)rank * chunk);
  for (int i = threadIdx.x; i < chunk4; i += THREADS) {
    const float4 v = quarter[i];
    dst[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  }
  ptxrag::cluster_sync();  // no CTA leaves while a peer may still address its shared memory
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || y.dtype != PTXRAG_F32 || x.ndim != 2 || !ptxrag_is_contiguous(&x) ||
      !ptxrag_is_contiguous(&y))
    return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  if (cols % 16 != 0 || cols > MAX_COLS || cols < 16 || rows * CL > INT32_MAX) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  const int smem = (int)(cols / CL * 4);
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(rownorm, cudaFuncAttributeMaxDynamicSharedMemorySize, MAX_COLS / CL * 4);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  rownorm<<<(unsigned)(rows * CL), THREADS, smem, a->stream>>>((const float*)x.data, (float*)y.data, (int)cols);
  return (int)cudaGetLastError();
}
