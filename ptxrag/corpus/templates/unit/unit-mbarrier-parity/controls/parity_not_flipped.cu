// NEGATIVE CONTROL (must fail correctness): the wait parity is never flipped.
// Unit kernel: one mbarrier (count = 256 threads) reused once per row; the wait parity flips every row.
// Double-buffered rows: a thread rewrites buffer (r % 2) only after the wait of row r + 1, which every thread
// reaches only after reading row r, so the barrier alone orders all shared-memory reuse.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int COLS = 256;

__global__ void __launch_bounds__(COLS) neighbour_sum(const float* __restrict__ x, float* __restrict__ y,
                                                      long long rows) {
  __shared__ float buf[2][COLS];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = ptxrag::smem_u32(&bar);
  const int t = threadIdx.x;
  if (t == 0) ptxrag::mbarrier_init(b, COLS);
  __syncthreads();
  uint32_t phase = 0;
  int slot = 0;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    // The last warp is made late on purpose: with a correct barrier the result cannot depend on it, and a
    // broken wait (see controls/) reliably reads this warp's elements before they are written.
    if (t >= COLS - 32) __nanosleep(1000);
    buf[slot][t] = x[r * COLS + t];
    ptxrag::mbarrier_arrive(b);  // release: my write is visible to whoever waits on this phase
    ptxrag::mbarrier_wait_parity(b, phase);
    // BUG: parity not flipped; from the second phase on, waiting on parity 0 asks about the phase
    // before the current one, which try_wait reports complete at once.
    y[r * COLS + t] = buf[slot][t] + buf[slot][(t + 1) % COLS];
    slot ^= 1;
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_F32 || x.ndim != 2 || x.shape[1] != COLS || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0];
  int sms = 132;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long blocks = rows < (long long)sms * 4 ? rows : (long long)sms * 4;  // many rows (phases) per CTA
  if (blocks < 1) return 0;
  neighbour_sum<<<(int)blocks, COLS, 0, a->stream>>>((const float*)x.data, (float*)y.data, rows);
  return (int)cudaGetLastError();
}
