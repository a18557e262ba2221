// Reference solution: bf16 GEMM C = A @ B^T (A [M, K], B [N, K] row-major, fp32 accumulators, bf16 C) on
// clusters of two CTAs stacked along M. Both CTAs of a cluster need the same 256 x 64 B tile per k-block, so
// each CTA loads one half of it (128 x 64) with a multicast TMA load that writes the half into the shared
// memory of both CTAs and signals both CTAs' "full" mbarriers; A tiles are loaded per CTA. A stage may be
// refilled only when the consumers of both CTAs are done with it, so each consumer warp arrives on the
// "empty" mbarrier of its own CTA and, through mapa, of the peer (16 arrivals complete it). Cluster barriers
// make the peer's mbarriers valid before the first multicast and keep both CTAs alive until the last remote
// arrive. Otherwise as the level-2 kernel: 128 x 256 tiles, 4 stages, two consumer warpgroups with
// wgmma.mma_async m64n256k16, one producer warp. The PTX (mbarrier, TMA and multicast TMA, cluster rank,
// barrier and mapa, remote arrive, wgmma, matrix descriptors) and the tensor-map encoding come from the
// ptxrag_sm90.cuh template header.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cstdint>

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, CLUSTER = 2;
constexpr int CONSUMER_WARPS = 8;
constexpr int THREADS = CONSUMER_WARPS * 32 + 32;
constexpr uint32_t A_BYTES = BM * BK * 2;                 // 16 KB
constexpr uint32_t B_BYTES = BN * BK * 2;                 // 32 KB, half of it from each CTA of the cluster
constexpr uint32_t B_HALF_BYTES = B_BYTES / CLUSTER;
constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;

// Shared-memory matrix descriptor for a K-major tile written by TMA with 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1024 bytes apart (stride byte offset 1024), swizzle mode 128B.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return ptxrag::make_smem_desc_kmajor(addr, ptxrag::SmemSwizzle::B128);
}

__global__ void __cluster_dims__(1, CLUSTER, 1) __launch_bounds__(THREADS, 1)
    gemm(const __grid_constant__ CUtensorMap amap, const __grid_constant__ CUtensorMap bmap,
         __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  // the ring sits at the same shared-memory offset in both CTAs (same kernel, same static layout)
  const uint32_t ring = (ptxrag::smem_u32(smem_raw) + 1023) & ~1023u;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t rank = ptxrag::cluster_ctarank();
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int nk = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), CONSUMER_WARPS * CLUSTER);
    }
    ptxrag::fence_mbarrier_init();
  }
  ptxrag::cluster_sync();  // both CTAs' barriers are initialised before any multicast or remote arrive

  if (warp == CONSUMER_WARPS) {  // producer warp
    if (lane == 0) {
      const uint16_t both = (1u << CLUSTER) - 1;
      // a box wholly past the edge of a tensor is replaced by any valid one: those rows/columns are never stored
      const int a_row = m0 < M ? m0 : 0;
      const int b_row = n0 + (int)rank * (BN / CLUSTER) < N ? n0 + (int)rank * (BN / CLUSTER) : 0;
      for (int kb = 0; kb < nk; ++kb) {
        const int s = kb % STAGES;
        if (kb >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (uint32_t)((kb / STAGES - 1) & 1));
        const uint32_t a_dst = ring + s * STAGE_BYTES, bar = ptxrag::smem_u32(&full[s]);
        // this CTA's barrier receives A (16 KB) and both B halves (2 x 16 KB, one from each CTA)
        ptxrag::mbarrier_arrive_expect_tx(bar, STAGE_BYTES);
        ptxrag::tma_load_2d(a_dst, &amap, kb * BK, a_row, bar);
        ptxrag::tma_load_2d_multicast(a_dst + A_BYTES + rank * B_HALF_BYTES, &bmap, kb * BK, b_row, bar, both);
      }
    }
  } else {  // consumer warpgroups
    const int wg = warp / 4;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;
    for (int kb = 0; kb < nk; ++kb) {
      const int s = kb % STAGES;
      ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full[s]), (uint32_t)((kb / STAGES) & 1));
      const uint32_t a_tile = ring + s * STAGE_BYTES + wg * (64 * 128), b_tile = ring + s * STAGE_BYTES + A_BYTES;
      ptxrag::wgmma_fence();
#pragma unroll
      for (int k = 0; k < BK / 16; ++k)
        ptxrag::wgmma_bf16<BN>(d, desc_sw128(a_tile + k * 32), desc_sw128(b_tile + k * 32));
      ptxrag::wgmma_commit_group();
      ptxrag::wgmma_wait_group<1>();
      if (kb > 0 && lane == 0) {
        const int ps = (kb - 1) % STAGES;
        ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[ps]));
        // the same barrier in the other CTA of the cluster
        ptxrag::mbarrier_arrive_cluster(ptxrag::mapa_shared(ptxrag::smem_u32(&empty[ps]), rank ^ 1));
      }
    }
    ptxrag::wgmma_wait_group<0>();
    // fragment of m64nNk16: d[4j + {0,1}] -> row lane/4, cols 8j + 2(lane%4) + {0,1}; d[4j + {2,3}] -> row + 8
    const int row = m0 + wg * 64 + (warp % 4) * 16 + lane / 4;
    const int col = n0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int c = col + 8 * j;
      if (c < N) {
        if (row < M)
          *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + c) = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
        if (row + 8 < M)
          *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(row + 8) * N + c) =
              __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
      }
    }
  }
  __syncwarp();
  ptxrag::cluster_sync();  // the peer may still arrive on our empty barriers until it is done
}

// bf16 [rows, k] row-major (K-major), box_rows x BK boxes, 128-byte swizzle, 256-byte L2 promotion
// (cuTensorMapEncodeTiled through ptxrag_get_driver_fn, inside ptxrag::make_tensor_map)
static int encode_kmajor(CUtensorMap* map, void* base, uint64_t k, uint64_t rows, uint32_t box_rows) {
  const uint64_t dims[2] = {k, rows};
  const uint64_t strides[1] = {k * 2};
  const uint32_t box[2] = {BK, box_rows};
  return ptxrag::make_tensor_map(map, base, PTXRAG_BF16, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& A = a->inputs[0];
  const ptxrag_tensor& B = a->inputs[1];
  const ptxrag_tensor& C = a->outputs[0];
  if (A.dtype != PTXRAG_BF16 || B.dtype != PTXRAG_BF16 || C.dtype != PTXRAG_BF16 || A.ndim != 2 || B.ndim != 2 ||
      C.ndim != 2 || !ptxrag_is_contiguous(&A) || !ptxrag_is_contiguous(&B) || !ptxrag_is_contiguous(&C))
    return PTXRAG_ERR_BAD_ARGS;
  const long long M = A.shape[0], K = A.shape[1], N = B.shape[0];
  if (B.shape[1] != K || C.shape[0] != M || C.shape[1] != N) return PTXRAG_ERR_BAD_ARGS;
  if (K % 8 != 0 || N % 2 != 0 || M > (1 << 30) || N > (1 << 30) || K > (1 << 30)) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap amap, bmap;
  int rc = encode_kmajor(&amap, A.data, K, M, BM);
  if (rc == 0) rc = encode_kmajor(&bmap, B.data, K, N, BN / CLUSTER);
  if (rc != 0) return rc;
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  const long long mt = (M + BM - 1) / BM;
  // grid.y is a whole number of clusters; a CTA whose rows lie past M still loads its B half for its peer
  dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((mt + CLUSTER - 1) / CLUSTER * CLUSTER));
  gemm<<<grid, THREADS, SMEM_BYTES, a->stream>>>(amap, bmap, (__nv_bfloat16*)C.data, (int)M, (int)N, (int)K);
  return (int)cudaGetLastError();
}
