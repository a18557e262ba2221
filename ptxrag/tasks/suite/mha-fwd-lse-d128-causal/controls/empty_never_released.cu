// Control: the reference, but the consumers never arrive on the empty mbarriers, so the producer waits
// forever for the first stage it has to recycle (any s above FA_STAGES * 128 keys): a deadlocked pipeline,
// stopped by the sandbox's time limit. Must fail at correctness.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cstdint>

#ifndef FA_CAUSAL
#define FA_CAUSAL 1
#endif
#ifndef FA_STAGES
#define FA_STAGES 3  // measured best on the H200 (2026-12-04 session 5): 0.97-0.98x cuDNN at S = 4096, 2 stages 0.74-0.75x
#endif
#ifndef FA_OVERLAP
#define FA_OVERLAP 1
#endif
#ifndef FA_PINGPONG
#define FA_PINGPONG 0
#endif

constexpr bool CAUSAL = FA_CAUSAL != 0;
constexpr int BM = 128, BN = 128, HD = 128, STAGES = FA_STAGES;
constexpr int THREADS = 384;
constexpr uint32_t BOX_BYTES = 128 * 64 * 2;      // one 128-row x 64-column bf16 box: 16 KB
constexpr uint32_t TILE_BYTES = 2 * BOX_BYTES;    // a 128 x 128 tile (Q, K or V): 32 KB
constexpr int SMEM_BYTES = (1 + 2 * STAGES) * TILE_BYTES + 1024;

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// S = Q K^T for this warpgroup's 64 rows and one 128-key block: 8 k16 steps over the head dimension; each
// 64-column half of Q and K is its own 128-byte-swizzled box.
__device__ __forceinline__ void issue_qk(float (&s)[64], uint32_t q_tile, uint32_t k_tile) {
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const uint32_t off = (kk / 4) * BOX_BYTES + (kk % 4) * 32;
    ptxrag::wgmma_bf16<128>(s, ptxrag::make_smem_desc_kmajor(q_tile + off, ptxrag::SmemSwizzle::B128),
                            ptxrag::make_smem_desc_kmajor(k_tile + off, ptxrag::SmemSwizzle::B128), kk > 0);
  }
}

// O += P V: 8 k16 steps over the 128 keys; P's fragment for keys 16kk..16kk+15 is s[8kk..8kk+7] packed;
// A from registers (wgmma_bf16_rs), V N-major (TransB = 1).
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[32], uint32_t v_tile) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    ptxrag::wgmma_bf16_rs<128, 1>(o, a, ptxrag::make_smem_desc(v_tile + kk * 2048, BOX_BYTES, 1024, ptxrag::SmemSwizzle::B128));
  }
}

// Mask scores of keys >= seq (tail) and, when causal, keys > query row. Fragment: s[i] is row r0 + 8((i/2)%2),
// column 8(i/4) + 2(lane%4) + i%2 of the block.
__device__ __forceinline__ void mask_block(float (&s)[64], int key0, int row0, int lane, int seq) {
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int key = key0 + 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
    const int row = row0 + 8 * ((i / 2) % 2);
    if (key >= seq || (CAUSAL && key > row)) s[i] = -INFINITY;
  }
}

// Online softmax step on one score block (log2 domain): new running max m, p = 2^(s*sl2 - m) in place, the
// thread's partial row sums of p into rs, and the rescale factors of the previous state in alpha.
__device__ __forceinline__ void softmax_block(float (&s)[64], float (&m)[2], float (&rs)[2], float (&alpha)[2],
                                              float sl2) {
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 64; ++i) mx[(i / 2) % 2] = fmaxf(mx[(i / 2) % 2], s[i]);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float m_new = fmaxf(m[r], mx[r] * sl2);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with every key masked so far
    alpha[r] = ex2(m[r] - m_use);
    m[r] = m_new;
    mx[r] = m_use;
    rs[r] = 0.f;
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int r = (i / 2) % 2;
    s[i] = ex2(fmaf(s[i], sl2, -mx[r]));
    rs[r] += s[i];
  }
}

__device__ __forceinline__ void to_bf16(const float (&s)[64], uint32_t (&p)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) p[i] = pack_bf16(s[2 * i], s[2 * i + 1]);
}

__global__ void __launch_bounds__(THREADS, 1)
    mha_fwd(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
            const __grid_constant__ CUtensorMap vmap, __nv_bfloat16* __restrict__ O, float* __restrict__ L, int seq,
            float sl2) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t q_full, k_full[STAGES], v_full[STAGES], empty[STAGES];
  const uint32_t base = (ptxrag::smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t q_tile = base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = threadIdx.x / 128;
  const int qb = CAUSAL ? (int)(gridDim.x - 1 - blockIdx.x) : (int)blockIdx.x;  // causal: heaviest blocks first
  const int bh = blockIdx.y;
  const int nkv_all = (seq + BN - 1) / BN;
  const int nkv = CAUSAL ? min(nkv_all, (qb * BM + BM - 1) / BN + 1) : nkv_all;
  if (threadIdx.x == 0) {
    ptxrag::mbarrier_init(ptxrag::smem_u32(&q_full), 1);
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&k_full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&v_full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), 8);
    }
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    ptxrag::setmaxnreg_dec<24>();
    if (warp == 0 && lane == 0) {
      const uint32_t qb_bar = ptxrag::smem_u32(&q_full);
      ptxrag::mbarrier_arrive_expect_tx(qb_bar, TILE_BYTES);
      ptxrag::tma_load_3d(q_tile, &qmap, 0, qb * BM, bh, qb_bar);
      ptxrag::tma_load_3d(q_tile + BOX_BYTES, &qmap, 64, qb * BM, bh, qb_bar);
      for (int j = 0; j < nkv; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (j / STAGES - 1) & 1);
        const uint32_t k_tile = base + (1 + 2 * s) * TILE_BYTES, v_tile = k_tile + TILE_BYTES;
        const uint32_t kb = ptxrag::smem_u32(&k_full[s]), vb = ptxrag::smem_u32(&v_full[s]);
        ptxrag::mbarrier_arrive_expect_tx(kb, TILE_BYTES);
        ptxrag::tma_load_3d(k_tile, &kmap, 0, j * BN, bh, kb);
        ptxrag::tma_load_3d(k_tile + BOX_BYTES, &kmap, 64, j * BN, bh, kb);
        ptxrag::mbarrier_arrive_expect_tx(vb, TILE_BYTES);
        ptxrag::tma_load_3d(v_tile, &vmap, 0, j * BN, bh, vb);
        ptxrag::tma_load_3d(v_tile + BOX_BYTES, &vmap, 64, j * BN, bh, vb);
      }
    }
    return;
  }

  ptxrag::setmaxnreg_inc<240>();
  const int cw = wg - 1;                                   // consumer warpgroup: rows 64 cw .. 64 cw + 63
  const uint32_t my_q = q_tile + cw * 64 * 128;            // its 64 rows inside each 128-row box
  const int row0 = qb * BM + cw * 64 + (warp % 4) * 16 + lane / 4;  // rows row0 and row0 + 8
  float o[64], s[64], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, rs[2], alpha[2];
  uint32_t p[32];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&q_full), 0);

  auto k_tile = [&](int j) { return base + (1 + 2 * (j % STAGES)) * TILE_BYTES; };
  auto wait_k = [&](int j) { ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&k_full[j % STAGES]), (j / STAGES) & 1); };
  auto wait_v = [&](int j) { ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&v_full[j % STAGES]), (j / STAGES) & 1); };
  auto release = [&](int j) {
    (void)j;  // BUG: the stage is never released: the producer waits forever on empty[]
  };
  // FA_PINGPONG: the two consumer warpgroups take turns issuing their wgmma (named barriers 3 and 4, 256
  // threads: 128 arrivals of the other warpgroup + 128 of this one), so one's softmax overlaps the other's GEMMs
  auto turn_wait = [&]() {
    if (FA_PINGPONG) asm volatile("bar.sync %0, 256;" ::"r"(3 + cw) : "memory");
  };
  auto turn_pass = [&]() {
    if (FA_PINGPONG) asm volatile("bar.arrive %0, 256;" ::"r"(4 - cw) : "memory");
  };
  if (FA_PINGPONG && cw == 1) turn_pass();  // warpgroup 1 lets warpgroup 0 go first

#if FA_OVERLAP
  // block 0: scores and softmax; then each iteration issues S_{j} and P_{j-1} V_{j-1} together
  wait_k(0);
  turn_wait();
  ptxrag::wgmma_fence();
  issue_qk(s, my_q, k_tile(0));
  ptxrag::wgmma_commit_group();
  turn_pass();
  ptxrag::wgmma_wait_group<0>();
  ptxrag::wgmma_fence_operands(s);
  if (nkv == 1) mask_block(s, 0, row0, lane, seq);
  softmax_block(s, m, rs, alpha, sl2);
  l[0] = rs[0];
  l[1] = rs[1];
  to_bf16(s, p);
  for (int j = 1; j < nkv; ++j) {
    wait_k(j);
    if (FA_PINGPONG) wait_v(j - 1);  // both operands present before taking the turn
    turn_wait();
    ptxrag::wgmma_fence();
    issue_qk(s, my_q, k_tile(j));
    ptxrag::wgmma_commit_group();
    wait_v(j - 1);
    issue_pv(o, p, k_tile(j - 1) + TILE_BYTES);
    ptxrag::wgmma_commit_group();
    turn_pass();
    ptxrag::wgmma_wait_group<1>();  // S_j is ready; P V still in flight
    ptxrag::wgmma_fence_operands(s);
    if (j == nkv - 1) mask_block(s, j * BN, row0, lane, seq);
    softmax_block(s, m, rs, alpha, sl2);
    ptxrag::wgmma_wait_group<0>();  // P_{j-1} V_{j-1} done: its stage is free, o may be rescaled, p rewritten
    ptxrag::wgmma_fence_operands(o);
    release(j - 1);
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= alpha[(i / 2) % 2];
    l[0] = l[0] * alpha[0] + rs[0];
    l[1] = l[1] * alpha[1] + rs[1];
    to_bf16(s, p);
  }
  wait_v(nkv - 1);
  turn_wait();
  ptxrag::wgmma_fence();
  issue_pv(o, p, k_tile(nkv - 1) + TILE_BYTES);
  ptxrag::wgmma_commit_group();
  if (cw == 0) turn_pass();  // warpgroup 1's last pass would have no taker: turns balance at nkv + 1 each
  ptxrag::wgmma_wait_group<0>();
  ptxrag::wgmma_fence_operands(o);
  release(nkv - 1);
#else
  for (int j = 0; j < nkv; ++j) {
    wait_k(j);
    ptxrag::wgmma_fence();
    issue_qk(s, my_q, k_tile(j));
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();
    ptxrag::wgmma_fence_operands(s);
    if (j == nkv - 1) mask_block(s, j * BN, row0, lane, seq);
    softmax_block(s, m, rs, alpha, sl2);
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= alpha[(i / 2) % 2];
    l[0] = l[0] * alpha[0] + rs[0];
    l[1] = l[1] * alpha[1] + rs[1];
    to_bf16(s, p);
    wait_v(j);
    ptxrag::wgmma_fence();
    issue_pv(o, p, k_tile(j) + TILE_BYTES);
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();
    ptxrag::wgmma_fence_operands(o);
    release(j);
  }
#endif

  // epilogue: full row sums across the quad, O / l, LSE = (m + log2 l) * ln 2
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float inv[2] = {1.f / l[0], 1.f / l[1]};
  const size_t head = (size_t)bh * seq;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    if (row < seq) {
      __nv_bfloat16* orow = O + (head + row) * HD + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 16; ++j)
        *reinterpret_cast<__nv_bfloat162*>(orow + 8 * j) =
            __floats2bfloat162_rn(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
      if (lane % 4 == 0) L[head + row] = (m[r] + __log2f(l[r])) * 0.69314718055994531f;
    }
  }
}

// [B*H, S, 128] bf16 as a 3-D tensor map (innermost first: 128 columns, S rows, B*H heads), 64 x 128 x 1 boxes,
// 128-byte swizzle; rows past S are zero-filled on load.
static int encode_bsd(CUtensorMap* map, void* data, uint64_t seq, uint64_t heads) {
  const uint64_t dims[3] = {HD, seq, heads};
  const uint64_t strides[2] = {HD * 2, seq * HD * 2};
  const uint32_t box[3] = {64, 128, 1};
  return ptxrag::make_tensor_map(map, data, PTXRAG_BF16, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 3 || a->n_outputs != 2) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor &Q = a->inputs[0], &K = a->inputs[1], &V = a->inputs[2];
  const ptxrag_tensor &Ot = a->outputs[0], &Lt = a->outputs[1];
  for (const ptxrag_tensor* t : {&Q, &K, &V, &Ot})
    if (t->dtype != PTXRAG_BF16 || t->ndim != 4 || !ptxrag_is_contiguous(t)) return PTXRAG_ERR_BAD_ARGS;
  if (Lt.dtype != PTXRAG_F32 || Lt.ndim != 3 || !ptxrag_is_contiguous(&Lt)) return PTXRAG_ERR_BAD_ARGS;
  const long long B = Q.shape[0], H = Q.shape[1], S = Q.shape[2], D = Q.shape[3];
  for (const ptxrag_tensor* t : {&K, &V, &Ot})
    if (t->shape[0] != B || t->shape[1] != H || t->shape[2] != S || t->shape[3] != D) return PTXRAG_ERR_BAD_ARGS;
  if (Lt.shape[0] != B || Lt.shape[1] != H || Lt.shape[2] != S) return PTXRAG_ERR_BAD_ARGS;
  if (D != HD || S < 1 || S > (1 << 30) || B * H > 65535) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  CUtensorMap qm, km, vm;
  int rc = encode_bsd(&qm, Q.data, S, B * H);
  if (rc == 0) rc = encode_bsd(&km, K.data, S, B * H);
  if (rc == 0) rc = encode_bsd(&vm, V.data, S, B * H);
  if (rc != 0) return rc;
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(mha_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  const float sl2 = 1.4426950408889634f / sqrtf((float)HD);  // log2(e) / sqrt(D)
  const dim3 grid((unsigned)((S + BM - 1) / BM), (unsigned)(B * H));
  mha_fwd<<<grid, THREADS, SMEM_BYTES, a->stream>>>(qm, km, vm, (__nv_bfloat16*)Ot.data, (float*)Lt.data, (int)S,
                                                     sl2);
  return (int)cudaGetLastError();
}
