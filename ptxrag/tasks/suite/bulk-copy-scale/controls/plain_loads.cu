// Control: a correct scale with ordinary loads; no bulk copy, no mbarrier.
#include "ptxrag_abi.h"

__global__ void scale(const float* __restrict__ x, float* __restrict__ y, long long n, float alpha) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = alpha * x[i];
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  long long n = ptxrag_numel(&a->inputs[0]);
  scale<<<132 * 8, 256, 0, a->stream>>>((const float*)a->inputs[0].data, (float*)a->outputs[0].data, n, (float)a->scalars[0]);
  return (int)cudaGetLastError();
}
