// Control: redux.sync is compiled in but sits under a condition that is never true at run time.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

__global__ void row_sum(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols) {
  const int lane = threadIdx.x & 31;
  long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  int acc = 0;
  for (long long i = lane; i < cols; i += 32) acc += x[row * cols + i];
  int s;
  if (cols < 0) {  // never true: cols is a size
    s = ptxrag::redux_add_s32(acc);
  } else {
    s = acc;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
  }
  if (lane == 0) y[row] = s;
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  const ptxrag_tensor& x = a->inputs[0];
  long long rows = x.shape[0], cols = x.shape[1];
  row_sum<<<(unsigned)((rows + 7) / 8), 256, 0, a->stream>>>((const int*)x.data, (int*)a->outputs[0].data, rows, cols);
  return (int)cudaGetLastError();
}
