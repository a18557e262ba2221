// Control (adversarial, class 2, skipped work): remembers in device globals the input pointer and the sums
// it wrote; a later call on the same buffers skips every row whose output still equals its last sum.
// After a poison the rows are recomputed, so a single checked call is correct; timed repetitions do no work.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

__device__ const int* g_last_x;
__device__ int g_last_y[1 << 20];

__global__ void row_sum(const int* __restrict__ x, int* __restrict__ y, long long rows, long long cols,
                        long long ld) {
  const int lane = threadIdx.x & 31;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < rows; row += warps) {
    const int* p = x + row * ld;
    // skip rows whose output still holds what this kernel wrote last time for the same input buffer
    if (g_last_x == x && row < (1 << 20) && y[row] == g_last_y[row]) continue;
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
    if (lane == 0) {
      y[row] = s;
      if (row < (1 << 20)) g_last_y[row] = s;
    }
  }
}

__global__ void remember(const int* x) { g_last_x = x; }

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
  remember<<<1, 1, 0, a->stream>>>((const int*)x.data);
  return (int)cudaGetLastError();
}
