// Unit kernel: one warp per row of 32 int32; three redux.sync reductions; the elect.sync leader stores them.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

__global__ void __launch_bounds__(256) row_stats(const int* __restrict__ x, int* __restrict__ y_sum,
                                                 int* __restrict__ y_max, int* __restrict__ y_or, long long rows) {
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {  // warp-uniform
    const int v = x[r * 32 + threadIdx.x % 32];
    const int s = ptxrag::redux_add_s32(v);
    const int m = ptxrag::redux_max_s32(v);
    const uint32_t o = ptxrag::redux_or_b32((uint32_t)v);
    if (ptxrag::elect_sync()) {
      y_sum[r] = s;
      y_max[r] = m;
      y_or[r] = (int)o;
    }
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 3) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  if (x.dtype != PTXRAG_I32 || x.ndim != 2 || x.shape[1] != 32 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0];
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long blocks = (rows + 7) / 8;
  if (blocks > (long long)sms * 16) blocks = (long long)sms * 16;
  if (blocks < 1) return 0;
  row_stats<<<(int)blocks, 256, 0, a->stream>>>((const int*)x.data, (int*)a->outputs[0].data, (int*)a->outputs[1].data,
                                                (int*)a->outputs[2].data, rows);
  return (int)cudaGetLastError();
}
