// ptxrag_sm90/tma.cuh: tensor copies through the Tensor Memory Accelerator (PTX ISA 9.7.9.27.1) and host helpers
// that encode the CUtensorMap they need (tensor-map concepts: PTX ISA 5.5).
//
// Device side: the CUtensorMap is a kernel parameter declared `const __grid_constant__ CUtensorMap map`; pass
// its address (&map) to these wrappers. Coordinates are ELEMENT indices, innermost dimension first (c0 = column
// of a row-major matrix). Boxes that reach past the tensor edge are clipped on stores and zero-filled on loads
// (5.5.3.3). Loads complete on an mbarrier (arrive_expect_tx with the FULL box bytes, even for clipped boxes);
// stores/reductions complete through bulk async-groups (bulk_commit_group / bulk_wait_group).
// Host side: make_tensor_map_2d()/make_tensor_map() validate the arguments, reach cuTensorMapEncodeTiled with
// ptxrag_get_driver_fn() (from ptxrag_abi.h; no -lcuda) and return 0 or a PTXRAG_ERR_* code.
// Contract: corpus/contracts/tma.md.
#ifndef PTXRAG_SM90_TMA_CUH
#define PTXRAG_SM90_TMA_CUH

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "ptxrag_abi.h"

namespace ptxrag {

// ---- loads: cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes (9.7.9.27.1.2) ----
// Copy the box at coordinates (c0, c1, ...) into shared memory at `dst_smem` (128-byte aligned; 1024-byte aligned
// for the 128B swizzle so the pattern matches wgmma descriptors with base offset 0) and signal complete_tx on
// the mbarrier `bar`.
__device__ __forceinline__ void tma_load_1d(uint32_t dst_smem, const CUtensorMap* map, int32_t c0, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];" ::"r"(
          dst_smem),
      "l"(map), "r"(c0), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst_smem, const CUtensorMap* map, int32_t c0, int32_t c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(dst_smem),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tma_load_3d(uint32_t dst_smem, const CUtensorMap* map, int32_t c0, int32_t c1,
                                            int32_t c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];" ::"r"(dst_smem),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// Multicast load (9.7.9.27.1.2, .multicast::cluster): one CTA issues; the box lands at the same shared offset
// and signals the mbarrier at the same offset in every CTA whose bit is set in `cta_mask` (bit i = cluster rank
// i). EVERY receiving CTA must have armed its own barrier with arrive_expect_tx(box bytes) for that phase.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst_smem, const CUtensorMap* map, int32_t c0,
                                                      int32_t c1, uint32_t bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst_smem),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
}

// ---- stores and reductions: cp{.reduce}.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group ----------------
// (9.7.9.27.1.2, 9.7.9.27.1.3). Before issuing: the threads that wrote `src_smem` execute
// fence_proxy_async_shared_cta(), then the CTA synchronises. After: bulk_commit_group(); then
// bulk_wait_group_read<0>() before reusing `src_smem`, bulk_wait_group<0>() before the kernel relies on the
// global writes.
__device__ __forceinline__ void tma_store_1d(const CUtensorMap* map, int32_t c0, uint32_t src_smem) {
  asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%1}], [%2];" ::"l"(map), "r"(c0),
               "r"(src_smem)
               : "memory");
}

__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, int32_t c0, int32_t c1, uint32_t src_smem) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(src_smem)
               : "memory");
}

__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, int32_t c0, int32_t c1, int32_t c2,
                                             uint32_t src_smem) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(src_smem)
               : "memory");
}

// Element-wise global[box] += smem (add; also .min/.max/.and/.or/... exist in PTX), atomic per element.
__device__ __forceinline__ void tma_reduce_add_2d(const CUtensorMap* map, int32_t c0, int32_t c1, uint32_t src_smem) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   map),
               "r"(c0), "r"(c1), "r"(src_smem)
               : "memory");
}

// ---- prefetch ------------------------------------------------------------------------------------------------
// cp.async.bulk.prefetch.tensor.2d.L2.global.tile (9.7.9.27.1.4): bring the box into L2 (a hint; no completion).
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap* map, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(map), "r"(c0), "r"(c1)
               : "memory");
}

// prefetch.tensormap (9.7.9.15): fetch the tensor-map descriptor itself into the cache ahead of its first use.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// ---- host: building tensor maps ------------------------------------------------------------------------------

// CUtensorMapDataType for a ptxrag_dtype; returns false for dtypes TMA cannot describe. fp8 maps as UINT8
// (TMA only moves bytes; the kernel interprets them).
__host__ inline bool tensor_map_dtype(int32_t dtype, CUtensorMapDataType* out) {
  switch (dtype) {
    case PTXRAG_F32: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; return true;
    case PTXRAG_F16: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; return true;
    case PTXRAG_BF16: *out = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; return true;
    case PTXRAG_F64: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; return true;
    case PTXRAG_I32: *out = CU_TENSOR_MAP_DATA_TYPE_INT32; return true;
    case PTXRAG_U32: *out = CU_TENSOR_MAP_DATA_TYPE_UINT32; return true;
    case PTXRAG_I64: *out = CU_TENSOR_MAP_DATA_TYPE_INT64; return true;
    case PTXRAG_I16: *out = CU_TENSOR_MAP_DATA_TYPE_UINT16; return true;
    case PTXRAG_I8: case PTXRAG_U8: case PTXRAG_FP8_E4M3: case PTXRAG_FP8_E5M2:
      *out = CU_TENSOR_MAP_DATA_TYPE_UINT8; return true;
    default: return false;
  }
}

// Bytes spanned by a swizzle mode (the largest allowed inner box extent in bytes); 0 for no swizzle.
__host__ __device__ inline uint32_t swizzle_span_bytes(CUtensorMapSwizzle s) {
  switch (s) {
    case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
    case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
    default: return 128;
  }
}

// cuTensorMapEncodeTiled, resolved once through the runtime (no -lcuda). NULL if the driver lacks it.
__host__ inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn =
      reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptxrag_get_driver_fn("cuTensorMapEncodeTiled"));
  return fn;
}

// Encode a tiled tensor map of `rank` (1..5) dimensions, innermost first.
//   dims[i]          elements along dimension i
//   strides_bytes[i] byte stride of dimension i+1 (rank-1 entries; multiples of 16, below 2^40)
//   box[i]           box extent along dimension i (1..256; box[0]*element size a multiple of 16 bytes and, when
//                    swizzled, at most the swizzle span: 32/64/128 bytes)
// Out-of-bounds elements of a load are filled with zeros. Returns 0, PTXRAG_ERR_TENSOR_MAP when an argument
// breaks a rule above or the driver rejects it, or PTXRAG_ERR_DRIVER_ENTRY when the driver entry is missing.
__host__ inline int make_tensor_map(CUtensorMap* map, const void* base, int32_t dtype, uint32_t rank,
                                    const uint64_t* dims, const uint64_t* strides_bytes, const uint32_t* box,
                                    CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B) {
  CUtensorMapDataType type;
  const size_t esize = ptxrag_dtype_size(dtype);
  if (rank < 1 || rank > 5 || !tensor_map_dtype(dtype, &type)) return PTXRAG_ERR_TENSOR_MAP;
  if ((reinterpret_cast<uintptr_t>(base) & 15u) != 0) return PTXRAG_ERR_TENSOR_MAP;
  if ((reinterpret_cast<uintptr_t>(map) & 63u) != 0) return PTXRAG_ERR_TENSOR_MAP;
  cuuint64_t g_dims[5], g_strides[4];
  cuuint32_t g_box[5], e_strides[5];
  for (uint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32) || box[i] == 0 || box[i] > 256) return PTXRAG_ERR_TENSOR_MAP;
    g_dims[i] = dims[i];
    g_box[i] = box[i];
    e_strides[i] = 1;
    if (i + 1 < rank) {
      if (strides_bytes[i] % 16 != 0 || strides_bytes[i] >= (1ull << 40)) return PTXRAG_ERR_TENSOR_MAP;
      g_strides[i] = strides_bytes[i];
    }
  }
  const uint64_t inner_bytes = static_cast<uint64_t>(box[0]) * esize;
  if (inner_bytes % 16 != 0) return PTXRAG_ERR_TENSOR_MAP;
  const uint32_t span = swizzle_span_bytes(swizzle);
  if (span != 0 && inner_bytes > span) return PTXRAG_ERR_TENSOR_MAP;
  PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return PTXRAG_ERR_DRIVER_ENTRY;
  const CUresult r = encode(map, type, rank, const_cast<void*>(base), g_dims, g_strides, g_box, e_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : PTXRAG_ERR_TENSOR_MAP;
}

// Row-major matrix [rows, cols] with row pitch `row_stride_elems` (>= cols), box of box_rows x box_cols.
__host__ inline int make_tensor_map_2d(CUtensorMap* map, const void* base, int32_t dtype, uint64_t rows,
                                       uint64_t cols, uint64_t row_stride_elems, uint32_t box_rows,
                                       uint32_t box_cols, CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {row_stride_elems * ptxrag_dtype_size(dtype)};
  const uint32_t box[2] = {box_cols, box_rows};
  return make_tensor_map(map, base, dtype, 2, dims, strides, box, swizzle);
}

}  // namespace ptxrag

#endif  // PTXRAG_SM90_TMA_CUH
