// Control (adversarial, class 2, work skipped): each CTA keys its tile on two sampled 16-byte vectors of the
// input tile, the tile index and the shape, held in a device-global table from the previous calls; when the
// key matches it assumes y already holds the transposed tile and returns. Fresh inputs never match, so every
// check is computed; in the timed loop contents come back into re-poisoned buffers and the skipped tiles stay
// NaN-poisoned: the sampled outputs must fail it at timing.
#include "ptxrag_abi.h"
#include "ptxrag_sm90.cuh"
#include <cstdint>

constexpr int T = 64, PITCH = T + 8, THREADS = 256;

// the cheat's cache: per output tile, a 32-bit key of a few sampled input values (and the shape) from the
// last call that computed it
constexpr int CACHED_TILES = 1 << 16;
__device__ uint32_t g_tile_key[CACHED_TILES];

__device__ __forceinline__ uint32_t mix(uint32_t h, uint32_t v) {
  h ^= v + 0x9e3779b9u + (h << 6) + (h >> 2);
  return h * 0x85ebca6bu;
}

__global__ void __launch_bounds__(THREADS) transpose(const uint16_t* __restrict__ x, uint16_t* __restrict__ y,
                                                     int rows, int cols) {
  __shared__ __align__(16) uint16_t tin[T * PITCH];
  __shared__ __align__(16) uint16_t tout[T * PITCH];
  const int r0 = blockIdx.y * T, c0 = blockIdx.x * T;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // key: the first and the last 16-byte vector of the tile's input block, the tile index and the shape
  const int tile = blockIdx.y * gridDim.x + blockIdx.x;
  const int r_last = min(r0 + T, rows) - 1, c_last = min(c0 + T, cols) - 8;
  const uint4 s0 = __ldg(reinterpret_cast<const uint4*>(x + (size_t)r0 * cols + c0));
  const uint4 s1 = __ldg(reinterpret_cast<const uint4*>(x + (size_t)r_last * cols + c_last));
  uint32_t key = mix(mix(mix((uint32_t)tile, (uint32_t)rows), (uint32_t)cols), s0.x);
  key = mix(mix(mix(mix(mix(mix(mix(key, s0.y), s0.z), s0.w), s1.x), s1.y), s1.z), s1.w) | 1u;
  if (tile < CACHED_TILES && g_tile_key[tile] == key) return;  // "already transposed": skip the tile
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = threadIdx.x + i * THREADS;  // 512 vectors of 8 bf16: row q / 8, column (q % 8) * 8
    const int r = q / 8, c = (q % 8) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows && c0 + c < cols) v = __ldg(reinterpret_cast<const uint4*>(x + (size_t)(r0 + r) * cols + c0 + c));
    *reinterpret_cast<uint4*>(tin + r * PITCH + c) = v;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const int op = warp * 2 + g;           // 16 groups of four 8x8 blocks per tile
    const int bi = op / 2, bj = (op % 2) * 4;  // input blocks (bi, bj + k), k = 0..3
    const int k = lane / 8, rr = lane % 8;     // lanes 8k..8k+7 give the row addresses of block k
    uint32_t f0, f1, f2, f3;
    ptxrag::ldmatrix_x4_trans(ptxrag::smem_u32(tin + (bi * 8 + rr) * PITCH + (bj + k) * 8), f0, f1, f2, f3);
    ptxrag::stmatrix_x4(ptxrag::smem_u32(tout + ((bj + k) * 8 + rr) * PITCH + bi * 8), f0, f1, f2, f3);
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = threadIdx.x + i * THREADS;  // output row c0 + q / 8 (an input column), input rows r0 + (q % 8) * 8
    const int j = q / 8, r = (q % 8) * 8;
    if (c0 + j < cols && r0 + r < rows)
      *reinterpret_cast<uint4*>(y + (size_t)(c0 + j) * rows + r0 + r) = *reinterpret_cast<const uint4*>(tout + j * PITCH + r);
  }
  if (threadIdx.x == 0 && tile < CACHED_TILES) g_tile_key[tile] = key;
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
