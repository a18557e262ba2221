// Reference solution: the study's Hopper GEMM C = A @ B^T (A [M, 5120], B [7168, 5120] row-major bf16, fp32
// accumulators, bf16 C), persistent, warp-specialised, one CTA per SM (CLUSTER=1, the default) or 2-CTA clusters
// (CLUSTER=2). Three warpgroups:
//   warpgroup 0, the producer: setmaxnreg.dec to 40 registers; one thread walks the cluster's tiles and
//     k-blocks and fills a STAGES-deep ring of 128x64 A and 256x64 B tiles (128-byte swizzle) by TMA. With
//     CLUSTER=2 the two CTAs of a cluster own row-blocks 2u and 2u+1 of the same 256-column block, so they share the B tile: each
//     loads its own A tile and HALF of B (128 rows) with .multicast::cluster into both CTAs' rings, halving
//     the L2-to-SM traffic for B. A stage is refilled only when the consumers of BOTH CTAs released it (the
//     "empty" mbarrier counts arrivals from the 8 consumer warps of each CTA, the peer's arriving remotely).
//   warpgroups 1 and 2, the consumers: setmaxnreg.inc to 232 registers; each owns 64 rows of the 128 x 256
//     tile (128 fp32 accumulators per thread), waits on the stage's "full" mbarrier, issues four
//     wgmma.mma_async m64n256k16, keeps one wgmma group in flight and releases the previous stage.
//   Epilogue (EPI=1, the default): each consumer warpgroup converts its 64 x 256 block to bf16 in two
//     64 x 128 halves, written into a 16 KB staging buffer in the 128-byte-swizzled layout (conflict-free for
//     the accumulator fragment), then one thread issues TMA tensor stores; the stores drain while the
//     warpgroup starts the next tile (it waits for the buffer to be read only before it writes it again).
//     EPI=2 gives each warpgroup two such buffers (it then waits only for the store before the last one;
//     fits with 3 stages); EPI=0 stores bf16 pairs straight from the registers.
// Stage and parity counters run on across tiles, so the producer loads the next tile while the consumers
// finish the current one. Tiles (cluster units of 256 x 256) are visited in groups of GROUP_M row-blocks for
// L2 reuse. The grid is as many clusters as fit at once (cudaOccupancyMaxActiveClusters), never a second wave.
// An odd number of row-blocks leaves the last cluster's second CTA without rows: it loads a valid A block
// (its products are discarded) so the shared B half still reaches its peer, and stores nothing.
// The PTX (setmaxnreg, mbarrier, TMA, multicast, wgmma, cluster barriers) and the tensor-map encoding come from
// the ptxrag_sm90.cuh template header. Compile-time knobs (CLUSTER 1|2, STAGES 3|4, GROUP_M, EPI 0|1|2) exist
// for the tuning runs in docs/validation/g19-device.sh; the defaults are the measured best (H200, 2026-12-04
// session 5, m = 8192: CLUSTER=1 0.96x cuBLAS, CLUSTER=2 0.74x with the same stages, epilogue and raster;
// record docs/validation/2026-12-04-s5-gemm-n7168.txt).
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cstdint>

#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef GROUP_M
#define GROUP_M 16
#endif
#ifndef EPI
#define EPI 1
#endif

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int CONSUMER_WARPS = 8;
constexpr int THREADS = 384;                      // producer warpgroup + two consumer warpgroups
constexpr uint32_t A_BYTES = BM * BK * 2;         // 16 KB
constexpr uint32_t B_BYTES = BN * BK * 2;         // 32 KB
constexpr uint32_t B_PART = B_BYTES / CLUSTER;    // the part of B each CTA of the cluster loads
constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int NBUF = EPI == 2 ? 2 : 1;             // staging buffers (64 rows x 128 cols bf16) per warpgroup
constexpr uint32_t HALF_BYTES = 64 * 128 * 2;     // 16 KB
constexpr uint32_t STAGING_BYTES = EPI ? 2 * NBUF * HALF_BYTES : 0;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + STAGING_BYTES + 1024;
static_assert(SMEM_BYTES <= 232448, "shared memory per block");
static_assert(CLUSTER == 1 || CLUSTER == 2, "cluster of 1 or 2 CTAs along m");

__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return ptxrag::make_smem_desc_kmajor(addr, ptxrag::SmemSwizzle::B128);
}

// cluster unit u -> (pair of row-blocks, column-block); row-blocks in groups of GROUP_M (GROUP_M/CLUSTER units)
__device__ __forceinline__ void unit_coords(int u, int mu, int nt, int& um, int& nb) {
  constexpr int G = GROUP_M / CLUSTER;
  const int per_group = G * nt;
  const int first = (u / per_group) * G;
  const int gm = mu - first < G ? mu - first : G;
  const int r = u % per_group;
  um = first + r % gm;
  nb = r / gm;
}

// one arrival on a ring slot's "empty" barrier (shared::cluster address; the own CTA's when CLUSTER is 1)
__device__ __forceinline__ void release(uint32_t bar) {
  if (CLUSTER > 1)
    ptxrag::mbarrier_arrive_cluster(bar);
  else
    ptxrag::mbarrier_arrive(bar);
}

// named barrier over one consumer warpgroup (ids 1, 2; 0 is __syncthreads)
__device__ __forceinline__ void wg_barrier(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
    gemm(const __grid_constant__ CUtensorMap amap, const __grid_constant__ CUtensorMap bmap,
         const __grid_constant__ CUtensorMap cmap, __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t ring = (ptxrag::smem_u32(smem_raw) + 1023) & ~1023u;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = threadIdx.x / 128;
  const uint32_t rank = CLUSTER > 1 ? ptxrag::cluster_ctarank() : 0;
  const int cluster = blockIdx.x / CLUSTER, n_clusters = gridDim.x / CLUSTER;
  const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;
  const int mu = (mt + CLUSTER - 1) / CLUSTER, n_units = mu * nt;
  const int nk = (K + BK - 1) / BK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), CONSUMER_WARPS * CLUSTER);
    }
    ptxrag::fence_mbarrier_init();
  }
  if (CLUSTER > 1)
    ptxrag::cluster_sync();  // the peer's barriers are initialised before any multicast or remote arrive
  else
    __syncthreads();

  if (wg == 0) {
    ptxrag::setmaxnreg_dec<40>();
    if (warp == 0 && lane == 0) {
      ptxrag::prefetch_tensormap(&amap);
      ptxrag::prefetch_tensormap(&bmap);
      uint32_t s = 0, phase = 0, it = 0;  // ring slot, its parity, k-blocks issued so far (across tiles)
      for (int u = cluster; u < n_units; u += n_clusters) {
        int um, nb;
        unit_coords(u, mu, nt, um, nb);
        int mb = um * CLUSTER + (int)rank;
        if (mb >= mt) mb = mt - 1;  // no rows for this CTA: load any valid A block, the result is discarded
        for (int kb = 0; kb < nk; ++kb, ++it) {
          if (it >= STAGES) ptxrag::mbarrier_wait_parity_cluster(ptxrag::smem_u32(&empty[s]), phase ^ 1u);
          const uint32_t a_dst = ring + s * STAGE_BYTES, bar = ptxrag::smem_u32(&full[s]);
          ptxrag::mbarrier_arrive_expect_tx(bar, STAGE_BYTES);
          ptxrag::tma_load_2d(a_dst, &amap, kb * BK, mb * BM, bar);
#if CLUSTER > 1
          ptxrag::tma_load_2d_multicast(a_dst + A_BYTES + rank * B_PART, &bmap, kb * BK,
                                        nb * BN + (int)rank * (BN / CLUSTER), bar, (1u << CLUSTER) - 1);
#else
          ptxrag::tma_load_2d(a_dst + A_BYTES, &bmap, kb * BK, nb * BN, bar);
#endif
          if (++s == STAGES) {
            s = 0;
            phase ^= 1u;
          }
        }
      }
    }
    __syncwarp();
  } else {
    ptxrag::setmaxnreg_inc<232>();
    const int cw = wg - 1;  // consumer warpgroup: rows 64 cw .. 64 cw + 63 of the tile
    const int wt = threadIdx.x % 128;
#if EPI
    const uint32_t staging_wg = ring + STAGES * STAGE_BYTES + cw * NBUF * HALF_BYTES;
#endif
    uint32_t s = 0, phase = 0;
    // the consumer warp's lane r (r < CLUSTER) releases a stage to CTA r of the cluster: empty[i] of that CTA
    // is release_base + 8 i in the cluster window
    const uint32_t local_empty = ptxrag::smem_u32(&empty[0]);
    const uint32_t release_base =
        CLUSTER > 1 ? ptxrag::mapa_shared(local_empty, lane < CLUSTER ? lane : 0) : local_empty;
    uint32_t prev = 0;
    for (int u = cluster; u < n_units; u += n_clusters) {
      int um, nb;
      unit_coords(u, mu, nt, um, nb);
      const int mb = um * CLUSTER + (int)rank;
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.f;
      for (int kb = 0; kb < nk; ++kb) {
        ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full[s]), phase);
        const uint32_t a_tile = ring + s * STAGE_BYTES + cw * (64 * 128), b_tile = ring + s * STAGE_BYTES + A_BYTES;
        ptxrag::wgmma_fence();
#pragma unroll
        for (int k = 0; k < BK / 16; ++k)
          ptxrag::wgmma_bf16<BN>(d, desc_sw128(a_tile + k * 32), desc_sw128(b_tile + k * 32));
        ptxrag::wgmma_commit_group();
        ptxrag::wgmma_wait_group<1>();
        if (kb > 0 && lane < CLUSTER) release(release_base + 8 * prev);
        prev = s;
        if (++s == STAGES) {
          s = 0;
          phase ^= 1u;
        }
      }
      ptxrag::wgmma_wait_group<0>();
      if (lane < CLUSTER) release(release_base + 8 * prev);  // the tile's last stage
      if (mb >= mt) continue;  // a CTA without rows (odd row-block count) stores nothing
#if EPI
      // fragment of m64nNk16: d[4j + {0,1}] -> row lane/4, cols 8j + 2(lane%4) + {0,1}; d[4j + {2,3}] -> row + 8
      const int r0 = (warp % 4) * 16 + lane / 4;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t staging = staging_wg + (h % NBUF) * HALF_BYTES;
        // the store that last used this buffer has read it (with two buffers: all but the latest store)
        if (wt == 0) ptxrag::bulk_wait_group_read<NBUF - 1>();
        wg_barrier(1 + cw);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          const int j = h * 16 + jj;       // 8-column block of the 256 columns
          const uint32_t box = staging + (jj / 8) * (64 * 128);  // 64 x 64 box, 128-byte rows
          const uint32_t chunk = jj % 8;   // 16-byte chunk of the row before the swizzle
#pragma unroll
          for (int hr = 0; hr < 2; ++hr) {
            const int r = r0 + 8 * hr;
            const uint32_t addr = box + r * 128 + ((chunk ^ (r % 8)) << 4) + 4 * (lane % 4);
            __nv_bfloat162 v = __floats2bfloat162_rn(d[4 * j + 2 * hr], d[4 * j + 2 * hr + 1]);
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(*reinterpret_cast<uint32_t*>(&v)) : "memory");
          }
        }
        ptxrag::fence_proxy_async_shared_cta();
        wg_barrier(1 + cw);
        if (wt == 0) {
          const int c0 = nb * BN + h * 128, row = mb * BM + cw * 64;
          ptxrag::tma_store_2d(&cmap, c0, row, staging);
          ptxrag::tma_store_2d(&cmap, c0 + 64, row, staging + 64 * 128);
          ptxrag::bulk_commit_group();
        }
      }
#else
      const int row = mb * BM + cw * 64 + (warp % 4) * 16 + lane / 4;
      const int col = nb * BN + 2 * (lane % 4);
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
#endif
    }
#if EPI
    if (wt == 0) ptxrag::bulk_wait_group<0>();  // the last stores are complete before the CTA exits
#endif
  }
  __syncwarp();
  if (CLUSTER > 1) ptxrag::cluster_sync();  // no CTA exits while its peer may still arrive on its barriers
}

// bf16 [rows, cols] row-major, box_rows x 64 boxes, 128-byte swizzle
static int encode(CUtensorMap* map, void* base, uint64_t cols, uint64_t rows, uint32_t box_rows,
                  CUtensorMapL2promotion l2) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {cols * 2};
  const uint32_t box[2] = {64, box_rows};
  return ptxrag::make_tensor_map(map, base, PTXRAG_BF16, 2, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B, l2);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 2 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& A = a->inputs[0];
  const ptxrag_tensor& B = a->inputs[1];
  const ptxrag_tensor& Ct = a->outputs[0];
  if (A.dtype != PTXRAG_BF16 || B.dtype != PTXRAG_BF16 || Ct.dtype != PTXRAG_BF16 || A.ndim != 2 || B.ndim != 2 ||
      Ct.ndim != 2 || !ptxrag_is_contiguous(&A) || !ptxrag_is_contiguous(&B) || !ptxrag_is_contiguous(&Ct))
    return PTXRAG_ERR_BAD_ARGS;
  const long long M = A.shape[0], K = A.shape[1], N = B.shape[0];
  if (B.shape[1] != K || Ct.shape[0] != M || Ct.shape[1] != N) return PTXRAG_ERR_BAD_ARGS;
  if (M < 1 || K % 8 != 0 || N % 8 != 0 || M > (1 << 30) || N > (1 << 30) || K > (1 << 30))
    return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap amap, bmap, cmap;
  int rc = encode(&amap, A.data, K, M, BM, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  if (rc == 0) rc = encode(&bmap, B.data, K, N, BN / CLUSTER, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  if (rc == 0) rc = encode(&cmap, Ct.data, N, M, 64, CU_TENSOR_MAP_L2_PROMOTION_NONE);
  if (rc != 0) return rc;
  static int max_clusters = 0;
  if (max_clusters == 0) {
    cudaError_t e = cudaFuncSetAttribute(gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    int sms = 132;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaLaunchConfig_t probe = {};
    probe.gridDim = dim3(sms / CLUSTER * CLUSTER);
    probe.blockDim = dim3(THREADS);
    probe.dynamicSmemBytes = SMEM_BYTES;
    int n = 0;
    if (CLUSTER > 1 && cudaOccupancyMaxActiveClusters(&n, gemm, &probe) == cudaSuccess && n > 0)
      max_clusters = n;
    else
      max_clusters = sms / CLUSTER;
  }
  const long long units = ((M + BM * CLUSTER - 1) / (BM * CLUSTER)) * ((N + BN - 1) / BN);
  const int clusters = (int)(units < max_clusters ? units : max_clusters);
  gemm<<<clusters * CLUSTER, THREADS, SMEM_BYTES, a->stream>>>(amap, bmap, cmap, (__nv_bfloat16*)Ct.data, (int)M,
                                                               (int)N, (int)K);
  return (int)cudaGetLastError();
}
