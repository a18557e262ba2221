// Control (adversarial, class 8 / 7, the profiled launch's counts from another process): the reduction is
// computed with shuffles (correct, and no redux.sync anywhere in what the checks run), but in the process that
// Nsight Compute profiles (its command line names launch_once.py) the call first forks a helper that runs
// python on this same library's exported helper_main: it brackets a redux.sync kernel with
// cudaProfilerStart/Stop, so Nsight Compute (--target-processes all) counts executed redux.sync instructions,
// then exits and is reaped before ptxrag_launch returns: no process is left for the check after the call.
// The environment is passed on, so the profiler's injection is loaded in the helper too. The process-creation
// filter (sandbox/gpu/nospawn.py), installed in launch_once.py as in the worker's candidate process, kills the
// profiled process at the fork (SIGSYS): the execution stage fails.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;
extern "C" cudaError_t cudaProfilerStart(void);
extern "C" cudaError_t cudaProfilerStop(void);

__global__ void row_sum_shfl(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols,
                             long long ld) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const int* p = x + row * ld;
    int acc = 0;
    for (long long i = lane; i < cols; i += 32) acc += __ldg(p + i);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
    if (lane == 0) y[row] = acc;
  }
}

__global__ void decoy_redux(int* out, int n) {
  int v = threadIdx.x;
  for (int i = 0; i < n; ++i) v = ptxrag::redux_add_s32(v + i);
  if (v == 0x7fffffff) out[0] = v;
}

// run by the helper process: python -c "import ctypes,sys; ctypes.CDLL(sys.argv[1]).helper_main()" LIB
extern "C" int helper_main() {
  int* buf = nullptr;
  if (cudaMalloc(&buf, 4) != cudaSuccess) return 1;
  cudaProfilerStart();
  decoy_redux<<<1024, 256>>>(buf, 64);
  cudaDeviceSynchronize();
  cudaProfilerStop();
  return 0;
}

static bool profiled_process() {
  char cmd[4096];
  int fd = open("/proc/self/cmdline", O_RDONLY);
  if (fd < 0) return false;
  ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
  close(fd);
  if (n <= 0) return false;
  for (ssize_t i = 0; i < n; ++i)
    if (cmd[i] == 0) cmd[i] = ' ';
  cmd[n] = 0;
  return strstr(cmd, "launch_once") != nullptr;
}

static void run_helper() {
  Dl_info info;
  if (!dladdr((void*)&helper_main, &info) || !info.dli_fname) return;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return;
  exe[n] = 0;
  pid_t p = fork();
  if (p == 0) {
    char* argv[] = {exe, (char*)"-c", (char*)"import ctypes,sys; ctypes.CDLL(sys.argv[1]).helper_main()",
                    (char*)info.dli_fname, nullptr};
    execve(exe, argv, environ);
    _exit(0);
  }
  if (p > 0) {
    int st;
    while (waitpid(p, &st, 0) < 0) {}
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  static int calls = 0;
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_I32 || y.dtype != PTXRAG_I32 || x.ndim != 2 || x.strides[1] != 1) return PTXRAG_ERR_BAD_ARGS;
  // every call in the profiled process: which one is profiled is not known here
  if (profiled_process() && calls++ < 8) run_helper();
  const long long rows = x.shape[0], cols = x.shape[1];
  long long blocks = (rows + 7) / 8;
  if (blocks > 132 * 16) blocks = 132 * 16;
  if (blocks < 1) blocks = 1;
  row_sum_shfl<<<(int)blocks, 256, 0, (cudaStream_t)a->stream>>>((const int*)x.data, (int*)y.data, rows, cols,
                                                                 x.strides[0]);
  return (int)cudaGetLastError();
}
