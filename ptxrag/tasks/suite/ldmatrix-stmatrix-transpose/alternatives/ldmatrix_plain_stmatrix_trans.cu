// Alternative (honest): structured differently from solution.cu. 32 x 32 tiles and 128 threads (4 warps) per
// CTA, and the transposition done on the store side: a non-transposing ldmatrix.x4 reads four 8x8 input
// blocks, and stmatrix.x4.trans writes each of them transposed as an output block. Warp w takes input row
// block w (blocks (w, 0..3)) and writes output blocks (0..3, w). Shared tiles have a pitch of 40 bf16 (80 bytes),
// so the eight 16-byte rows one ldmatrix/stmatrix touches land in distinct banks. One 16-byte vector per
// thread in and out, guarded per vector (rows and cols are multiples of 8).
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int T = 32, PITCH = T + 8, THREADS = 128;

__global__ void __launch_bounds__(THREADS) transpose(const uint16_t* __restrict__ x, uint16_t* __restrict__ y,
                                                     int rows, int cols) {
  __shared__ __align__(16) uint16_t tin[T * PITCH];
  __shared__ __align__(16) uint16_t tout[T * PITCH];
  const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  {
    const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 8;  // 128 vectors: row q / 4, column (q % 4) * 8
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows && c0 + c < cols) v = __ldg(reinterpret_cast<const uint4*>(x + (size_t)(r0 + r) * cols + c0 + c));
    *reinterpret_cast<uint4*>(tin + r * PITCH + c) = v;
  }
  __syncthreads();
  {
    const int bi = warp;                    // input row block of this warp
    const int k = lane / 8, rr = lane % 8;  // lanes 8k..8k+7 address the rows of block k
    uint32_t f0, f1, f2, f3;
    // fragment k of lane l: input block (bi, k), row l / 4, columns 2 (l % 4) .. +1
    ptxrag::ldmatrix_x4(ptxrag::smem_u32(tin + (bi * 8 + rr) * PITCH + k * 8), f0, f1, f2, f3);
    // .trans: fragment element (r, c) of block k lands at row c, column r of output block (k, bi), i.e.
    // tout[k * 8 + c][bi * 8 + r] = tin[bi * 8 + r][k * 8 + c]
    ptxrag::stmatrix_x4_trans(ptxrag::smem_u32(tout + (k * 8 + rr) * PITCH + bi * 8), f0, f1, f2, f3);
  }
  __syncthreads();
  {
    const int j = threadIdx.x / 4, r = (threadIdx.x % 4) * 8;  // output row c0 + j, input rows r0 + r .. + 7
    if (c0 + j < cols && r0 + r < rows)
      *reinterpret_cast<uint4*>(y + (size_t)(c0 + j) * rows + r0 + r) = *reinterpret_cast<const uint4*>(tout + j * PITCH + r);
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  const ptxrag_tensor& y = a->outputs[0];
  if (x.dtype != PTXRAG_BF16 || y.dtype != PTXRAG_BF16 || x.ndim != 2 || y.ndim != 2 || !ptxrag_is_contiguous(&x) ||
      !ptxrag_is_contiguous(&y))
    return PTXRAG_ERR_BAD_ARGS;
  const long long rows = x.shape[0], cols = x.shape[1];
  if (y.shape[0] != cols || y.shape[1] != rows) return PTXRAG_ERR_BAD_ARGS;
  if (rows % 8 != 0 || cols % 8 != 0 || rows > INT32_MAX || cols > INT32_MAX || (rows + T - 1) / T > 65535)
    return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  if (rows == 0 || cols == 0) return 0;
  dim3 grid((unsigned)((cols + T - 1) / T), (unsigned)((rows + T - 1) / T));
  transpose<<<grid, THREADS, 0, a->stream>>>((const uint16_t*)x.data, (uint16_t*)y.data, (int)rows, (int)cols);
  return (int)cudaGetLastError();
}
