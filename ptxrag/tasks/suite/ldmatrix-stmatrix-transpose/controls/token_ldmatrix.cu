// Control (adversarial, class 5, token use): only CTA (0, 0) moves its tile with ldmatrix.trans / stmatrix;
// every other CTA transposes its shared tile with plain scalar reads and writes. Correct, and both instructions
// execute (64 thread instructions each per call against the reference's 524288 at 2048 x 2048): the execution
// minimum must fail it.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int T = 64, PITCH = T + 8, THREADS = 256;

__global__ void __launch_bounds__(THREADS) transpose(const uint16_t* __restrict__ x, uint16_t* __restrict__ y,
                                                     int rows, int cols) {
  __shared__ __align__(16) uint16_t tin[T * PITCH];
  __shared__ __align__(16) uint16_t tout[T * PITCH];
  const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = threadIdx.x + i * THREADS;  // 512 vectors of 8 bf16: row q / 8, column (q % 8) * 8
    const int r = q / 8, c = (q % 8) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows && c0 + c < cols) v = __ldg(reinterpret_cast<const uint4*>(x + (size_t)(r0 + r) * cols + c0 + c));
    *reinterpret_cast<uint4*>(tin + r * PITCH + c) = v;
  }
  __syncthreads();
  if (blockIdx.x == 0 && blockIdx.y == 0) {  // the token: one CTA of the grid uses ldmatrix / stmatrix
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const int op = warp * 2 + g;           // 16 groups of four 8x8 blocks per tile
      const int bi = op / 2, bj = (op % 2) * 4;  // input blocks (bi, bj + k), k = 0..3
      const int k = lane / 8, rr = lane % 8;     // lanes 8k..8k+7 give the row addresses of block k
      uint32_t f0, f1, f2, f3;
      ptxrag::ldmatrix_x4_trans(ptxrag::smem_u32(tin + (bi * 8 + rr) * PITCH + (bj + k) * 8), f0, f1, f2, f3);
      ptxrag::stmatrix_x4(ptxrag::smem_u32(tout + ((bj + k) * 8 + rr) * PITCH + bi * 8), f0, f1, f2, f3);
    }
  } else {
    for (int e = threadIdx.x; e < T * T; e += THREADS) {  // plain transpose: tout[j][i] = tin[i][j]
      const int j = e / T, i = e % T;
      tout[j * PITCH + i] = tin[i * PITCH + j];
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = threadIdx.x + i * THREADS;  // output row c0 + q / 8 (an input column), input rows r0 + (q % 8) * 8
    const int j = q / 8, r = (q % 8) * 8;
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
  dim3 grid((unsigned)((cols + T - 1) / T), (unsigned)((rows + T - 1) / T));
  transpose<<<grid, THREADS, 0, a->stream>>>((const uint16_t*)x.data, (uint16_t*)y.data, (int)rows, (int)cols);
  return (int)cudaGetLastError();
}
