// Reference solution: FlashAttention-2/3-style CAUSAL multi-head attention backward, head dim 128, bf16
// (mha-bwd-d128's kernel with BW_CAUSAL 1, written by scripts/gen-mha-bwd-controls.py).
// Given q, k, v, o, do [B, H, S, 128] bf16 and lse [B, H, S] fp32 (natural log), with scale = 1/sqrt(128):
//   P = exp(scale q k^T - lse), D = rowsum(do * o), dv = P^T do, dP = do v^T, dS = P (dP - D),
//   dq = scale dS k, dk = scale dS^T q.
// Three kernels on args->stream:
//   bwd_pre: one warp per query row: D = rowsum(do * o) and lse2 = lse * log2(e) into the workspace (rows past
//     S, up to a multiple of 64, get D = 0 and lse2 = +inf, so that their P is exactly 0), and zeroes the fp32
//     dq accumulator rows;
//   bwd_main: one CTA per 128-key block of one (batch, head), three warpgroups:
//     warpgroup 0, the producer: setmaxnreg.dec to 24 registers; one thread loads the K and V tiles once (TMA,
//       3-D tensor maps over [B*H, S, 128], 128-byte swizzle, two 64-column boxes per tile) and streams 64-query
//       blocks of q and do (TMA) with their lse2 and D rows (1-D bulk copies) into a BW_STAGES-deep ring handed
//       over with full/empty mbarriers;
//     warpgroups 1 and 2, the consumers: setmaxnreg.inc to 240 registers; each owns 64 of the 128 keys and keeps
//       its dk and dv (64 x 128 fp32 each) in registers. Per query block, in the transposed (key-major) form:
//       S^T = K q^T and dP^T = V do^T with wgmma m64n64k16 (both operands in shared memory, K-major),
//       P^T = 2^(S^T scale log2(e) - lse2) and dS^T = P^T (dP^T - D) in registers, then dv += P^T do and
//       dk += dS^T q with wgmma m64n128k16 whose A operand is P^T / dS^T rounded to bf16 in registers (the
//       accumulator fragment is the A fragment) and whose B operand is the do / q tile read N-major. dS (bf16)
//       is first written to shared memory in the 128-byte-swizzled K-major layout TMA would produce (each
//       warpgroup one 64-key box); after a named barrier each warpgroup issues dv, dk and one 64-column half
//       of this block's dq = dS K (wgmma m64n64k16, A = dS K-major, B = the K tile N-major) as one group, and
//       adds its dq half to the fp32 accumulator in global memory with atomics (several key blocks add to the
//       same dq rows);
//   bwd_post: dq = bf16(scale * accumulator).
// Causal: a key block starts at the first query block that reaches its first key (query blocks above the
// diagonal are never loaded), the mask is applied only on the two query blocks the diagonal crosses; key blocks
// are launched heaviest (lowest) first. Keys past S are zero-filled by TMA and masked; stores are predicated.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cstdint>

#ifndef BW_CAUSAL
#define BW_CAUSAL 1
#endif
#ifndef BW_STAGES
#define BW_STAGES 2
#endif
// BW_DQ_BULK 1 (a variant, not yet measured): the fp32 dq accumulator is blocked per (head, 64-query block,
// 64-column half), and each warpgroup stages its 64 x 64 dq half in shared memory and adds it with one 16 KB
// cp.reduce.async.bulk (.add.f32) instead of 16 red.global.add.v2.f32 per thread
#ifndef BW_DQ_BULK
#define BW_DQ_BULK 0
#endif
// BW_DQ_OWN 1 (a variant, not yet measured; atomics only): each warpgroup computes the whole dq contribution of
// its own 64 keys (two 64-column halves from its own dS box) instead of one half from both boxes, so the two
// warpgroups never wait for each other (warpgroup-local barriers only), at twice the dq atomics
#ifndef BW_DQ_OWN
#define BW_DQ_OWN 0
#endif
#if BW_DQ_OWN && BW_DQ_BULK
#error "BW_DQ_OWN is built with atomics only"
#endif

constexpr bool CAUSAL = BW_CAUSAL != 0;
constexpr bool DQ_BULK = BW_DQ_BULK != 0;
constexpr int BN = 128, BM = 64, HD = 128, STAGES = BW_STAGES;
constexpr int THREADS = 384;
constexpr uint32_t KV_BOX = 128 * 64 * 2;          // one 128-key x 64-column bf16 box: 16 KB
constexpr uint32_t KV_TILE = 2 * KV_BOX;           // a 128 x 128 tile (K or V): 32 KB
constexpr uint32_t Q_BOX = 64 * 64 * 2;            // one 64-query x 64-column box: 8 KB
constexpr uint32_t Q_TILE = 2 * Q_BOX;             // a 64 x 128 tile (q or do): 16 KB
constexpr uint32_t ROW_BYTES = BM * 4;             // one block's lse2 or D row: 256 bytes
constexpr uint32_t STAGE_BYTES = 2 * Q_TILE + 1024;  // q, do, lse2, D (padded to keep tiles 1024-aligned)
constexpr uint32_t STAGE_TX = 2 * Q_TILE + 2 * ROW_BYTES;
constexpr uint32_t DS_TILE = 2 * Q_BOX;            // dS, 64 queries x 128 keys bf16, two 64-key boxes
constexpr uint32_t DQ_STAGE = 64 * 64 * 4;    // BW_DQ_BULK: one warpgroup's 64 x 64 fp32 dq half: 16 KB
constexpr int SMEM_BYTES = 2 * KV_TILE + STAGES * STAGE_BYTES + DS_TILE + (DQ_BULK ? 2 * DQ_STAGE : 0) + 1024;

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

__device__ __forceinline__ void bar_consumers(int id) { asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory"); }
__device__ __forceinline__ void bar_warpgroup(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

// Float index of dq[bh][q][d] in the accumulator: [B*H][S][128] rows, or with BW_DQ_BULK blocks of
// [B*H][S_pad / 64][2 halves][64 rows][64 columns] (one warpgroup's bulk reduction is one contiguous 16 KB).
__device__ __forceinline__ size_t dq_index(int bh, int q, int d, int seq, int seq_pad) {
  if (!DQ_BULK) return ((size_t)bh * seq + q) * HD + d;
  return ((((size_t)bh * (seq_pad / BM) + q / BM) * 2 + d / 64) * BM + q % BM) * 64 + d % 64;
}

// ---- kernel 1: D = rowsum(do * o), lse2 = lse log2(e), zero the dq accumulator ----------------------------
__global__ void __launch_bounds__(256) bwd_pre(const __nv_bfloat16* __restrict__ O, const __nv_bfloat16* __restrict__ dO,
                                               const float* __restrict__ L, float* __restrict__ lse2,
                                               float* __restrict__ dd, float* __restrict__ dq_acc, int seq, int seq_pad) {
  const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x % 32, bh = blockIdx.y;
  if (row >= seq_pad) return;
  const size_t prow = (size_t)bh * seq_pad + row;
  if (row >= seq) {
    if (lane == 0) {
      dd[prow] = 0.f;
      lse2[prow] = INFINITY;
    }
    return;
  }
  const size_t r = (size_t)bh * seq + row;
  const uint2 ov = reinterpret_cast<const uint2*>(O + r * HD)[lane];
  const uint2 gv = reinterpret_cast<const uint2*>(dO + r * HD)[lane];
  const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&ov);
  const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 a = __bfloat1622float2(o2[i]), b = __bfloat1622float2(g2[i]);
    acc = fmaf(a.x, b.x, fmaf(a.y, b.y, acc));
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    dd[prow] = acc;
    lse2[prow] = L[r] * 1.4426950408889634f;
  }
  *reinterpret_cast<float4*>(dq_acc + dq_index(bh, row, 4 * lane, seq, seq_pad)) = make_float4(0.f, 0.f, 0.f, 0.f);
}

// ---- kernel 2: the key-block loop -----------------------------------------------------------------------------
// S^T = K_wg q^T (or dP^T = V_wg do^T): 8 k16 steps over the head dimension; the warpgroup's 64 keys are rows
// 64 cw .. 64 cw + 63 of each 128-row K (V) box, q (do) is a 64-row tile of two 64-column boxes.
__device__ __forceinline__ void issue_kq(float (&acc)[32], uint32_t kv_rows, uint32_t q_tile) {
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    ptxrag::wgmma_bf16<64>(acc, ptxrag::make_smem_desc_kmajor(kv_rows + (kk / 4) * KV_BOX + (kk % 4) * 32, ptxrag::SmemSwizzle::B128),
                           ptxrag::make_smem_desc_kmajor(q_tile + (kk / 4) * Q_BOX + (kk % 4) * 32, ptxrag::SmemSwizzle::B128),
                           kk > 0);
  }
}

// acc (64 keys x 128 columns) += A (64 keys x 64 queries, bf16 registers) * tile (64 queries x 128, N-major):
// 4 k16 steps over the queries; the fragment for queries 16kk..16kk+15 is a[4kk..4kk+3].
__device__ __forceinline__ void issue_rs(float (&acc)[64], const uint32_t (&a)[16], uint32_t tile) {
#pragma unroll
  for (int kk = 0; kk < BM / 16; ++kk) {
    const uint32_t f[4] = {a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3]};
    ptxrag::wgmma_bf16_rs<128, 1>(acc, f, ptxrag::make_smem_desc(tile + kk * 2048, Q_BOX, 1024, ptxrag::SmemSwizzle::B128));
  }
}

// dq half (64 queries x 64 columns) = dS (64 queries x 128 keys, K-major, two boxes) * K[:, 64 h .. 64 h + 63]
// (N-major: the 64-column box h of the K tile): 8 k16 steps over the keys.
__device__ __forceinline__ void issue_dq(float (&acc)[32], uint32_t ds_tile, uint32_t k_box) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    ptxrag::wgmma_bf16<64, 0, 1>(acc, ptxrag::make_smem_desc_kmajor(ds_tile + (kk / 4) * Q_BOX + (kk % 4) * 32, ptxrag::SmemSwizzle::B128),
                                 ptxrag::make_smem_desc(k_box + kk * 2048, KV_BOX, 1024, ptxrag::SmemSwizzle::B128), kk > 0);
  }
}

#if BW_DQ_OWN
// BW_DQ_OWN: dq half (64 queries x 64 columns) += dS of this warpgroup's 64 keys (its own K-major box) * those
// keys' rows of the K tile's box h (N-major): 4 k16 steps
__device__ __forceinline__ void issue_dq_own(float (&acc)[32], uint32_t ds_box, uint32_t k_rows_box) {
#pragma unroll
  for (int kk = 0; kk < 64 / 16; ++kk) {
    ptxrag::wgmma_bf16<64, 0, 1>(acc, ptxrag::make_smem_desc_kmajor(ds_box + kk * 32, ptxrag::SmemSwizzle::B128),
                                 ptxrag::make_smem_desc(k_rows_box + kk * 2048, KV_BOX, 1024, ptxrag::SmemSwizzle::B128),
                                 kk > 0);
  }
}
#endif

__global__ void __launch_bounds__(THREADS, 1)
    bwd_main(const __grid_constant__ CUtensorMap qmap, const __grid_constant__ CUtensorMap kmap,
             const __grid_constant__ CUtensorMap vmap, const __grid_constant__ CUtensorMap domap,
             const float* __restrict__ lse2, const float* __restrict__ dd, float* __restrict__ dq_acc,
             __nv_bfloat16* __restrict__ dK, __nv_bfloat16* __restrict__ dV, int seq, int seq_pad, float sl2,
             float scale) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ __align__(8) uint64_t kv_full, full[STAGES], empty[STAGES];
  const uint32_t base = (ptxrag::smem_u32(smem_raw) + 1023) & ~1023u;
  uint8_t* const base_ptr = smem_raw + (base - ptxrag::smem_u32(smem_raw));
  const uint32_t k_tile = base, v_tile = base + KV_TILE;
  const uint32_t ds_tile = base + 2 * KV_TILE + STAGES * STAGE_BYTES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = threadIdx.x / 128;
  const int kb = blockIdx.x, bh = blockIdx.y, k0 = kb * BN;
  const int nq = (seq + BM - 1) / BM;
  const int j0 = CAUSAL ? k0 / BM : 0;  // causal: query blocks before the block's first key see none of it
  const int n_it = nq - j0;
  if (threadIdx.x == 0) {
    ptxrag::mbarrier_init(ptxrag::smem_u32(&kv_full), 1);
    for (int s = 0; s < STAGES; ++s) {
      ptxrag::mbarrier_init(ptxrag::smem_u32(&full[s]), 1);
      ptxrag::mbarrier_init(ptxrag::smem_u32(&empty[s]), 8);
    }
    ptxrag::fence_mbarrier_init();
  }
  __syncthreads();
  auto stage_q = [&](int s) { return base + 2 * KV_TILE + s * STAGE_BYTES; };

  if (wg == 0) {
    ptxrag::setmaxnreg_dec<24>();
    if (warp == 0 && lane == 0) {
      const uint32_t kvb = ptxrag::smem_u32(&kv_full);
      ptxrag::mbarrier_arrive_expect_tx(kvb, 2 * KV_TILE);
      ptxrag::tma_load_3d(k_tile, &kmap, 0, k0, bh, kvb);
      ptxrag::tma_load_3d(k_tile + KV_BOX, &kmap, 64, k0, bh, kvb);
      ptxrag::tma_load_3d(v_tile, &vmap, 0, k0, bh, kvb);
      ptxrag::tma_load_3d(v_tile + KV_BOX, &vmap, 64, k0, bh, kvb);
      for (int it = 0; it < n_it; ++it) {
        const int s = it % STAGES, q0 = (j0 + it) * BM;
        if (it >= STAGES) ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&empty[s]), (it / STAGES - 1) & 1);
        const uint32_t fb = ptxrag::smem_u32(&full[s]), qt = stage_q(s), dot = qt + Q_TILE;
        ptxrag::mbarrier_arrive_expect_tx(fb, STAGE_TX);
        ptxrag::tma_load_3d(qt, &qmap, 0, q0, bh, fb);
        ptxrag::tma_load_3d(qt + Q_BOX, &qmap, 64, q0, bh, fb);
        ptxrag::tma_load_3d(dot, &domap, 0, q0, bh, fb);
        ptxrag::tma_load_3d(dot + Q_BOX, &domap, 64, q0, bh, fb);
        const size_t prow = (size_t)bh * seq_pad + q0;
        ptxrag::bulk_load(dot + Q_TILE, lse2 + prow, ROW_BYTES, fb);
        ptxrag::bulk_load(dot + Q_TILE + ROW_BYTES, dd + prow, ROW_BYTES, fb);
      }
    }
    return;
  }

  ptxrag::setmaxnreg_inc<240>();
  const int cw = wg - 1;                    // consumer warpgroup: keys k0 + 64 cw .. k0 + 64 cw + 63
  const int w4 = warp % 4;
  const int key_r = 16 * w4 + lane / 4;     // fragment rows key_r and key_r + 8 of the warpgroup's 64 keys
  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.f;
  ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&kv_full), 0);
  const uint32_t k_rows = k_tile + cw * 64 * 128, v_rows = v_tile + cw * 64 * 128;
  uint8_t* const ds_mine = base_ptr + (ds_tile - base) + cw * Q_BOX;  // this warpgroup's 64-key box of dS
  const uint32_t dq_stage = ds_tile + DS_TILE + cw * DQ_STAGE;          // BW_DQ_BULK: its dq staging buffer
  const size_t head = (size_t)bh * seq;

  for (int it = 0; it < n_it; ++it) {
    const int s = it % STAGES, q0 = (j0 + it) * BM;
    const uint32_t qt = stage_q(s), dot = qt + Q_TILE;
    const float* rows = reinterpret_cast<const float*>(base_ptr + (dot + Q_TILE - base));  // lse2[64], D[64]
    ptxrag::mbarrier_wait_parity(ptxrag::smem_u32(&full[s]), (it / STAGES) & 1);
    float st[32], dp[32];
    ptxrag::wgmma_fence();
    issue_kq(st, k_rows, qt);
    ptxrag::wgmma_commit_group();
    issue_kq(dp, v_rows, dot);
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<1>();
    ptxrag::wgmma_fence_operands(st);
    // P^T: fragment element i is key key_r + 8((i/2)%2), query 8(i/4) + 2(lane%4) + i%2 of the block
    const bool masked = (CAUSAL && q0 < k0 + BN) || k0 + BN > seq;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int qc = 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
      st[i] = ex2(fmaf(st[i], sl2, -rows[qc]));
      if (masked) {
        const int key = k0 + cw * 64 + key_r + 8 * ((i / 2) % 2);
        if (key >= seq || (CAUSAL && key > q0 + qc)) st[i] = 0.f;
      }
    }
    ptxrag::wgmma_wait_group<0>();
    ptxrag::wgmma_fence_operands(dp);
    uint32_t p[16], ds[16];
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int qc = 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
      dp[i] = st[i] * (dp[i] - rows[BM + qc]);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      p[i] = pack_bf16(st[2 * i], st[2 * i + 1]);
      ds[i] = pack_bf16(dp[2 * i], dp[2 * i + 1]);
    }

    // dS to shared memory before the dv / dk wgmma are issued (the A registers of an in-flight wgmma must not
    // be read), transposed to [query][key] in the 128-byte swizzle TMA would write: row r (query) at r * 128,
    // 16-byte chunk (key / 8) ^ (r % 8), key % 8 inside it
    if (BW_DQ_OWN) bar_warpgroup(7 + cw);  // this warpgroup's previous dq wgmma has finished reading its dS
    else bar_consumers(1);                 // the other warpgroup's previous dq wgmma has finished reading dS
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int c = key_r + 8 * (i % 2);           // key (warpgroup-local) of fragment elements 2i and 2i + 1
      const int r = 8 * (i / 2) + 2 * (lane % 4);  // query of element 2i; element 2i + 1 is query r + 1
      const uint32_t v = ds[i];
      *reinterpret_cast<uint16_t*>(ds_mine + r * 128 + (((c / 8) ^ (r % 8)) * 16) + (c % 8) * 2) = (uint16_t)(v & 0xffffu);
      *reinterpret_cast<uint16_t*>(ds_mine + (r + 1) * 128 + (((c / 8) ^ ((r + 1) % 8)) * 16) + (c % 8) * 2) = (uint16_t)(v >> 16);
    }
    ptxrag::fence_proxy_async_shared_cta();
    if (BW_DQ_OWN) bar_warpgroup(7 + cw);  // this warpgroup's dS box is written
    else bar_consumers(2);                 // both 64-key boxes of dS are written
    float dq[32];
    ptxrag::wgmma_fence();
    issue_rs(dv, p, dot);
    issue_rs(dk, ds, qt);
#if BW_DQ_OWN
    issue_dq_own(dq, ds_tile + cw * Q_BOX, k_tile + cw * 64 * 128);  // columns 0..63 from this warpgroup's keys
    const int dq_col = 0;
#else
    issue_dq(dq, ds_tile, k_tile + cw * KV_BOX);  // columns 64 cw .. 64 cw + 63 from all 128 keys
    const int dq_col = 64 * cw;
#endif
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();  // dv, dk and dq done: q, do and the rows of this stage are no longer read
    ptxrag::wgmma_fence_operands(dq);
    ptxrag::wgmma_fence_operands(dv);
    ptxrag::wgmma_fence_operands(dk);
    if (lane == 0) ptxrag::mbarrier_arrive(ptxrag::smem_u32(&empty[s]));
    // dq fragment element i: query q0 + key_r + 8((i/2)%2) (rows of the m64n64 tile), column col0 + 8(i/4) +
    // 2(lane%4) + i%2
    auto add_dq = [&](int col0) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int q = q0 + key_r + 8 * rr;
        if (q < seq) {
          float* dst = dq_acc + (head + q) * HD + col0 + 2 * (lane % 4);
#pragma unroll
          for (int j = 0; j < 8; ++j)  // one 8-byte red.global.add.v2.f32 per column pair (sm_90)
            atomicAdd(reinterpret_cast<float2*>(dst + 8 * j), make_float2(dq[4 * j + 2 * rr], dq[4 * j + 2 * rr + 1]));
        }
      }
    };
    if constexpr (DQ_BULK) {
      float* stg = reinterpret_cast<float*>(base_ptr + (dq_stage - base));
      if (threadIdx.x % 128 == 0) ptxrag::bulk_wait_group_read<0>();  // the previous reduction has read stg
      asm volatile("bar.sync %0, 128;" ::"r"(3 + cw) : "memory");
#pragma unroll
      for (int i = 0; i < 32; i += 2)
        *reinterpret_cast<float2*>(stg + (key_r + 8 * ((i / 2) % 2)) * 64 + 8 * (i / 4) + 2 * (lane % 4)) =
            make_float2(dq[i], dq[i + 1]);
      ptxrag::fence_proxy_async_shared_cta();  // generic writes, read next by the bulk copy (async proxy)
      asm volatile("bar.sync %0, 128;" ::"r"(3 + cw) : "memory");
      if (threadIdx.x % 128 == 0) {  // rows past seq add zeros (their dS is 0) to rows nobody reads
        ptxrag::bulk_reduce_add_f32(dq_acc + dq_index(bh, q0, dq_col, seq, seq_pad), dq_stage, DQ_STAGE);
        ptxrag::bulk_commit_group();
      }
    } else {
      add_dq(dq_col);
    }
#if BW_DQ_OWN
    ptxrag::wgmma_fence();
    issue_dq_own(dq, ds_tile + cw * Q_BOX, k_tile + KV_BOX + cw * 64 * 128);  // columns 64..127
    ptxrag::wgmma_commit_group();
    ptxrag::wgmma_wait_group<0>();
    ptxrag::wgmma_fence_operands(dq);
    add_dq(64);
#endif
  }

  if (DQ_BULK && threadIdx.x % 128 == 0) ptxrag::bulk_wait_group<0>();  // the last reduction is complete
  // epilogue: dk = scale * acc, dv = acc; fragment element i: key key_r + 8((i/2)%2), column 8(i/4) + 2(lane%4)
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int key = k0 + cw * 64 + key_r + 8 * rr;
    if (key < seq) {
      __nv_bfloat16* krow = dK + (head + key) * HD + 2 * (lane % 4);
      __nv_bfloat16* vrow = dV + (head + key) * HD + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        *reinterpret_cast<__nv_bfloat162*>(krow + 8 * j) =
            __floats2bfloat162_rn(dk[4 * j + 2 * rr] * scale, dk[4 * j + 2 * rr + 1] * scale);
        *reinterpret_cast<__nv_bfloat162*>(vrow + 8 * j) = __floats2bfloat162_rn(dv[4 * j + 2 * rr], dv[4 * j + 2 * rr + 1]);
      }
    }
  }
}

// ---- kernel 3: dq = bf16(scale * accumulator) --------------------------------------------------------------------
__global__ void __launch_bounds__(256) bwd_post(const float* __restrict__ acc, uint2* __restrict__ dQ, size_t n4,
                                                float scale, int seq, int seq_pad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    const size_t row = i / 32;  // bh * seq + q; 32 float4 per 128-column row
    const float4 a = *reinterpret_cast<const float4*>(
        acc + dq_index((int)(row / seq), (int)(row % seq), 4 * (int)(i % 32), seq, seq_pad));
    uint2 o;
    o.x = pack_bf16(a.x * scale, a.y * scale);
    o.y = pack_bf16(a.z * scale, a.w * scale);
    dQ[i] = o;
  }
}

// [B*H, S, 128] bf16 as a 3-D tensor map (innermost first: 128 columns, S rows, B*H heads), 64-column boxes of
// box_rows rows, 128-byte swizzle; rows past S are zero-filled on load.
static int encode_bsd(CUtensorMap* map, void* data, uint64_t seq, uint64_t heads, uint32_t box_rows) {
  const uint64_t dims[3] = {HD, seq, heads};
  const uint64_t strides[2] = {HD * 2, seq * HD * 2};
  const uint32_t box[3] = {64, box_rows, 1};
  return ptxrag::make_tensor_map(map, data, PTXRAG_BF16, 3, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 6 || a->n_outputs != 3) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor &Q = a->inputs[0], &K = a->inputs[1], &V = a->inputs[2], &O = a->inputs[3],
                      &dO = a->inputs[4], &L = a->inputs[5];
  const ptxrag_tensor &dQt = a->outputs[0], &dKt = a->outputs[1], &dVt = a->outputs[2];
  for (const ptxrag_tensor* t : {&Q, &K, &V, &O, &dO, &dQt, &dKt, &dVt})
    if (t->dtype != PTXRAG_BF16 || t->ndim != 4 || !ptxrag_is_contiguous(t)) return PTXRAG_ERR_BAD_ARGS;
  if (L.dtype != PTXRAG_F32 || L.ndim != 3 || !ptxrag_is_contiguous(&L)) return PTXRAG_ERR_BAD_ARGS;
  const long long B = Q.shape[0], H = Q.shape[1], S = Q.shape[2], D = Q.shape[3];
  for (const ptxrag_tensor* t : {&K, &V, &O, &dO, &dQt, &dKt, &dVt})
    if (t->shape[0] != B || t->shape[1] != H || t->shape[2] != S || t->shape[3] != D) return PTXRAG_ERR_BAD_ARGS;
  if (L.shape[0] != B || L.shape[1] != H || L.shape[2] != S) return PTXRAG_ERR_BAD_ARGS;
  if (D != HD || S < 1 || S > (1 << 24) || B * H > 65535) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  const long long BH = B * H, S_pad = (S + BM - 1) / BM * BM;
  const size_t acc_bytes = (size_t)BH * (DQ_BULK ? S_pad : S) * HD * 4, row_bytes = (size_t)BH * S_pad * 4;
  if (a->workspace == nullptr || a->workspace_bytes < acc_bytes + 2 * row_bytes) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  float* dq_acc = (float*)a->workspace;
  float* lse2 = (float*)((char*)a->workspace + acc_bytes);  // 256-byte aligned: acc_bytes is a multiple of 512
  float* dd = lse2 + BH * S_pad;                             // and so is row_bytes (S_pad is a multiple of 64)
  CUtensorMap qm, km, vm, dom;
  int rc = encode_bsd(&qm, Q.data, S, BH, BM);
  if (rc == 0) rc = encode_bsd(&km, K.data, S, BH, BN);
  if (rc == 0) rc = encode_bsd(&vm, V.data, S, BH, BN);
  if (rc == 0) rc = encode_bsd(&dom, dO.data, S, BH, BM);
  if (rc != 0) return rc;
  static bool configured = false;
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(bwd_main, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (e != cudaSuccess) return (int)e;
    configured = true;
  }
  const float scale = 1.f / sqrtf((float)HD);
  const float sl2 = 1.4426950408889634f * scale;  // log2(e) / sqrt(D)
  bwd_pre<<<dim3((unsigned)(S_pad / 8), (unsigned)BH), 256, 0, a->stream>>>(
      (const __nv_bfloat16*)O.data, (const __nv_bfloat16*)dO.data, (const float*)L.data, lse2, dd, dq_acc, (int)S,
      (int)S_pad);
  bwd_main<<<dim3((unsigned)((S + BN - 1) / BN), (unsigned)BH), THREADS, SMEM_BYTES, a->stream>>>(
      qm, km, vm, dom, lse2, dd, dq_acc, (__nv_bfloat16*)dKt.data, (__nv_bfloat16*)dVt.data, (int)S, (int)S_pad, sl2,
      scale);
  const size_t n4 = (size_t)BH * S * HD / 4;
  bwd_post<<<1056, 256, 0, a->stream>>>(dq_acc, (uint2*)dQt.data, n4, scale, (int)S, (int)S_pad);
  return (int)cudaGetLastError();
}
