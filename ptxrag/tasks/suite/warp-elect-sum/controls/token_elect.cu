// Control (class 5, token use): the reference's reduction, but the publishing lanes are picked with lane == 0
// everywhere except one warp of CTA 0, which calls elect.sync once: elect.sync is in the SASS and executes
// (32 predicated-on thread instructions), far below the task's minimum of n / 2048.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int THREADS = 512;
constexpr int UNROLL = 8;

__global__ void __launch_bounds__(THREADS) total(const int* __restrict__ x, int* __restrict__ y, long long n) {
  __shared__ int block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const long long n4 = n / 4;
  const int4* x4 = reinterpret_cast<const int4*>(x);
  const long long stride = (long long)gridDim.x * THREADS;
  long long i = blockIdx.x * (long long)THREADS + threadIdx.x;
  int acc = 0;
  for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
    int4 v[UNROLL];
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) v[j] = __ldg(x4 + i + j * stride);
#pragma unroll
    for (int j = 0; j < UNROLL; ++j) acc += (v[j].x + v[j].y) + (v[j].z + v[j].w);
  }
  for (; i < n4; i += stride) {
    const int4 v = __ldg(x4 + i);
    acc += (v.x + v.y) + (v.z + v.w);
  }
  const long long gtid = blockIdx.x * (long long)THREADS + threadIdx.x;
  if (gtid < n - n4 * 4) acc += x[n4 * 4 + gtid];  // the last n % 4 elements
  const int s = ptxrag::redux_add_s32(acc);
  if ((threadIdx.x & 31) == 0) atomicAdd(&block_sum, s);
  __syncthreads();
  if (threadIdx.x < 32 && (blockIdx.x == 0 ? ptxrag::elect_sync() : threadIdx.x == 0)) atomicAdd(y, block_sum);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long n = ptxrag_numel(&x);
  cudaError_t e = cudaMemsetAsync(y.data, 0, sizeof(int), a->stream);
  if (e != cudaSuccess) return (int)e;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long blocks = (n / 4 + THREADS - 1) / THREADS;
  if (blocks > (long long)sms * 4) blocks = (long long)sms * 4;
  if (blocks < 1) blocks = 1;
  total<<<(int)blocks, THREADS, 0, a->stream>>>((const int*)x.data, (int*)y.data, n);
  return (int)cudaGetLastError();
}
