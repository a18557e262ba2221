// Instantiates every wrapper of ptxrag_sm90.cuh in one translation unit, so a CI test can prove the whole header
// compiles for sm_90a and that each instruction reaches SASS (tests/test_corpus_templates.py). Not a sandbox
// candidate: kernels here are never launched, their results are written out only to keep the code alive.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

#include <cuda_bf16.h>

using namespace ptxrag;

extern "C" __global__ void all_mbarrier_bulk(const float* src, float* dst, float* acc, int32_t* iacc, int n,
                                             uint64_t* out) {
  __shared__ __align__(128) float buf[1024];
  __shared__ __align__(8) uint64_t bar[2];
  const uint32_t b0 = smem_u32(&bar[0]), b1 = smem_u32(&bar[1]), s = smem_u32(buf);
  if (threadIdx.x == 0) {
    mbarrier_init(b0, 1);
    mbarrier_init(b1, blockDim.x);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    bulk_prefetch_l2(src, n * 4);
    mbarrier_arrive_expect_tx(b0, n * 4);
    bulk_load(s, src, n * 4, b0);
  }
  mbarrier_wait_parity(b0, 0);
  uint64_t st = mbarrier_arrive(b1);
  while (!mbarrier_try_wait(b1, st)) {
  }
  if (threadIdx.x == 0) {
    mbarrier_expect_tx(b0, 16);
    uint64_t st2 = mbarrier_arrive_count(b0, 1);
    out[1] = st2;
  }
  const bool ok = mbarrier_try_wait_parity(b1, 0);
  buf[threadIdx.x] *= 2.f;
  fence_proxy_async_shared_cta();
  fence_proxy_async_global();
  fence_proxy_async();
  fence_acq_rel_cta();
  fence_acq_rel_gpu();
  __syncthreads();
  if (threadIdx.x == 0) {
    bulk_store(dst, s, n * 4);
    bulk_reduce_add_f32(acc, s, n * 4);
    bulk_reduce_add_u32(reinterpret_cast<uint32_t*>(iacc), s, 16);
    bulk_reduce_add_s32(iacc, s, 16);
    bulk_reduce_min_s32(iacc, s, 16);
    bulk_reduce_max_s32(iacc, s, 16);
    bulk_reduce_add_bf16(iacc, s, 16);
    bulk_commit_group();
    bulk_wait_group_read<0>();
    bulk_wait_group<0>();
    mbarrier_inval(b1);
  }
  PipelineState<2> ps;
  ps.advance();
  out[0] = ok + ps.phase + ps.index;
}

extern "C" __global__ void __cluster_dims__(2, 1, 1)
    all_tma_cluster(const __grid_constant__ CUtensorMap m1, const __grid_constant__ CUtensorMap m2,
                    const __grid_constant__ CUtensorMap m3, float* out) {
  __shared__ __align__(1024) float tile[32 * 32];
  __shared__ __align__(8) uint64_t bar;
  __shared__ float val;
  const uint32_t b = smem_u32(&bar), t = smem_u32(tile);
  const uint32_t rank = cluster_ctarank();
  if (threadIdx.x == 0) {
    prefetch_tensormap(&m2);
    tma_prefetch_2d(&m2, 0, 0);
    val = (float)rank;
    mbarrier_init(b, 1);
    fence_mbarrier_init();
  }
  fence_acq_rel_cluster();
  cluster_arrive_relaxed();
  cluster_wait();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(b, 4096 * 4);
    tma_load_1d(t, &m1, 0, b);
    tma_load_2d(t, &m2, 0, 0, b);
    tma_load_3d(t, &m3, 0, 0, 0, b);
    if (rank == 0) tma_load_2d_multicast(t, &m2, 0, 32, b, 0x3);
    bulk_load_multicast(t, out, 256, b, 0x3);
  }
  mbarrier_wait_parity_cluster(b, 0);
  const uint32_t remote = mapa_shared(smem_u32(&val), rank ^ 1);
  const float other = ld_shared_cluster_f32(remote);
  const uint32_t other_u = ld_shared_cluster_u32(remote);
  st_shared_cluster_f32(remote, other + 1.f);
  st_shared_cluster_u32(remote, other_u + 1);
  if (threadIdx.x == 0) {
    mbarrier_arrive_cluster(mapa_shared(b, rank ^ 1));
    bulk_copy_to_cluster(mapa_shared(t, rank ^ 1), t, 256, mapa_shared(b, rank ^ 1));
    st_async_f32(remote, other, mapa_shared(b, rank ^ 1));
    st_async_u32(remote, other_u, mapa_shared(b, rank ^ 1));
  }
  fence_proxy_async_shared_cta();
  cluster_sync();
  cluster_arrive();
  cluster_wait();
  if (threadIdx.x == 0) {
    tma_store_1d(&m1, 0, t);
    tma_store_2d(&m2, 0, 0, t);
    tma_store_3d(&m3, 0, 0, 0, t);
    tma_reduce_add_2d(&m2, 0, 0, t);
    bulk_commit_group();
    bulk_wait_group<0>();
  }
  out[threadIdx.x] = tile[threadIdx.x] + other + cluster_num_ctas() + cluster_ctaid_x() + cluster_ctaid_y() +
                     cluster_id_x();
}

template <int N>
__device__ void run_wgmma(const void* a, const void* b, float* out) {
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  const uint64_t da = make_smem_desc_kmajor(smem_u32(a), SmemSwizzle::B128);
  const uint64_t db = make_smem_desc(smem_u32(b), 16, 8 * smem_swizzle_bytes(SmemSwizzle::B64), SmemSwizzle::B64);
  const uint32_t ar[4] = {pack_bf16x2(threadIdx.x, 1.f), pack_bf16x2(2.f, 3.f), threadIdx.x, 7u};  // register A
  wgmma_fence();
  wgmma_bf16<N>(d, da, db, 0);
  wgmma_bf16<N, 0, 1>(d, smem_desc_advance(da, 32), db, 1);
  wgmma_f16<N, 1, 0>(d, da, make_smem_desc(smem_u32(b), 128, 256, SmemSwizzle::None), 1);
  wgmma_e4m3<N>(d, da, make_smem_desc(smem_u32(b), 16, 256, SmemSwizzle::B32), 1);
  wgmma_bf16_rs<N, 1>(d, ar, make_smem_desc(smem_u32(b), 16384, 1024, SmemSwizzle::B128), 1);
  wgmma_f16_rs<N>(d, ar, db, 1);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  wgmma_fence_operands(d);
  wgmma_fence_operand(d[0]);
  const int t = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) out[wgmma_acc_row(t, i) * N + wgmma_acc_col(t, i)] = d[i];
}

extern "C" __global__ void __launch_bounds__(128) all_wgmma(float* out) {
  extern __shared__ __align__(1024) uint8_t smem[];
  fence_proxy_async_shared_cta();
  __syncthreads();
  run_wgmma<8>(smem, smem + 16384, out);
  run_wgmma<16>(smem, smem + 16384, out);
  run_wgmma<32>(smem, smem + 16384, out);
  run_wgmma<64>(smem, smem + 16384, out);
  run_wgmma<96>(smem, smem + 16384, out);
  run_wgmma<128>(smem, smem + 16384, out);
  run_wgmma<192>(smem, smem + 16384, out);
  run_wgmma<256>(smem, smem + 16384, out);
  wgmma_wait_group<1>();
}

extern "C" __global__ void all_warp(const int* in, int* out, __nv_bfloat16* mat) {
  __shared__ __align__(16) uint16_t s[4 * 64];
  const int v = in[threadIdx.x];
  const uint32_t lane = lane_id();
  int r = redux_add_s32(v) + redux_min_s32(v) + redux_max_s32(v);
  r += redux_add_u32(v) + redux_min_u32(v) + redux_max_u32(v) + redux_and_b32(v) + redux_or_b32(v) + redux_xor_b32(v);
  if (elect_sync()) r += 1;
  r += elect_sync_lane() + warp_idx() + warpgroup_idx();
  const uint32_t row = smem_u32(s) + (lane % 32) * 16;
  stmatrix_x1(row, pack_bf16x2(v, r));
  stmatrix_x2(row, v, r);
  stmatrix_x4(row, v, r, v + 1, r + 1);
  stmatrix_x4_trans(row, v, r, v + 2, r + 2);
  __syncwarp();
  uint32_t a0 = ldmatrix_x1(row), a1, a2, a3, a4, a5, a6, a7, a8, a9;
  ldmatrix_x2(row, a1, a2);
  ldmatrix_x4(row, a3, a4, a5, a6);
  ldmatrix_x4_trans(row, a7, a8, a9, a0);
  out[threadIdx.x] = r + a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;
  mat[threadIdx.x] = __float2bfloat16(static_cast<float>(r));
}

extern "C" __global__ void __launch_bounds__(384, 1) all_control(const float* x, float* y) {
  griddep_wait();
  if (warpgroup_idx() == 0) {
    setmaxnreg_dec<40>();
    y[threadIdx.x] = x[threadIdx.x];
  } else {
    setmaxnreg_inc<232>();
    y[threadIdx.x] = 2.f * x[threadIdx.x];
  }
  griddep_launch_dependents();
}

// Host helpers: referenced so they compile (never called here).
extern "C" int all_host(const ptxrag_args* a, CUtensorMap* m) {
  const ptxrag_tensor& x = a->inputs[0];
  int rc = make_tensor_map_2d(m, x.data, x.dtype, x.shape[0], x.shape[1], x.strides[0], 64, 64,
                              CU_TENSOR_MAP_SWIZZLE_128B);
  const uint64_t dims[3] = {64, 64, 2}, strides[2] = {256, 256 * 64};
  const uint32_t box[3] = {64, 8, 1};
  rc |= make_tensor_map(m, x.data, PTXRAG_F32, 3, dims, strides, box);
  CUtensorMapDataType t;
  rc |= tensor_map_encoder() == nullptr ? PTXRAG_ERR_DRIVER_ENTRY : 0;
  return rc | (tensor_map_dtype(PTXRAG_BF16, &t) ? 0 : 1) | (int)swizzle_span_bytes(CU_TENSOR_MAP_SWIZZLE_64B);
}
