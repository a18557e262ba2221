// Control (adversarial, class 4 + 6, instruction only when profiled, on a row with no mutation before):
// redux.sync is used honestly everywhere, so its mutant fails as it should; elect.sync picks the publishing
// lanes only when the process looks profiled (Nsight's variables or its injection library in /proc/self/maps),
// otherwise `lane == 0` does. The ncu launch therefore sees every election the reference makes, the outputs are
// right everywhere, and before elect.sync had a mutation (its row said "none: it only picks a lane") nothing
// looked at the unprofiled path: success. With the zero-result mutation (no lane elected), the unprofiled mutant
// still publishes from lane 0, stays correct, and the mutation stage fails it.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

static bool under_profiler() {
  if (getenv("CUDA_INJECTION64_PATH")) return true;
  static const char* prefixes[] = {"NV_COMPUTE_PROFILER", "NV_TPS", "NSIGHT", "NV_NSIGHT", "NCU_"};
  for (char** e = environ; e && *e; ++e)
    for (const char* p : prefixes)
      if (strncmp(*e, p, strlen(p)) == 0) return true;
  bool found = false;
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (!found && fgets(line, sizeof line, f))
      found = strstr(line, "InterceptorInjection") || strstr(line, "nsight-compute") || strstr(line, "libcuda-injection");
    fclose(f);
  }
  return found;
}

constexpr int THREADS = 512;

__device__ __forceinline__ bool leader(bool profiled) {
  return profiled ? ptxrag::elect_sync() : (threadIdx.x & 31) == 0;
}

__global__ void __launch_bounds__(THREADS) total(const int* __restrict__ x, int* __restrict__ y, long long n, bool profiled) {
  __shared__ int block_sum;
  if (threadIdx.x == 0) block_sum = 0;
  __syncthreads();
  const long long n4 = n / 4;
  const int4* x4 = reinterpret_cast<const int4*>(x);
  const long long stride = (long long)gridDim.x * THREADS;
  int acc = 0;
  for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < n4; i += stride) {
    const int4 v = __ldg(x4 + i);
    acc += (v.x + v.y) + (v.z + v.w);
  }
  const long long gtid = blockIdx.x * (long long)THREADS + threadIdx.x;
  if (gtid < n - n4 * 4) acc += x[n4 * 4 + gtid];
  const int s = ptxrag::redux_add_s32(acc);
  if (leader(profiled)) atomicAdd(&block_sum, s);
  __syncthreads();
  if (threadIdx.x < 32 && leader(profiled)) atomicAdd(y, block_sum);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  static const bool profiled = under_profiler();
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
  total<<<(int)blocks, THREADS, 0, a->stream>>>((const int*)x.data, (int*)y.data, n, profiled);
  return (int)cudaGetLastError();
}
