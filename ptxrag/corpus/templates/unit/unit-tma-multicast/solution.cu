// Unit kernel: clusters of 2 CTAs; each CTA multicasts one 32x64 half-band to both CTAs, so each receives the
// whole 64x64 band while global memory is read once.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int HR = 32, BC = 64, THREADS = 256;

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(THREADS)
    pair_sum(const __grid_constant__ CUtensorMap xmap, float* __restrict__ y, int rows, int cols) {
  __shared__ __align__(128) float halves[2][HR * BC];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar);
  const uint32_t rank = ptxrag::cluster_ctarank();  // 0 or 1
  const int band = blockIdx.x / 2, c0 = blockIdx.y * BC;
  if (threadIdx.x == 0) {
    ptxrag::mbarrier_init(b, 1);
    ptxrag::fence_mbarrier_init();  // the peer's multicast will signal this barrier
  }
  ptxrag::cluster_sync();  // both barriers initialised (and both CTAs running) before any multicast
  if (threadIdx.x == 0) {
    ptxrag::mbarrier_arrive_expect_tx(b, 2 * HR * BC * 4);  // my half and the peer's half land here
    ptxrag::tma_load_2d_multicast(ptxrag::smem_u32(halves[rank]), &xmap, c0, band * 2 * HR + (int)rank * HR, b, 0x3);
  }
  ptxrag::mbarrier_wait_parity(b, 0);
  const int r_base = band * 2 * HR + (int)rank * HR;
  for (int i = threadIdx.x; i < HR * BC; i += THREADS) {
    const int r = r_base + i / BC, c = c0 + i % BC;
    if (r < rows && c < cols) y[(long long)r * cols + c] = halves[0][i] + halves[1][i];
  }
  ptxrag::cluster_sync();  // no CTA exits while its peer's multicast may still target its shared memory
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  if (x.dtype != PTXRAG_F32 || x.ndim != 2 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const int rows = (int)x.shape[0], cols = (int)x.shape[1];
  if ((cols * 4) % 16 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  alignas(64) CUtensorMap xmap;
  const int rc = ptxrag::make_tensor_map_2d(&xmap, x.data, PTXRAG_F32, rows, cols, cols, HR, BC);
  if (rc != 0) return rc;
  const dim3 grid((unsigned)(2 * ((rows + 2 * HR - 1) / (2 * HR))), (unsigned)((cols + BC - 1) / BC));
  pair_sum<<<grid, THREADS, 0, a->stream>>>(xmap, (float*)a->outputs[0].data, rows, cols);
  return (int)cudaGetLastError();
}
