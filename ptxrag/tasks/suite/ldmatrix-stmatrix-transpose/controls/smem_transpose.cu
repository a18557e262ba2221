// Control: the classic shared-memory transpose (32 x 33 padded tile, scalar loads and stores). Correct, but
// neither ldmatrix nor stmatrix is in the binary.
#include "ptxrag_abi.h"
#include <cstdint>

__global__ void transpose(const uint16_t* __restrict__ x, uint16_t* __restrict__ y, int rows, int cols) {
  __shared__ uint16_t tile[32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int r = blockIdx.y * 32 + j;
    if (r < rows && c < cols) tile[j][threadIdx.x] = x[(size_t)r * cols + c];
  }
  __syncthreads();
  const int r = blockIdx.y * 32 + threadIdx.x;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int cc = blockIdx.x * 32 + j;
    if (cc < cols && r < rows) y[(size_t)cc * rows + r] = tile[threadIdx.x][j];
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  const long long rows = a->inputs[0].shape[0], cols = a->inputs[0].shape[1];
  dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + 31) / 32));
  transpose<<<grid, dim3(32, 8), 0, a->stream>>>((const uint16_t*)a->inputs[0].data, (uint16_t*)a->outputs[0].data,
                                                 (int)rows, (int)cols);
  return (int)cudaGetLastError();
}
