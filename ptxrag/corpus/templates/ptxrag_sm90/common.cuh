// ptxrag_sm90/common.cuh: address conversion and thread ids used by every other family.
#ifndef PTXRAG_SM90_COMMON_CUH
#define PTXRAG_SM90_COMMON_CUH

#include <cstdint>

namespace ptxrag {

// 32-bit shared-window address of a pointer to __shared__ memory (cvta.to.shared; PTX ISA 9.7.9.20).
// Most PTX shared-memory operands below take this form.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Lane id within the warp (%laneid; PTX ISA 10.3).
__device__ __forceinline__ uint32_t lane_id() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}

// Warp index within the CTA, computed from threadIdx (uniform across the warp, unlike %warpid). Call it from
// converged, full warps (the block size a multiple of 32): it broadcasts lane 0's value with a full-mask shuffle.
__device__ __forceinline__ uint32_t warp_idx() {
  const uint32_t t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return __shfl_sync(0xffffffffu, t / 32u, 0);
}

// Warpgroup index (4 consecutive warps, 128 threads; PTX ISA 9.7.15.1) within the CTA.
__device__ __forceinline__ uint32_t warpgroup_idx() { return warp_idx() / 4u; }

}  // namespace ptxrag

#endif  // PTXRAG_SM90_COMMON_CUH
