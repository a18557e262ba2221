// Control: every required instruction is in the kernel, but on a path guarded by `rows < 0`, which is never
// true at run time. The live path computes the right answer with plain float4 loads and stores. (The dead TMA
// path uses the ptxrag_sm90.cuh wrappers, as the reference does.)
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdint>

__global__ void bias_scale(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap ymap,
                           const float4* __restrict__ x, const float* __restrict__ b, float4* __restrict__ y,
                           long long rows, int cols, float alpha) {
  __shared__ __align__(128) float tile[32 * 128];
  __shared__ __align__(8) uint64_t bar;
  if (rows < 0) {  // dead: rows is a size
    const uint32_t bb = ptxrag::smem_u32(&bar), t = ptxrag::smem_u32(tile);
    if (threadIdx.x == 0) {
      ptxrag::mbarrier_init(bb, 1);
      ptxrag::fence_mbarrier_init();
      ptxrag::mbarrier_arrive_expect_tx(bb, 16384);
      ptxrag::tma_load_2d(t, &xmap, 0, (int)blockIdx.x * 32, bb);
    }
    __syncthreads();
    ptxrag::mbarrier_wait_parity(bb, 0);
    for (int i = threadIdx.x; i < 32 * 128; i += blockDim.x) tile[i] = alpha * tile[i] + b[i % 128];
    ptxrag::fence_proxy_async_shared_cta();
    __syncthreads();
    if (threadIdx.x == 0) {
      ptxrag::tma_store_2d(&ymap, 0, (int)blockIdx.x * 32, t);
      ptxrag::bulk_commit_group();
      ptxrag::bulk_wait_group<0>();
    }
    return;
  }
  const long long n4 = rows * cols / 4;
  const int cols4 = cols / 4;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
    const float4 bb = __ldg(reinterpret_cast<const float4*>(b) + i % cols4);
    float4 v = __ldg(x + i);
    v.x = fmaf(alpha, v.x, bb.x);
    v.y = fmaf(alpha, v.y, bb.y);
    v.z = fmaf(alpha, v.z, bb.z);
    v.w = fmaf(alpha, v.w, bb.w);
    y[i] = v;
  }
}

static int encode_2d(CUtensorMap* map, void* base, uint64_t cols, uint64_t rows) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {cols * 4};
  const uint32_t box[2] = {128, 32};
  return ptxrag::make_tensor_map(map, base, PTXRAG_F32, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  const long long rows = x.shape[0], cols = x.shape[1];
  if (cols % 4 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap xmap, ymap;
  int rc = encode_2d(&xmap, x.data, cols, rows);
  if (rc == 0) rc = encode_2d(&ymap, y.data, cols, rows);
  if (rc != 0) return rc;
  bias_scale<<<132 * 16, 256, 0, a->stream>>>(xmap, ymap, (const float4*)x.data, (const float*)a->inputs[1].data,
                                              (float4*)y.data, rows, (int)cols, (float)a->scalars[0]);
  return (int)cudaGetLastError();
}
