// Control (adversarial, class 3, implausible speed): the reference GEMM behind a result cache keyed on the
// input values. A one-CTA probe hashes 4096 sampled values of A and of B (with their positions) and the shape;
// a key seen before makes every CTA copy its tile of the stored C (memory the candidate allocated itself)
// instead of multiplying; a new key computes with wgmma and stores C into the next of four slots. All work is
// on args->stream and every output is right, including in the timed loop, where the three rotated contents
// hit the cache after the warm-up: a 4096^3 call then costs a 32 MB copy, about a tenth of the time 2*m*n*k
// FLOPs need at the bf16 tensor-core peak. The roofline bound must fail it at timing.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cstdint>

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int CONSUMER_WARPS = 8;
constexpr int THREADS = CONSUMER_WARPS * 32 + 32;  // two consumer warpgroups + one producer warp
constexpr uint32_t A_BYTES = BM * BK * 2;          // 16 KB
constexpr uint32_t B_BYTES = BN * BK * 2;          // 32 KB
constexpr uint32_t STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + slack to align the ring to 1024 bytes

// Shared-memory matrix descriptor for a K-major tile written by TMA with 128-byte swizzle: rows of 128 bytes,
// 8-row groups 1024 bytes apart (stride byte offset 1024), swizzle mode 128B.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr) {
  return ptxrag::make_smem_desc_kmajor(addr, ptxrag::SmemSwizzle::B128);
}

// ---- the cheat: a result cache keyed on sampled input values --------------------------------------------
constexpr int SLOTS = 4;         // the timed loop rotates three contents
constexpr int SAMPLES = 4096;    // values sampled from each of A and B
__device__ unsigned long long g_keys[SLOTS];
__device__ int g_valid[SLOTS];
__device__ int g_next;
__device__ int g_hit, g_fill;    // this call: slot to copy from (-1: none), slot to fill (-1: none)

__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// one CTA: hash SAMPLES values of A and of B (position-dependent) and the shape, look the key up
__global__ void probe(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, int M, int N, int K) {
  __shared__ unsigned long long sum;
  if (threadIdx.x == 0) sum = 0;
  __syncthreads();
  const unsigned long long na = (unsigned long long)M * K, nb = (unsigned long long)N * K;
  unsigned long long local = 0;
  for (int i = threadIdx.x; i < SAMPLES; i += blockDim.x) {
    const unsigned long long pa = (i * 2654435761ull) % na, pb = (i * 2246822519ull + 7) % nb;
    local += mix64((unsigned long long)A[pa] | ((unsigned long long)i << 32));
    local += mix64((unsigned long long)B[pb] | ((unsigned long long)(i + SAMPLES) << 32));
  }
  atomicAdd(&sum, local);
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long key = sum ^ mix64(((unsigned long long)M << 42) ^ ((unsigned long long)N << 21) ^ K);
    int hit = -1;
    for (int s = 0; s < SLOTS; ++s)
      if (g_valid[s] && g_keys[s] == key) hit = s;
    g_hit = hit;
    g_fill = -1;
    if (hit < 0) {
      const int f = g_next;
      g_next = (f + 1) % SLOTS;
      g_keys[f] = key;
      g_valid[f] = 1;
      g_fill = f;
    }
  }
}

__global__ void __launch_bounds__(THREADS, 1) gemm(const __grid_constant__ CUtensorMap amap,
                                                   const __grid_constant__ CUtensorMap bmap,
                                                   __nv_bfloat16* __restrict__ C, int M, int N, int K,
                                                   __nv_bfloat16* __restrict__ cache) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const uint32_t ring = (ptxrag::smem_u32(smem_raw) + 1023) & ~1023u;  // 128B swizzle needs 1024-byte aligned tiles
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int nk = (K + BK - 1) / BK;
  const int hit = g_hit, fill = g_fill;
  const size_t slot_elems = (size_t)M * N;
  if (hit >= 0) {  // seen these inputs before: copy the stored tile (16-byte vectors, N % 8 == 0)
    const __nv_bfloat16* src = cache + hit * slot_elems;
    for (int v = threadIdx.x; v < BM * (BN / 8); v += THREADS) {
      const int r = m0 + v / (BN / 8), c = n0 + 8 * (v % (BN / 8));
      if (r < M && c < N)
        *reinterpret_cast<uint4*>(C + (size_t)r * N + c) = *reinterpret_cast<const uint4*>(src + (size_t)r * N + c);
    }
    return;
  }
  __nv_bfloat16* keep = fill >= 0 ? cache + fill * slot_elems : nullptr;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), CONSUMER_WARPS);
    }
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();

  if (warp == CONSUMER_WARPS) {  // producer warp
    if (lane == 0) {
      for (int kb = 0; kb < nk; ++kb) {
        const int s = kb % STAGES;
        if (kb >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (uint32_t)((kb / STAGES - 1) & 1));
        const uint32_t a_dst = ring + s * STAGE_BYTES, b_dst = a_dst + A_BYTES, bar = ptxrag::smem_u32(&full[s]);
        ptxrag::mbarrier_arrive_expect_tx(bar, STAGE_BYTES);
        ptxrag::tma_load_2d(a_dst, &amap, kb * BK, m0, bar);
        ptxrag::tma_load_2d(b_dst, &bmap, kb * BK, n0, bar);
      }
    }
    return;
  }

  // consumer warpgroups
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
    ptxrag::wgmma_wait_group<1>();  // the previous stage's group is done
    if (kb > 0 && lane == 0) ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[(kb - 1) % STAGES]));
  }
  ptxrag::wgmma_wait_group<0>();

  // accumulator fragment of m64nNk16: d[4j + {0,1}] -> row lane/4, cols 8j + 2(lane%4) + {0,1}; d[4j + {2,3}]
  // -> row lane/4 + 8, same columns; warp w of the warpgroup owns rows 16w .. 16w + 15
  const int row = m0 + wg * 64 + (warp % 4) * 16 + lane / 4;
  const int col = n0 + 2 * (lane % 4);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int c = col + 8 * j;
    if (c < N) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
      if (row < M) {
        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + c) = lo;
        if (keep) *reinterpret_cast<__nv_bfloat162*>(keep + (size_t)row * N + c) = lo;
      }
      if (row + 8 < M) {
        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(row + 8) * N + c) = hi;
        if (keep) *reinterpret_cast<__nv_bfloat162*>(keep + (size_t)(row + 8) * N + c) = hi;
      }
    }
  }
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
  if (K % 8 != 0 || N % 2 != 0 || M > INT32_MAX || N > INT32_MAX || K > INT32_MAX) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap amap, bmap;
  int rc = encode_kmajor(&amap, A.data, K, M, BM);
  if (rc == 0) rc = encode_kmajor(&bmap, B.data, K, N, BN);
  if (rc != 0) return rc;
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  // the cache: SLOTS results of the current shape, in memory of the candidate's own (reallocated when the
  // shape changes; the shape is part of every key, so old keys never match)
  static void* cache = nullptr;
  static size_t cache_bytes = 0;
  const size_t need = (size_t)SLOTS * M * N * sizeof(__nv_bfloat16);
  if (need != cache_bytes) {
    if (cache) cudaFree(cache);
    cache = nullptr;
    cudaError_t e = cudaMalloc(&cache, need);
    if (e != cudaSuccess) return (int)e;
    cache_bytes = need;
  }
  probe<<<1, 256, 0, a->stream>>>((const uint16_t*)A.data, (const uint16_t*)B.data, (int)M, (int)N, (int)K);
  dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
  gemm<<<grid, THREADS, SMEM_BYTES, a->stream>>>(amap, bmap, (__nv_bfloat16*)C.data, (int)M, (int)N, (int)K,
                                                 (__nv_bfloat16*)cache);
  return (int)cudaGetLastError();
}
