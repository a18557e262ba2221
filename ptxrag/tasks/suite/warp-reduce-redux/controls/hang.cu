// Control: the kernel never ends (it waits for a flag nobody sets). The evaluator must stop it within the
// stage's time limit and keep working.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

__global__ void spin(const int* x, int* y, long long rows) {
  volatile const int* flag = x;
  long long n = 0;
  while (flag[0] != 0x7fffffff) { ++n; }  // inputs are in [-1000, 1000): never true
  const int s = ptxrag::redux_add_s32((int)n);
  if (threadIdx.x == 0 && blockIdx.x < rows) y[blockIdx.x] = s;
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  spin<<<1, 32, 0, a->stream>>>((const int*)a->inputs[0].data, (int*)a->outputs[0].data, a->inputs[0].shape[0]);
  return (int)cudaGetLastError();
}
