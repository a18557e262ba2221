// NEGATIVE CONTROL (must fail correctness): descriptor swizzle (64B) does not match the TMA swizzle (128B).
// Unit kernel: one warpgroup computes a 64x128 tile of c = a @ b.T. Per 64-wide k block, one thread loads the
// a tile (64x64) and the b tile (128x64) with TMA (128B swizzle) onto one mbarrier; the warpgroup then issues
// four m64n128k16 wgmma, advancing both descriptors 32 bytes per k16 step inside the swizzled 128-byte rows.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int BM = 64, BN = 128, BK = 64;

__global__ void __launch_bounds__(128) gemm_tile(const __grid_constant__ CUtensorMap amap,
                                                 const __grid_constant__ CUtensorMap bmap, float* __restrict__ c,
                                                 int m, int n, int k) {
  __shared__ __align__(1024) uint16_t As[BM * BK];  // bf16 bits, 8 KiB, 1024-aligned: swizzle pattern phase 0
  __shared__ __align__(1024) uint16_t Bs[BN * BK];  // bf16 bits, 16 KiB
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (threadIdx.x == 0) ptxrag::mbarrier_init(b, 1);
  __syncthreads();
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  const uint64_t da = ptxrag::make_smem_desc_kmajor(ptxrag::smem_u32(As), ptxrag::SmemSwizzle::B64);  // BUG
  const uint64_t db = ptxrag::make_smem_desc_kmajor(ptxrag::smem_u32(Bs), ptxrag::SmemSwizzle::B64);  // BUG
  uint32_t phase = 0;
  for (int kb = 0; kb < k; kb += BK) {
    if (threadIdx.x == 0) {
      ptxrag::mbarrier_arrive_expect_tx(b, (BM + BN) * BK * 2);  // full boxes, zero-filled past the edges
      ptxrag::tma_load_2d(ptxrag::smem_u32(As), &amap, kb, m0, b);
      ptxrag::tma_load_2d(ptxrag::smem_u32(Bs), &bmap, kb, n0, b);
    }
    ptxrag::mbarrier_wait_parity(b, phase);
    phase ^= 1u;
    ptxrag::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      ptxrag::wgmma_bf16<BN>(acc, ptxrag::smem_desc_advance(da, kk * 32), ptxrag::smem_desc_advance(db, kk * 32), 1);
    }
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();
    __syncthreads();  // every warp's wgmma has finished reading As/Bs before the next TMA overwrites them
  }
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const int r = m0 + ptxrag::wgmma_acc_row(t, i), col = n0 + ptxrag::wgmma_acc_col(t, i);
    if (r < m && col < n) c[(long long)r * n + col] = acc[i];
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& A = a->inputs[0];
  const ptxrag_tensor& B = a->inputs[1];
  if (A.dtype != PTXRAG_BF16 || B.dtype != PTXRAG_BF16 || A.ndim != 2 || B.ndim != 2 || A.shape[1] != B.shape[1] ||
      !ptxrag_is_contiguous(&A) || !ptxrag_is_contiguous(&B))
    return PTXRAG_ERR_BAD_ARGS;
  const int m = (int)A.shape[0], n = (int)B.shape[0], k = (int)A.shape[1];
  if (k % 8 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;  // row pitch must be a multiple of 16 bytes
  alignas(64) CUtensorMap amap, bmap;
  int rc = ptxrag::make_tensor_map_2d(&amap, A.data, PTXRAG_BF16, m, k, k, BM, BK, CU_TENSOR_MAP_SWIZZLE_128B);
  if (rc == 0) rc = ptxrag::make_tensor_map_2d(&bmap, B.data, PTXRAG_BF16, n, k, k, BN, BK, CU_TENSOR_MAP_SWIZZLE_128B);
  if (rc != 0) return rc;
  const dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + BM - 1) / BM));
  gemm_tile<<<grid, 128, 0, a->stream>>>(amap, bmap, (float*)a->outputs[0].data, m, n, k);
  return (int)cudaGetLastError();
}
