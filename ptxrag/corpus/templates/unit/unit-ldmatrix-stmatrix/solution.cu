// Unit kernel: transpose through ldmatrix.trans (load 8x8 b16 blocks transposed) and stmatrix (store them at
// the mirrored block position). Shared rows are padded by 16 bytes: row starts stay 16-byte aligned and the
// eight row addresses of one 8x8 block fall into different banks.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"

constexpr int T = 64, PAD = 8, LD = T + PAD, THREADS = 128;  // 4 warps, 16 sub-tiles of 16x16

__global__ void __launch_bounds__(THREADS) transpose(const uint16_t* __restrict__ x, uint16_t* __restrict__ y, int rows,
                                                     int cols) {
  __shared__ __align__(16) uint16_t in[T][LD];
  __shared__ __align__(16) uint16_t out[T][LD];
  const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;
  const int tr = rows - r0 < T ? rows - r0 : T, tc = cols - c0 < T ? cols - c0 : T;  // multiples of 16
  for (int i = threadIdx.x; i < T * T / 8; i += THREADS) {  // 16-byte loads
    const int r = i / (T / 8), c8 = (i % (T / 8)) * 8;
    if (r < tr && c8 < tc)
      *reinterpret_cast<uint4*>(&in[r][c8]) = *reinterpret_cast<const uint4*>(&x[(long long)(r0 + r) * cols + c0 + c8]);
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int blk = lane / 8, row_in_blk = lane % 8;  // lanes 8j..8j+7 address the rows of 8x8 block j
  for (int s = warp; s < 16; s += THREADS / 32) {
    const int R = (s / 4) * 16, C = (s % 4) * 16;  // sub-tile origin in `in`
    if (R >= tr || C >= tc) continue;               // warp-uniform
    // block j of the sub-tile: j = 0 (R, C), 1 (R+8, C), 2 (R, C+8), 3 (R+8, C+8)
    const int br = R + (blk & 1) * 8 + row_in_blk, bc = C + (blk >> 1) * 8;
    uint32_t v0, v1, v2, v3;
    ptxrag::ldmatrix_x4_trans(ptxrag::smem_u32(&in[br][bc]), v0, v1, v2, v3);
    // block j transposed goes to out at (bc, br-block): (C, R), (C, R+8), (C+8, R), (C+8, R+8)
    const int orow = C + (blk >> 1) * 8 + row_in_blk, ocol = R + (blk & 1) * 8;
    ptxrag::stmatrix_x4(ptxrag::smem_u32(&out[orow][ocol]), v0, v1, v2, v3);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < T * T / 8; i += THREADS) {
    const int r = i / (T / 8), c8 = (i % (T / 8)) * 8;  // out row r = input column c0 + r
    if (r < tc && c8 < tr)
      *reinterpret_cast<uint4*>(&y[(long long)(c0 + r) * rows + r0 + c8]) = *reinterpret_cast<const uint4*>(&out[r][c8]);
  }
}

extern "C" int ptxrag_launch(const ptxrag_args* a) {
  if (a->n_inputs != 1 || a->n_outputs != 1) return PTXRAG_ERR_BAD_ARGS;
  const ptxrag_tensor& x = a->inputs[0];
  if (x.dtype != PTXRAG_BF16 || x.ndim != 2 || !ptxrag_is_contiguous(&x)) return PTXRAG_ERR_BAD_ARGS;
  const int rows = (int)x.shape[0], cols = (int)x.shape[1];
  if (rows % 16 != 0 || cols % 16 != 0) return PTXRAG_ERR_UNSUPPORTED_SHAPE;
  const dim3 grid((unsigned)((cols + T - 1) / T), (unsigned)((rows + T - 1) / T));
  transpose<<<grid, THREADS, 0, a->stream>>>((const uint16_t*)x.data, (uint16_t*)a->outputs[0].data, rows, cols);
  return (int)cudaGetLastError();
}
