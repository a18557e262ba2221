// Control: every required instruction is in the kernel, but on a path guarded by `rows < 0`, which is never
// true at run time. The live path computes the right answer with plain float4 loads and stores.
#include "ptxrag_abi.h"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdint>

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void bias_scale(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap ymap,
                           const float4* __restrict__ x, const float* __restrict__ b, float4* __restrict__ y,
                           long long rows, int cols, float alpha) {
  __shared__ __align__(128) float tile[32 * 128];
  __shared__ __align__(8) uint64_t bar;
  if (rows < 0) {  // dead: rows is a size
    const uint32_t bb = smem_u32(&bar), t = smem_u32(tile);
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bb));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bb), "r"(16384) : "memory");
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
          :: "r"(t), "l"(&xmap), "r"(0), "r"((int)blockIdx.x * 32), "r"(bb) : "memory");
    }
    __syncthreads();
    asm volatile("{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W_%=;\n}"
                 :: "r"(bb) : "memory");
    for (int i = threadIdx.x; i < 32 * 128; i += blockDim.x) tile[i] = alpha * tile[i] + b[i % 128];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                   :: "l"(&ymap), "r"(0), "r"((int)blockIdx.x * 32), "r"(t) : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
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
  auto encode = (PFN_cuTensorMapEncodeTiled_v12000)ptxrag_get_driver_fn("cuTensorMapEncodeTiled");
  if (!encode) return PTXRAG_ERR_DRIVER_ENTRY;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {cols * 4};
  cuuint32_t box[2] = {128, 32};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, estr,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : PTXRAG_ERR_TENSOR_MAP;
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
