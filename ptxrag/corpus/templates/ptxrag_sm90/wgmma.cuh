// ptxrag_sm90/wgmma.cuh: warpgroup-level asynchronous MMA (PTX ISA 9.7.15), sm_90a only.
//
// A warpgroup is 4 consecutive warps (threads 128*i .. 128*i+127) and every wgmma instruction is executed by
// all 128 threads with identical arguments (.sync.aligned). One k-step of a tile:
//   ptxrag::wgmma_fence();                                     // order earlier register accesses (9.7.15.7.1)
//   ptxrag::wgmma_bf16<128>(acc, desc_a, desc_b, scale_d);     // one or more mma_async (9.7.15.5.2)
//   ptxrag::wgmma_commit_group();                              // close the group (9.7.15.7.2)
//   ptxrag::wgmma_wait_group<0>();                             // wait before reading acc or reusing smem
// Shared memory written by ordinary stores must be fenced (fence_proxy_async_shared_cta) and synchronised
// before wgmma reads it; memory written by TMA needs only the mbarrier wait.
// Contract: corpus/contracts/wgmma.md.
#ifndef PTXRAG_SM90_WGMMA_CUH
#define PTXRAG_SM90_WGMMA_CUH

#include <cstdint>

namespace ptxrag {

// wgmma.fence.sync.aligned (9.7.15.7.1): required before the first mma_async and whenever registers used as
// accumulator (or A fragment) were touched by other instructions since the last mma_async.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// wgmma.commit_group.sync.aligned (9.7.15.7.2): batch all prior uncommitted mma_async into one wgmma-group.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// wgmma.wait_group.sync.aligned N (9.7.15.7.3): wait until at most N wgmma-groups are pending. Until then the
// accumulator registers of pending groups must not be read or written, and their smem operands not modified.
template <int N = 0>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keep the compiler from moving accesses to an accumulator register across wgmma boundaries (no instruction).
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
template <int R>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) wgmma_fence_operand(d[i]);
}

// ---- shared-memory matrix descriptors (9.7.15.5.1.2.2) -------------------------------------------------------
// Swizzle mode field, bits 62-63. Must match how the tile was written (TMA tensor-map swizzle, or manual layout):
// CU_TENSOR_MAP_SWIZZLE_128B <-> SmemSwizzle::B128, _64B <-> B64, _32B <-> B32, _NONE <-> None.
enum class SmemSwizzle : uint32_t { None = 0, B128 = 1, B64 = 2, B32 = 3 };

// Bytes of one swizzle row (the swizzle span): 128/64/32, and 16 (one core-matrix row) for None.
__host__ __device__ constexpr uint32_t smem_swizzle_bytes(SmemSwizzle s) {
  return s == SmemSwizzle::B128 ? 128u : s == SmemSwizzle::B64 ? 64u : s == SmemSwizzle::B32 ? 32u : 16u;
}

// Build a 64-bit matrix descriptor.
//   smem_addr  shared-window address of the tile start (16-byte aligned; 1024/512/256-aligned for the 128B/64B/32B
//              swizzles unless base_offset is set)
//   lbo_bytes  leading-dimension byte offset (9.7.15.5.1.2.1.1); ignored (give 16 or 0) for K-major swizzled tiles
//   sbo_bytes  stride-dimension byte offset (9.7.15.5.1.2.1.2); for K-major tiles the distance between groups of 8
//              rows: 8 * swizzle bytes, e.g. 1024 for a 128B-swizzled tile whose rows are 128 bytes
//   base_offset 3-bit pattern phase for tiles that do not start on the swizzle-pattern boundary (usually 0)
// Each field is encoded as (x & 0x3FFFF) >> 4, so all offsets must be multiples of 16 bytes.
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                                   SmemSwizzle swizzle, uint32_t base_offset = 0) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  d |= static_cast<uint64_t>(base_offset & 0x7u) << 49;
  d |= static_cast<uint64_t>(static_cast<uint32_t>(swizzle)) << 62;
  return d;
}

// Descriptor of a K-major tile written by TMA with swizzle `s` whose rows (along K) are exactly one swizzle span
// long (e.g. 64 bf16 = 128 bytes for B128): SBO = 8 rows * span, LBO unused.
__device__ __forceinline__ uint64_t make_smem_desc_kmajor(uint32_t smem_addr, SmemSwizzle s) {
  return make_smem_desc(smem_addr, 16u, 8u * smem_swizzle_bytes(s), s);
}

// Advance a descriptor's start address by `bytes` (multiple of 16), e.g. to step along K inside a swizzled tile:
// for K-major bf16 with B128, k-step kk (16 elements) starts 32*kk bytes further. The swizzle is a function of
// the address bits, so stepping inside the 128-byte row is valid as long as the tile base is 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}

// ---- accumulator fragment layout (9.7.15.5.1.1, figure for m64nNk16 D) ---------------------------------------
// Thread t (0..127 within the warpgroup) holds d[i], i in [0, N/2), at row wgmma_acc_row(t, i) and column
// wgmma_acc_col(t, i) of the 64 x N tile: warp w = t/32 owns rows 16w..16w+15; in each 8-column block
// j = i/4, lane l holds rows l/4 and l/4+8 (i%4 in {0,1} vs {2,3}) and columns 8j + 2(l%4) + (i%2).
__device__ __forceinline__ int wgmma_acc_row(int t, int i) { return (t / 32) * 16 + (t % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ __forceinline__ int wgmma_acc_col(int t, int i) { return (i / 4) * 8 + (t % 4) * 2 + (i % 2); }

}  // namespace ptxrag

#include "wgmma_bf16.cuh"
#include "wgmma_e4m3.cuh"
#include "wgmma_f16.cuh"

#endif  // PTXRAG_SM90_WGMMA_CUH
