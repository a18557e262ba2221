// Control: the wgmma fallback a model reaches for when it cannot get descriptors right: a correct GEMM on
// the previous generation's path (cp.async multi-stage ring, ldmatrix, mma.sync m16n8k16; the
// gemm-mma-sync-sm80 design). It has neither wgmma nor TMA, so the static check must reject it.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda_bf16.h>
#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 32, STAGES = 4, PITCH = BK + 8, THREADS = 256;
constexpr int TILE_ELEMS = BM * PITCH;  // one operand tile of one stage (BM == BN)
constexpr int SMEM_BYTES = STAGES * 2 * TILE_ELEMS * 2;

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

// ptxrag::ldmatrix_x4 into a fragment array
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  ptxrag::ldmatrix_x4(addr, r[0], r[1], r[2], r[3]);
}

__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// copy one k-block (128 rows x 32 k of A and of B) into stage s; each thread moves 2 + 2 chunks of 16 bytes
__device__ __forceinline__ void load_stage(__nv_bfloat16* As, __nv_bfloat16* Bs, const __nv_bfloat16* A,
                                           const __nv_bfloat16* B, int M, int N, int K, int m0, int n0, int k0) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int chunk = threadIdx.x + i * THREADS;  // 0..511: row chunk / 4, k-chunk chunk % 4
    const int r = chunk / 4, kc = (chunk % 4) * 8;
    const bool kin = k0 + kc < K;
    const bool a_ok = kin && m0 + r < M, b_ok = kin && n0 + r < N;
    cp_async16(ptxrag::smem_u32(As + r * PITCH + kc), a_ok ? A + (size_t)(m0 + r) * K + k0 + kc : A, a_ok);
    cp_async16(ptxrag::smem_u32(Bs + r * PITCH + kc), b_ok ? B + (size_t)(n0 + r) * K + k0 + kc : B, b_ok);
  }
}

__global__ void __launch_bounds__(THREADS) gemm(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                                __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(16) __nv_bfloat16 smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp tile: rows wm*64.., cols wn*32..
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int nk = (K + BK - 1) / BK;
  auto As = [&](int s) { return smem + s * 2 * TILE_ELEMS; };
  auto Bs = [&](int s) { return smem + s * 2 * TILE_ELEMS + TILE_ELEMS; };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load_stage(As(s), Bs(s), A, B, M, N, K, m0, n0, s * BK);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  for (int kb = 0; kb < nk; ++kb) {
    asm volatile("cp.async.wait_group %0;" :: "n"(STAGES - 2) : "memory");  // this thread's copies of kb landed
    __syncthreads();  // everyone's copies landed, and everyone is done with the stage refilled below
    const int nxt = kb + STAGES - 1;
    if (nxt < nk) load_stage(As(nxt % STAGES), Bs(nxt % STAGES), A, B, M, N, K, m0, n0, nxt * BK);
    asm volatile("cp.async.commit_group;" ::: "memory");
    const __nv_bfloat16* as = As(kb % STAGES);
    const __nv_bfloat16* bs = Bs(kb % STAGES);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[4][4], bf[2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        ldmatrix_x4(af[i], ptxrag::smem_u32(as + (wm * 64 + i * 16 + lane % 16) * PITCH + kk + (lane / 16) * 8));
#pragma unroll
      for (int p = 0; p < 2; ++p)  // n-blocks 2p and 2p+1: {b0, b1} of each
        ldmatrix_x4(bf[p], ptxrag::smem_u32(bs + (wn * 32 + p * 16 + (lane / 16) * 8 + lane % 8) * PITCH + kk +
                                            ((lane / 8) % 2) * 8));
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma16816(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");

  // accumulator of m16n8: {c0, c1} -> row lane/4, cols 2(lane%4) + {0,1}; {c2, c3} -> row lane/4 + 8
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = m0 + wm * 64 + i * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = n0 + wn * 32 + j * 8 + 2 * (lane % 4);
      if (c >= N) continue;
      if (r < M)
        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)r * N + c) = __floats2bfloat162_rn(acc[i][j][0], acc[i][j][1]);
      if (r + 8 < M)
        *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(r + 8) * N + c) =
            __floats2bfloat162_rn(acc[i][j][2], acc[i][j][3]);
    }
  }
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
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
  gemm<<<grid, THREADS, SMEM_BYTES, a->stream>>>((const __nv_bfloat16*)A.data, (const __nv_bfloat16*)B.data,
                                                 (__nv_bfloat16*)C.data, (int)M, (int)N, (int)K);
  return (int)cudaGetLastError();
}
