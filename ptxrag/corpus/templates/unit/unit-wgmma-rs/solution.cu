// Unit kernel: one warpgroup computes a 64x128 tile of c = a @ b with A in registers and B N-major in shared
// memory. Per 64-row k block of b, one thread loads two 64 x 64 boxes (columns n0..n0+63 and +64..+127) by TMA
// with the 128B swizzle onto one mbarrier; meanwhile every thread loads its A fragments of the block's four k16
// steps from global memory. The warpgroup then issues four wgmma m64n128k16 with A from registers
// (wgmma_bf16_rs<128, 1>), the B descriptor N-major: LBO = one box (8192 bytes), SBO = 8 k rows (1024 bytes),
// start advanced 16 rows (2048 bytes) per k16 step.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

#include <cuda_bf16.h>

constexpr int BM = 64, BN = 128, BK = 64;
constexpr uint32_t BOX_BYTES = BK * 64 * 2;  // 64 k rows x 64 bf16 columns

// bf16 pair a[r][c], a[r][c + 1] as one 32-bit register (lower column in the low half), zero outside the matrix
__device__ __forceinline__ uint32_t load_pair(const __nv_bfloat16* a, int m, int k, int r, int c) {
  if (r >= m || c >= k) return 0u;  // k is even, so c + 1 < k whenever c < k
  return *reinterpret_cast<const uint32_t*>(a + (long long)r * k + c);
}

__global__ void __launch_bounds__(128) gemm_tile_rs(const __nv_bfloat16* __restrict__ a,
                                                    const __grid_constant__ CUtensorMap bmap, float* __restrict__ c,
                                                    int m, int n, int k) {
  __shared__ __align__(1024) uint16_t Bs[2 * BK * 64];  // two boxes, 16 KiB, 1024-aligned
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar), bs = ptxrag::smem_u32(Bs);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int t = threadIdx.x, row = m0 + (t / 32) * 16 + (t % 32) / 4, col = 2 * (t % 4);
  if (t == 0) ptxrag::mbarrier_init(b, 1);
  __syncthreads();
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  uint32_t phase = 0;
  for (int kb = 0; kb < k; kb += BK) {
    if (t == 0) {
      ptxrag::mbarrier_arrive_expect_tx(b, 2 * BOX_BYTES);  // full boxes, zero-filled past the edges
      ptxrag::tma_load_2d(bs, &bmap, n0, kb, b);
      ptxrag::tma_load_2d(bs + BOX_BYTES, &bmap, n0 + 64, kb, b);
    }
    uint32_t af[BK / 16][4];
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const int c0 = kb + 16 * kk + col;
      af[kk][0] = load_pair(a, m, k, row, c0);
      af[kk][1] = load_pair(a, m, k, row + 8, c0);
      af[kk][2] = load_pair(a, m, k, row, c0 + 8);
      af[kk][3] = load_pair(a, m, k, row + 8, c0 + 8);
    }
    ptxrag::mbarrier_wait_parity(b, phase);
    phase ^= 1u;
    ptxrag::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const uint64_t db = ptxrag::make_smem_desc(bs + kk * 2048, BOX_BYTES, 1024, ptxrag::SmemSwizzle::B128);
      ptxrag::wgmma_bf16_rs<BN, 1>(acc, af[kk], db, 1);
    }
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();
    __syncthreads();  // every warp's wgmma has finished reading Bs before the next TMA overwrites it
  }
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const int r = m0 + ptxrag::wgmma_acc_row(t, i), cc = n0 + ptxrag::wgmma_acc_col(t, i);
    if (r < m && cc < n) c[(long long)r * n + cc] = acc[i];
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& A = a->inputs[0];
  const ptxrag_tensor& B = a->inputs[1];
  if (A.dtype != PTXRAG_BF16 || B.dtype != PTXRAG_BF16 || A.ndim != 2 || B.ndim != 2 || A.shape[1] != B.shape[0] ||
      !ptxrag_is_contiguous(&A) || !ptxrag_is_contiguous(&B))
    return PTXRAG_ERR_BAD_ARGS;
  const int m = (int)A.shape[0], k = (int)A.shape[1], n = (int)B.shape[1];
  if (k % 8 != 0 || n % 8 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;  // 16-byte row pitches, aligned A pairs
  alignas(64) CUtensorMap bmap;
  // b [k, n] row-major: boxes of 64 columns x 64 rows (128 bytes per row: one swizzle span)
  int rc = ptxrag::make_tensor_map_2d(&bmap, B.data, PTXRAG_BF16, k, n, n, BK, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  if (rc != 0) return rc;
  const dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + BM - 1) / BM));
  gemm_tile_rs<<<grid, 128, 0, a->stream>>>((const __nv_bfloat16*)A.data, bmap, (float*)a->outputs[0].data, m, n, k);
  return (int)cudaGetLastError();
}
