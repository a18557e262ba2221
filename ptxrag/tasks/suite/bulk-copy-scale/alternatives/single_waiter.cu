// Honest alternative: the reference's pipeline, but only thread 0 polls the stage's mbarrier; the block then
// meets at a barrier, which carries the copied tile's visibility from the one waiter to every thread. Its
// mbarrier.try_wait count is under 1% of the reference's (whose every thread polls): it must pass, which it
// does only because the token-use minimum is not applied to waits (opcode table: count = "any").
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int TILE = 4096;  // floats per tile (16 KiB)
constexpr int STAGES = 2;
constexpr int THREADS = 256;

// announce the bytes on the stage's mbarrier, then start the 1-D bulk copy that completes on it
__device__ __forceinline__ void issue(float* dst, const float* src, uint32_t bytes, uint32_t bar) {
  ptxrag::mbarrier_arrive_expect_tx(bar, bytes);
  ptxrag::bulk_load(ptxrag::smem_u32(dst), src, bytes, bar);
}

__global__ void __launch_bounds__(THREADS) scale(const float* __restrict__ x, float* __restrict__ y, long long n_tiles,
                                                 float alpha) {
  __shared__ __align__(128) float buf[STAGES][TILE];
  __shared__ __align__(8) uint64_t bars[STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) ptxrag::mbarrier_init(ptxrag::smem_u32(&bars[s]), 1);
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();
  long long t = blockIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES && t + (long long)s * gridDim.x < n_tiles; ++s)
      issue(buf[s], x + (t + (long long)s * gridDim.x) * TILE, TILE * 4, ptxrag::smem_u32(&bars[s]));
  }
  uint32_t phase[STAGES] = {0, 0};
  for (int it = 0; t < n_tiles; t += gridDim.x, ++it) {
    const int s = it % STAGES;
    if (threadIdx.x == 0) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&bars[s]), phase[s]);
    __syncthreads();  // the waiter's view of the tile reaches the whole block through the barrier
    phase[s] ^= 1;
    const float4* in = reinterpret_cast<const float4*>(buf[s]);
    float4* out = reinterpret_cast<float4*>(y + t * TILE);
    for (int i = threadIdx.x; i < TILE / 4; i += THREADS) {
      float4 v = in[i];
      v.x *= alpha; v.y *= alpha; v.z *= alpha; v.w *= alpha;
      out[i] = v;
    }
    __syncthreads();  // everyone is done reading buf[s] before it is refilled
    const long long next = t + (long long)STAGES * gridDim.x;
    if (threadIdx.x == 0 && next < n_tiles) issue(buf[s], x + next * TILE, TILE * 4, ptxrag::smem_u32(&bars[s]));
  }
}

__global__ void scale_tail(const float* __restrict__ x, float* __restrict__ y, long long start, long long n, float alpha) {
  long long i = start + blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i];
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1 || a->n_scalars != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || y.dtype != PTXRAG_F32 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long n = ptxrag_numel(&x);
  const float alpha = (float)a->scalars[0];
  const long long n_tiles = n / TILE;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (n_tiles > 0) {
    long long blocks = n_tiles < (long long)sms * 4 ? n_tiles : (long long)sms * 4;
    scale<<<(int)blocks, THREADS, 0, a->stream>>>((const float*)x.data, (float*)y.data, n_tiles, alpha);
  }
  const long long done = n_tiles * TILE;
  if (done < n) {
    const long long rest = n - done;
    scale_tail<<<(unsigned)((rest + 255) / 256), 256, 0, a->stream>>>((const float*)x.data, (float*)y.data, done, n, alpha);
  }
  return (int)cudaGetLastError();
}
