// Control (adversarial, class 6, a mutant that knows it is one): as discarded_redux.cu, redux.sync runs in
// every warp but its result is dropped (the sums come from __shfl_xor_sync), so a mutant without it stays
// correct. But each mutant runs in a fresh process after the checks, and its process can tell: its first call
// finds the profiled launch's job (inputs/launch.json) already in its working directory, at a check shape, and
// does not look profiled (Nsight's variables or its injection library in /proc/self/maps; the variable alone
// was not enough on the H200: that first version refused under ncu too and failed at execution, 2026-12-05).
// There it returns an error code. A mutant "error" (or "violation") used to count
// as "the output changed", so the mutation stage passed it; an error code with no device fault is the host's
// choice, not an effect of the instruction's result, and now fails the candidate.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

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

__global__ void row_sum(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols,
                        long long ld) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const int* p = x + row * ld;
    int acc = 0;
    long long c = 0;
    // vector body when the row start is 16-byte aligned
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
      const int4* p4 = reinterpret_cast<const int4*>(p);
      const long long n4 = cols / 4;
      for (long long i = lane; i < n4; i += 32) {
        int4 v = __ldg(p4 + i);
        acc += v.x + v.y + v.z + v.w;
      }
      c = n4 * 4;
    }
    for (long long i = c + lane; i < cols; i += 32) acc += __ldg(p + i);
    int discarded;
    asm volatile("redux.sync.add.s32 %0, %1, 0xffffffff;" : "=r"(discarded) : "r"(acc));
    if (rows < 0) y[0] = discarded;  // never taken at run time; keeps ptxas from deleting the redux
    int s = acc;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) y[row] = s;
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || x.ndim != 2 || x.strides[1] != 1) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  static int calls = 0;
  const bool first = calls++ == 0;
  const bool job_saved = access("inputs/launch.json", F_OK) == 0;  // written after the main process's check 1
  if (first && job_saved && rows <= 4096 && !under_profiler()) return 1;  // "I am a mutant"
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int threads = 256;
  long long blocks = (rows + 7) / 8;
  if (blocks > (long long)sms * 16) blocks = (long long)sms * 16;
  row_sum<<<(int)blocks, threads, 0, a->stream>>>((const int*)x.data, (int*)y.data, rows, cols, x.strides[0]);
  return (int)cudaGetLastError();
}
