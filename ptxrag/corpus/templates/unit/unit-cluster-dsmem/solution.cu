// Unit kernel: one 4-CTA cluster per group; ranks 1..3 hand their partials to rank 0 over distributed shared
// memory in three different ways (st.async, bulk copy to a peer, remote arrive + ld.shared::cluster).
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int CL = 4, CHUNK = 1024, THREADS = 256;

__device__ __forceinline__ void block_reduce(float s, float mx, float mn, float* red, float out[3]) {
  for (int o = 16; o > 0; o /= 2) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
  }
  const int w = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) { red[w * 3] = s; red[w * 3 + 1] = mx; red[w * 3 + 2] = mn; }
  __syncthreads();
  if (threadIdx.x == 0) {
    out[0] = red[0]; out[1] = red[1]; out[2] = red[2];
    for (int i = 1; i < THREADS / 32; ++i) {
      out[0] += red[i * 3];
      out[1] = fmaxf(out[1], red[i * 3 + 1]);
      out[2] = fminf(out[2], red[i * 3 + 2]);
    }
  }
}

__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS)
    group_stats(const float* __restrict__ x, float* __restrict__ y_sum, float* __restrict__ y_max,
                float* __restrict__ y_min) {
  __shared__ float red[3 * THREADS / 32];
  __shared__ float sums[CL];                  // filled by st.async from ranks 1..3 (rank 0 only)
  __shared__ __align__(16) float recs[CL][4];  // 16-byte records filled by bulk copies (rank 0 only)
  __shared__ __align__(16) float my_rec[4];    // this CTA's record: {max, 0, 0, 0}
  __shared__ float my_min;                     // read remotely by rank 0
  __shared__ __align__(8) uint64_t bar_sum, bar_max, bar_min;
  const uint32_t rank = ptxrag::cluster_ctarank();
  const long long g = blockIdx.x / CL;
  const uint32_t b_sum = ptxrag::smem_u32(&bar_sum), b_max = ptxrag::smem_u32(&bar_max),
                 b_min = ptxrag::smem_u32(&bar_min);
  if (threadIdx.x == 0 && rank == 0) {
    ptxrag::mbarrier_init(b_sum, 1);       // rank 0's arrive.expect_tx; the bytes come from st.async
    ptxrag::mbarrier_init(b_max, 1);       // rank 0's arrive.expect_tx; the bytes come from bulk copies
    ptxrag::mbarrier_init(b_min, CL - 1);  // one remote arrive per peer
    ptxrag::fence_mbarrier_init();
  }
  ptxrag::cluster_sync();  // rank 0's barriers are initialised and every CTA of the cluster is running

  const float* p = x + g * (CL * CHUNK) + rank * CHUNK;
  float s = 0.f, mx = -INFINITY, mn = INFINITY;
  for (int i = threadIdx.x; i < CHUNK; i += THREADS) {
    const float v = p[i];
    s += v; mx = fmaxf(mx, v); mn = fminf(mn, v);
  }
  float part[3];
  block_reduce(s, mx, mn, red, part);

  if (threadIdx.x == 0) {
    if (rank != 0) {
      // sum: asynchronous store into rank 0's sums[rank], complete_tx(4) on rank 0's bar_sum
      ptxrag::st_async_f32(ptxrag::mapa_shared(ptxrag::smem_u32(&sums[rank]), 0), part[0],
                           ptxrag::mapa_shared(b_sum, 0));
      // max: 16-byte bulk copy of my record into rank 0's recs[rank], complete_tx(16) on rank 0's bar_max
      my_rec[0] = part[1]; my_rec[1] = 0.f; my_rec[2] = 0.f; my_rec[3] = 0.f;
      ptxrag::fence_proxy_async_shared_cta();  // my_rec written by this thread, read by the copy engine
      ptxrag::bulk_copy_to_cluster(ptxrag::mapa_shared(ptxrag::smem_u32(recs[rank]), 0), ptxrag::smem_u32(my_rec), 16,
                                   ptxrag::mapa_shared(b_max, 0));
      // min: stays here; a release-cluster arrive on rank 0's bar_min publishes it
      my_min = part[2];
      ptxrag::mbarrier_arrive_cluster(ptxrag::mapa_shared(b_min, 0));
    } else {
      ptxrag::mbarrier_arrive_expect_tx(b_sum, 4 * (CL - 1));
      ptxrag::mbarrier_arrive_expect_tx(b_max, 16 * (CL - 1));
      ptxrag::mbarrier_wait_parity_cluster(b_sum, 0);
      ptxrag::mbarrier_wait_parity_cluster(b_max, 0);
      ptxrag::mbarrier_wait_parity_cluster(b_min, 0);
      float ts = part[0], tmx = part[1], tmn = part[2];
      for (uint32_t r = 1; r < CL; ++r) {
        ts += sums[r];
        tmx = fmaxf(tmx, recs[r][0]);
        tmn = fminf(tmn, ptxrag::ld_shared_cluster_f32(ptxrag::mapa_shared(ptxrag::smem_u32(&my_min), r)));
      }
      y_sum[g] = ts; y_max[g] = tmx; y_min[g] = tmn;
    }
  }
  ptxrag::cluster_sync();  // peers keep their shared memory (my_min, my_rec) alive until rank 0 is done
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 3) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  if (x.dtype != PTXRAG_F32 || x.ndim != 2 || x.shape[1] != CL * CHUNK || !ptxrag_is_contiguous(&x))
    return PTXRAG_ERR_BAD_ARGS;
  const long long groups = x.shape[0];
  if (groups == 0) return 0;
  group_stats<<<(unsigned)(groups * CL), THREADS, 0, a->stream>>>((const float*)x.data, (float*)a->outputs[0].data,
                                                                   (float*)a->outputs[1].data,
                                                                   (float*)a->outputs[2].data);
  return (int)cudaGetLastError();
}
