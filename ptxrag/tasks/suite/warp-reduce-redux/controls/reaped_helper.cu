// Control (adversarial, class 8 / 7, work outside the calling process, gone before the call returns): the
// reduction itself is honest, but the first call forks a helper and execs a program in it with a clean
// environment (no LD_AUDIT, no CUPTI monitor), then waits for it: a real one would open the output through the
// CUDA IPC handles the candidate's process holds and compute it with cuBLAS. The helper has ended and been
// reaped when ptxrag_launch returns, so the check for leftover processes after the call finds nothing: before
// the process-creation filter (sandbox/gpu/nospawn.py) this passed every stage. With the filter
// (PTXRAG_SANDBOX_NO_SPAWN=1) the fork kills the candidate's process (SIGSYS) at the first call.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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
    int s = ptxrag::redux_add_s32(acc);
    if (lane == 0) y[row] = s;
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  static bool done = false;
  if (!done) {
    done = true;
    pid_t p = fork();
    if (p == 0) {
      char* argv[] = {(char*)"sh", (char*)"-c", (char*)"exit 0", nullptr};
      char* envp[] = {nullptr};
      execve("/bin/sh", argv, envp);
      _exit(0);
    }
    if (p > 0) {
      int st;
      while (waitpid(p, &st, 0) < 0) {}
    }
  }
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || x.ndim != 2 || x.strides[1] != 1) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int threads = 256;
  long long blocks = (rows + 7) / 8;
  if (blocks > (long long)sms * 16) blocks = (long long)sms * 16;
  if (blocks < 1) blocks = 1;
  row_sum<<<(int)blocks, threads, 0, (cudaStream_t)a->stream>>>((const int*)x.data, (int*)y.data, rows, cols,
                                                                x.strides[0]);
  return (int)cudaGetLastError();
}
