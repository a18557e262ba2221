// Unit kernel: 1-D bulk copy global -> shared (mbarrier completion), in-place transform, shared -> global
// bulk store (bulk async-group completion). One tile in flight per CTA, persistent over tiles.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int TILE = 2048;  // floats (8 KiB, a multiple of 16 bytes)
constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS) affine(const float* __restrict__ x, float* __restrict__ y,
                                                  long long n_tiles) {
  __shared__ __align__(128) float buf[TILE];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar), s = ptxrag::smem_u32(buf);
  const bool leader = threadIdx.x == 0;
  if (leader) ptxrag::mbarrier_init(b, 1);  // one arrival per phase: the leader's arrive.expect_tx
  __syncthreads();
  uint32_t phase = 0;
  for (long long t = blockIdx.x; t < n_tiles; t += gridDim.x) {
    if (leader) {
      ptxrag::bulk_wait_group_read<0>();  // the previous tile's store has finished reading buf
      ptxrag::mbarrier_arrive_expect_tx(b, TILE * 4);
      ptxrag::bulk_load(s, x + t * TILE, TILE * 4, b);
    }
    ptxrag::mbarrier_wait_parity(b, phase);
    phase ^= 1u;
    for (int i = threadIdx.x; i < TILE; i += THREADS) buf[i] = 2.f * buf[i] + 1.f;
    ptxrag::fence_proxy_async_shared_cta();  // my generic writes -> visible to the async proxy (the store)
    __syncthreads();
    if (leader) {
      ptxrag::bulk_store(y + t * TILE, s, TILE * 4);
      ptxrag::bulk_commit_group();
    }
  }
  if (leader) ptxrag::bulk_wait_group<0>();  // all stores complete before the CTA exits
}

__global__ void affine_tail(const float* __restrict__ x, float* __restrict__ y, long long start, long long n) {
  const long long i = start + blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i] + 1.f;
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || y.dtype != PTXRAG_F32 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long n = ptxrag_numel(&x), n_tiles = n / TILE;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  if (n_tiles > 0) {
    const long long blocks = n_tiles < (long long)sms * 8 ? n_tiles : (long long)sms * 8;
    affine<<<(int)blocks, THREADS, 0, a->stream>>>((const float*)x.data, (float*)y.data, n_tiles);
  }
  const long long done = n_tiles * TILE;
  if (done < n) {
    affine_tail<<<(unsigned)((n - done + 255) / 256), 256, 0, a->stream>>>((const float*)x.data, (float*)y.data,
                                                                            done, n);
  }
  return (int)cudaGetLastError();
}
