// Reference solution: CTA (strip, chunk) sums rows [chunk * rows_per, ...) of a 1024-column strip, one float4
// column group per thread with four independent loads in flight; the 4 KB of partial sums go to shared memory
// and thread 0 adds them to y with one cp.reduce.async.bulk (.add.f32). y is zeroed first on the stream.
// The fence and bulk-reduction PTX comes from the ptxrag_sm90.cuh template header (namespace ptxrag).
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int THREADS = 256;
constexpr int STRIP = THREADS * 4;  // columns per CTA

__device__ __forceinline__ void add4(float4& a, const float4& b) {
  a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
}

__global__ void __launch_bounds__(THREADS) colsum(const float* __restrict__ x, float* __restrict__ y, long long rows,
                                                  long long cols, long long rows_per) {
  __shared__ __align__(128) float4 part[THREADS];
  const long long c0 = (long long)blockIdx.x * STRIP;
  const long long c = c0 + 4 * threadIdx.x;
  const long long r0 = (long long)blockIdx.y * rows_per;
  const long long r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
  float4 acc[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
  if (c < cols) {
    const float* p = x + r0 * cols + c;
    long long r = r0;
    for (; r + 4 <= r1; r += 4, p += 4 * cols) {
      float4 v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = __ldg(reinterpret_cast<const float4*>(p + j * cols));
#pragma unroll
      for (int j = 0; j < 4; ++j) add4(acc[j], v[j]);
    }
    for (; r < r1; ++r, p += cols) add4(acc[0], __ldg(reinterpret_cast<const float4*>(p)));
  }
  add4(acc[0], acc[1]);
  add4(acc[2], acc[3]);
  add4(acc[0], acc[2]);
  part[threadIdx.x] = acc[0];
  ptxrag::fence_proxy_async_shared_cta();  // the bulk engine reads what we just wrote
  __syncthreads();
  if (threadIdx.x == 0) {
    const long long width = cols - c0 < STRIP ? cols - c0 : STRIP;  // a multiple of 4 floats = 16 bytes
    ptxrag::bulk_reduce_add_f32(y + c0, ptxrag::smem_u32(part), (uint32_t)(width * 4));
    ptxrag::bulk_commit_group();
    ptxrag::bulk_wait_group_read<0>();  // shared memory must outlive the read
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || y.dtype != PTXRAG_F32 || x.ndim != 2 || !ptxrag_is_contiguous(&x) ||
      !ptxrag_is_contiguous(&y))
    return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  if (cols % 4 != 0 || y.shape[0] != cols) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  cudaError_t e = cudaMemsetAsync(y.data, 0, (size_t)cols * 4, a->stream);
  if (e != cudaSuccess) return (int)e;
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const long long strips = (cols + STRIP - 1) / STRIP;
  long long chunks = (long long)sms * 8 / strips;  // about 8 CTAs per SM in all
  if (chunks < 1) chunks = 1;
  if (chunks > (rows + 7) / 8) chunks = (rows + 7) / 8;  // at least 8 rows per CTA
  if (chunks > 65535) chunks = 65535;
  const long long rows_per = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per - 1) / rows_per;
  colsum<<<dim3((unsigned)strips, (unsigned)chunks), THREADS, 0, a->stream>>>((const float*)x.data, (float*)y.data,
                                                                              rows, cols, rows_per);
  return (int)cudaGetLastError();
}
