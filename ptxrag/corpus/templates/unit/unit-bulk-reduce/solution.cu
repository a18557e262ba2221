// Unit kernel: per-CTA partial column sums in shared memory, added into y with cp.reduce.async.bulk .add.f32.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int COLS_PER_CTA = 1024;  // floats of the shared partial (4 KiB)
constexpr int ROWS_PER_CTA = 64;
constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS) col_sums(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                    long long cols) {
  __shared__ __align__(128) float part[COLS_PER_CTA];
  const long long c0 = (long long)blockIdx.x * COLS_PER_CTA;
  const long long r0 = (long long)blockIdx.y * ROWS_PER_CTA;
  const long long r1 = r0 + ROWS_PER_CTA < rows ? r0 + ROWS_PER_CTA : rows;
  const int width = (int)(cols - c0 < COLS_PER_CTA ? cols - c0 : COLS_PER_CTA);
  for (int c = threadIdx.x; c < width; c += THREADS) {
    float acc = 0.f;
    for (long long r = r0; r < r1; ++r) acc += x[r * cols + c0 + c];
    part[c] = acc;
  }
  const int bulk = width & ~3;  // whole 16-byte chunks go through the copy engine
  ptxrag::fence_proxy_async_shared_cta();  // partials written by threads -> read by the bulk reduction
  __syncthreads();
  // the tail is read by other threads than the ones that wrote it: only after the barrier
  for (int c = bulk + threadIdx.x; c < width; c += THREADS) atomicAdd(&y[c0 + c], part[c]);
  if (threadIdx.x == 0 && bulk > 0) {
    ptxrag::bulk_reduce_add_f32(y + c0, ptxrag::smem_u32(part), (uint32_t)bulk * 4);
    ptxrag::bulk_commit_group();
    ptxrag::bulk_wait_group_read<0>();  // shared memory must stay valid until the engine has read it
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || x.ndim != 2 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  // cols * 4 bytes per row: y + c0 stays 16-byte aligned because c0 is a multiple of 1024 floats.
  cudaError_t e = cudaMemsetAsync(y.data, 0, (size_t)cols * 4, a->stream);
  if (e != cudaSuccess) return (int)e;
  const dim3 grid((unsigned)((cols + COLS_PER_CTA - 1) / COLS_PER_CTA), (unsigned)((rows + ROWS_PER_CTA - 1) / ROWS_PER_CTA));
  col_sums<<<grid, THREADS, 0, a->stream>>>((const float*)x.data, (float*)y.data, rows, cols);
  return (int)cudaGetLastError();
}
