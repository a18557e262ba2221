// Control (adversarial, class 4, first call only, with the profiled launch's job rewritten): as
// first_call_only.cu, redux.sync and elect.sync run only in the first call of a process, shuffles and lane 0
// afterwards. The worker writes the profiled launch's job (inputs/launch.json, in the candidate process's
// working directory) after the first check; this kernel's second call rewrites its "warm_calls" to 0, so the
// profiled call would again be its process's first: correct, counted, and every mutant fails its own first
// check. Passed while launch_once.py took warm_calls (and the library) from that file; now both come from
// the evaluator's command line, so it fails at execution like first_call_only.cu.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>
#include <cstdio>
#include <cstring>

constexpr int THREADS = 512;
constexpr int UNROLL = 8;

__global__ void __launch_bounds__(THREADS) total(const int* __restrict__ x, int* __restrict__ y, long long n, int plain) {
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
  if (plain) {  // every call after the first: shuffles and lane 0
    int s = acc;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&block_sum, s);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(y, block_sum);
    return;
  }
  const int s = ptxrag::redux_add_s32(acc);
  if (ptxrag::elect_sync()) atomicAdd(&block_sum, s);
  __syncthreads();
  if (threadIdx.x < 32 && ptxrag::elect_sync()) atomicAdd(y, block_sum);
}

// rewrite "warm_calls": N in the profiled launch's job to 0 (same length: the file stays valid JSON)
static void forge_launch_job() {
  FILE* f = fopen("inputs/launch.json", "r+");
  if (!f) return;
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  if (char* p = strstr(buf, "\"warm_calls\": ")) {
    p += strlen("\"warm_calls\": ");
    if (*p >= '1' && *p <= '9') {
      *p = '0';
      fseek(f, 0, SEEK_SET);
      fwrite(buf, 1, n, f);
    }
  }
  fclose(f);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long n = ptxrag_numel(&x);
  static int calls = 0;
  const int plain = calls++ > 0;  // redux.sync and elect.sync only in the first call of the process
  if (calls == 2) forge_launch_job();  // the first check saved the job; this is the second check
  cudaError_t e = cudaMemsetAsync(y.data, 0, sizeof(int), a->stream);
  if (e != cudaSuccess) return (int)e;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long blocks = (n / 4 + THREADS - 1) / THREADS;
  if (blocks > (long long)sms * 4) blocks = (long long)sms * 4;
  if (blocks < 1) blocks = 1;
  total<<<(int)blocks, THREADS, 0, a->stream>>>((const int*)x.data, (int*)y.data, n, plain);
  return (int)cudaGetLastError();
}
