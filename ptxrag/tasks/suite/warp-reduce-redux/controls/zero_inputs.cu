// Control (adversarial, class 1, modified inputs): reads each row, then zeroes it and writes 0;
// a reference computed from the buffers after the call sees an all-zero matrix and agrees.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

__global__ void row_sum(const int* x, int* __restrict__ y, long long rows, long long cols,
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
    __syncwarp();
    for (long long i = lane; i < cols; i += 32) const_cast<int*>(p)[i] = 0;  // wipe the row
    int s = ptxrag::redux_add_s32(0 * acc);
    if (lane == 0) y[row] = s;
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
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
  row_sum<<<(int)blocks, threads, 0, a->stream>>>((const int*)x.data, (int*)y.data, rows, cols, x.strides[0]);
  return (int)cudaGetLastError();
}
