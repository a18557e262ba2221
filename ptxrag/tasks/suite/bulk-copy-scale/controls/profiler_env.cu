// Control (adversarial, class 4, instruction only when profiled): the reference's bulk-copy kernel runs only
// when the process looks profiled (CUDA_INJECTION64_PATH, NV_COMPUTE_PROFILER* and similar variables, or the
// Nsight injection library in /proc/self/maps); otherwise a plain float4 kernel does the same work. Both paths
// are correct, so correctness passes, and the ncu launch sees the bulk copy executed. The mutant with the bulk
// copy removed stays correct in the unprofiled worker: the mutation stage must fail it.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

// true when an Nsight tool is attached: its injection variables are in the environment, or its injection
// library is mapped into the process
static bool under_profiler() {
  if (getenv("CUDA_INJECTION64_PATH")) return true;
  static const char* prefixes[] = {"NV_COMPUTE_PROFILER", "NV_TPS", "NSIGHT", "NV_NSIGHT", "NCU_"};
  for (char** e = environ; e && *e; ++e)
    for (const char* p : prefixes)
      if (strncmp(*e, p, strlen(p)) == 0) return true;
  const char* pre = getenv("LD_PRELOAD");
  if (pre && (strstr(pre, "Injection") || strstr(pre, "nsight"))) return true;
  bool found = false;
  if (FILE* f = fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (!found && fgets(line, sizeof line, f))
      found = strstr(line, "InterceptorInjection") || strstr(line, "nsight-compute") || strstr(line, "libcuda-injection");
    fclose(f);
  }
  return found;
}

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
    ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&bars[s]), phase[s]);
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

// the path taken when nobody is profiling: plain 16-byte loads and stores, no bulk copy, no mbarrier
__global__ void scale_plain(const float4* __restrict__ x, float4* __restrict__ y, long long n4, float alpha) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    float4 v = __ldg(x + i);
    v.x *= alpha; v.y *= alpha; v.z *= alpha; v.w *= alpha;
    y[i] = v;
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
  static const bool profiled = under_profiler();
  if (n_tiles > 0 && !profiled) {
    scale_plain<<<sms * 8, 256, 0, a->stream>>>((const float4*)x.data, (float4*)y.data, n_tiles * (TILE / 4), alpha);
  } else if (n_tiles > 0) {
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
