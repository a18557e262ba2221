// Reference solution: a cluster of 4 CTAs per row (CTA rank q owns columns [q * cols/4, (q+1) * cols/4)).
// Thread 0 of each CTA initialises two mbarriers: `loaded` (the 1-D bulk copy of the quarter row) and `parts`
// (armed for 4 incoming partial sums, 16 bytes). A cluster barrier makes every CTA's `parts` barrier valid
// before anyone sends. Each CTA sums squares of its quarter from shared memory, then thread 0 sends the partial
// to slot q of every CTA in the cluster with st.async (mapa gives the peer addresses), completing on the peer's
// `parts` barrier. Every CTA adds the four slots in the same order, so all quarters use the same norm, and
// scales its quarter straight from shared memory. A last cluster barrier keeps CTAs alive until all are done.
#include "ptxrag_abi.h"
#include <cstdint>

constexpr int CL = 4;  // CTAs per cluster (and per row)
constexpr int THREADS = 256;
constexpr int MAX_COLS = 65536;

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}"
      :: "r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS) rownorm(const float* __restrict__ x,
                                                                             float* __restrict__ y, int cols) {
  extern __shared__ __align__(128) float4 quarter[];
  __shared__ __align__(8) uint64_t loaded, parts;
  __shared__ float slots[CL];
  __shared__ float warp_sums[THREADS / 32];
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const long long row = blockIdx.x / CL;
  const int chunk = cols / CL;  // floats, a multiple of 4
  const int chunk4 = chunk / 4;
  const float* src = x + row * cols + (long long)rank * chunk;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&loaded)));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_u32(&parts)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(&parts)), "r"(CL * 4) : "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_u32(&loaded)), "r"(chunk * 4) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(smem_u32(quarter)), "l"(src), "r"(chunk * 4), "r"(smem_u32(&loaded)) : "memory");
  }
  cluster_sync();  // every CTA's `parts` barrier is initialised and armed before any partial is sent

  mbar_wait(smem_u32(&loaded), 0);
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
      uint32_t slot, bar;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(slot) : "r"(smem_u32(&slots[rank])), "r"(peer));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(bar) : "r"(smem_u32(&parts)), "r"(peer));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
                   :: "r"(slot), "f"(part), "r"(bar) : "memory");
    }
  }
  mbar_wait(smem_u32(&parts), 0);  // all four partial sums have landed in `slots`
  float total = 0.f;
#pragma unroll
  for (int q = 0; q < CL; ++q) total += slots[q];
  const float inv = 1.f / sqrtf(total);
  float4* dst = reinterpret_cast<float4*>(y + row * cols + (long long)rank * chunk);
  for (int i = threadIdx.x; i < chunk4; i += THREADS) {
    const float4 v = quarter[i];
    dst[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  }
  cluster_sync();  // no CTA leaves while a peer may still address its shared memory
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
