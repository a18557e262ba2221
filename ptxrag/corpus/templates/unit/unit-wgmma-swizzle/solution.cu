// Unit kernel: the same 64x64 wgmma tile GEMM four times, with the operand tiles swizzled 128B / 64B / 32B / not
// at all. A k block of 64 bf16 is split into 64 / (span / 2) TMA boxes of one swizzle span each (16 bytes, i.e.
// 8 elements, without swizzle), placed one after another in shared memory.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int BM = 64, BN = 64, BK = 64;

template <int SPAN>  // swizzle span in bytes: 128, 64, 32, or 16 for "no swizzle"
struct Mode {
  static constexpr int BOX_K = SPAN / 2;                  // elements of one box along K
  static constexpr int BOXES = BK / BOX_K;                // boxes per k block
  static constexpr int BOX_BYTES = 64 * SPAN;             // a box of 64 rows (BM == BN == 64)
  static constexpr ptxrag::SmemSwizzle SW = SPAN == 128 ? ptxrag::SmemSwizzle::B128
                                            : SPAN == 64 ? ptxrag::SmemSwizzle::B64
                                            : SPAN == 32 ? ptxrag::SmemSwizzle::B32
                                                         : ptxrag::SmemSwizzle::None;
  // Descriptor of k16 step kk of a tile starting at `base`.
  __device__ static uint64_t desc(uint32_t base, int kk) {
    if constexpr (SPAN == 16) {
      // K-major, no swizzle: core matrix = 8 rows x 16 bytes (one box holds 64 rows of them, 128 bytes per
      // 8-row group). The k16 step spans boxes 2kk and 2kk+1: LBO = one box, SBO = 128.
      return ptxrag::make_smem_desc(base + 2 * kk * BOX_BYTES, BOX_BYTES, 128, SW);
    } else {
      const int byte_k = kk * 32;  // 16 bf16
      return ptxrag::make_smem_desc(base + (byte_k / SPAN) * BOX_BYTES + byte_k % SPAN, 16, 8 * SPAN, SW);
    }
  }
};

template <int SPAN>
__global__ void __launch_bounds__(128) gemm_swz(const __grid_constant__ CUtensorMap amap,
                                                const __grid_constant__ CUtensorMap bmap, float* __restrict__ c, int m,
                                                int n, int k) {
  using M = Mode<SPAN>;
  __shared__ __align__(1024) uint16_t As[BM * BK];  // bf16 bits; the boxes of one k block, one after another
  __shared__ __align__(1024) uint16_t Bs[BN * BK];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar), as = ptxrag::smem_u32(As), bs = ptxrag::smem_u32(Bs);
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (threadIdx.x == 0) ptxrag::mbarrier_init(b, 1);
  __syncthreads();
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  uint32_t phase = 0;
  for (int kb = 0; kb < k; kb += BK) {
    if (threadIdx.x == 0) {
      ptxrag::mbarrier_arrive_expect_tx(b, (BM + BN) * BK * 2);
#pragma unroll
      for (int j = 0; j < M::BOXES; ++j) {
        ptxrag::tma_load_2d(as + j * M::BOX_BYTES, &amap, kb + j * M::BOX_K, m0, b);
        ptxrag::tma_load_2d(bs + j * M::BOX_BYTES, &bmap, kb + j * M::BOX_K, n0, b);
      }
    }
    ptxrag::mbarrier_wait_parity(b, phase);
    phase ^= 1u;
    ptxrag::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) ptxrag::wgmma_bf16<BN>(acc, M::desc(as, kk), M::desc(bs, kk), 1);
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();
    __syncthreads();
  }
  const int t = threadIdx.x;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const int r = m0 + ptxrag::wgmma_acc_row(t, i), col = n0 + ptxrag::wgmma_acc_col(t, i);
    if (r < m && col < n) c[(long long)r * n + col] = acc[i];
  }
}

template <int SPAN>
static int run(const ptxrag_args* a, int m, int n, int k, float* c) {
  const CUtensorMapSwizzle sw = SPAN == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                : SPAN == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                : SPAN == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                             : CU_TENSOR_MAP_SWIZZLE_NONE;
  alignas(64) CUtensorMap amap, bmap;
  int rc = ptxrag::make_tensor_map_2d(&amap, a->inputs[0].data, PTXRAG_BF16, m, k, k, BM, Mode<SPAN>::BOX_K, sw);
  if (rc == 0) rc = ptxrag::make_tensor_map_2d(&bmap, a->inputs[1].data, PTXRAG_BF16, n, k, k, BN, Mode<SPAN>::BOX_K, sw);
  if (rc != 0) return rc;
  const dim3 grid((unsigned)((n + BN - 1) / BN), (unsigned)((m + BM - 1) / BM));
  gemm_swz<SPAN><<<grid, 128, 0, a->stream>>>(amap, bmap, c, m, n, k);
  return (int)cudaGetLastError();
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 4) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& A = a->inputs[0];
  const ptxrag_tensor& B = a->inputs[1];
  if (A.dtype != PTXRAG_BF16 || B.dtype != PTXRAG_BF16 || A.ndim != 2 || B.ndim != 2 || A.shape[1] != B.shape[1] ||
      !ptxrag_is_contiguous(&A) || !ptxrag_is_contiguous(&B))
    return PTXRAG_ERR_BAD_ARGS;
  const int m = (int)A.shape[0], n = (int)B.shape[0], k = (int)A.shape[1];
  if (k % 8 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  int rc = run<128>(a, m, n, k, (float*)a->outputs[0].data);
  if (rc == 0) rc = run<64>(a, m, n, k, (float*)a->outputs[1].data);
  if (rc == 0) rc = run<32>(a, m, n, k, (float*)a->outputs[2].data);
  if (rc == 0) rc = run<16>(a, m, n, k, (float*)a->outputs[3].data);
  return rc;
}
