// Control: a correct row sum that never uses redux.sync (shuffles instead).
#include "ptxrag_abi.h"

__global__ void row_sum(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols) {
  const int lane = threadIdx.x & 31;
  long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  int acc = 0;
  for (long long i = lane; i < cols; i += 32) acc += x[row * cols + i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
  if (lane == 0) y[row] = acc;
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  const ptxrag_tensor& x = a->inputs[0];
  long long rows = x.shape[0], cols = x.shape[1];
  row_sum<<<(unsigned)((rows + 7) / 8), 256, 0, a->stream>>>((const int*)x.data, (int*)a->outputs[0].data, rows, cols);
  return (int)cudaGetLastError();
}
