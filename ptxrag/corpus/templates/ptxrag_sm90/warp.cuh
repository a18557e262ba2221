// ptxrag_sm90/warp.cuh: warp-collective instructions: ldmatrix / stmatrix (PTX ISA 9.7.14.5.15-16),
// elect.sync (9.7.13.14), redux.sync (9.7.13.12). All are .sync.aligned or take a member mask: every thread
// named (the whole warp for ldmatrix/stmatrix) must execute the same instruction, with no thread exited.
#ifndef PTXRAG_SM90_WARP_CUH
#define PTXRAG_SM90_WARP_CUH

#include <cstdint>

namespace ptxrag {

// ---- ldmatrix: load 8x8 b16 matrices from shared memory into mma fragments -----------------------------------
// Lanes 0-7 give the row addresses of matrix 0, lanes 8-15 of matrix 1, 16-23 of matrix 2, 24-31 of matrix 3
// (only the lanes a .num uses matter). Each row is 16 contiguous bytes, 16-byte aligned. Afterwards lane l holds,
// in register k, the two b16 elements at row l/4, columns 2*(l%4) and 2*(l%4)+1 of matrix k (.trans: the
// transposed matrix).
__device__ __forceinline__ uint32_t ldmatrix_x1(uint32_t row_addr) {
  uint32_t r0;
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r0) : "r"(row_addr) : "memory");
  return r0;
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t row_addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(row_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t row_addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                            uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(row_addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t row_addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(row_addr)
               : "memory");
}

// ---- stmatrix: the inverse of ldmatrix (sm_90) ----------------------------------------------------------------
// Lane l supplies, in register k, the two b16 elements of row l/4, columns 2*(l%4)..+1 of matrix k; lanes 0-7 /
// 8-15 / 16-23 / 24-31 give the row addresses of matrices 0 / 1 / 2 / 3. Typical use: write wgmma accumulators
// (converted to bf16 pairs) to a shared tile before a TMA store.
__device__ __forceinline__ void stmatrix_x1(uint32_t row_addr, uint32_t r0) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(row_addr), "r"(r0) : "memory");
}
__device__ __forceinline__ void stmatrix_x2(uint32_t row_addr, uint32_t r0, uint32_t r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(row_addr), "r"(r0), "r"(r1)
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t row_addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                  uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// Pack two floats into one b16x2 register of bf16 values (low half = lo), as ldmatrix/stmatrix fragments hold.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// ---- elect.sync ----------------------------------------------------------------------------------------------
// True in exactly one lane of `mask`, a mask of this warp's lanes (deterministic leader, 9.7.13.14): one leader
// per warp, so a warpgroup that executes it gets four leaders. Every thread in `mask` must execute it (it waits
// for all of them); the caller must itself be in `mask`.
__device__ __forceinline__ bool elect_sync(uint32_t mask = 0xffffffffu) {
  uint32_t is_leader;
  asm volatile(
      "{\n\t.reg .pred p;\n\telect.sync _|p, %1;\n\tselp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(is_leader)
      : "r"(mask));
  return is_leader != 0;
}

// Lane id of the leader elect.sync picks for `mask` (the same in every thread).
__device__ __forceinline__ uint32_t elect_sync_lane(uint32_t mask = 0xffffffffu) {
  uint32_t lane;
  asm volatile("{\n\t.reg .pred p;\n\telect.sync %0|p, %1;\n\t}" : "=r"(lane) : "r"(mask));
  return lane;
}

// ---- redux.sync: warp reduction in one instruction (9.7.13.12) -------------------------------------------------
// Every thread in `mask` gets the reduction of `v` over the threads of `mask`. Integer types only on sm_90
// (.f32 min/max needs sm_100a).
__device__ __forceinline__ uint32_t redux_add_u32(uint32_t v, uint32_t mask = 0xffffffffu) {
  uint32_t r;
  asm volatile("redux.sync.add.u32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ int32_t redux_add_s32(int32_t v, uint32_t mask = 0xffffffffu) {
  int32_t r;
  asm volatile("redux.sync.add.s32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ int32_t redux_min_s32(int32_t v, uint32_t mask = 0xffffffffu) {
  int32_t r;
  asm volatile("redux.sync.min.s32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ int32_t redux_max_s32(int32_t v, uint32_t mask = 0xffffffffu) {
  int32_t r;
  asm volatile("redux.sync.max.s32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ uint32_t redux_min_u32(uint32_t v, uint32_t mask = 0xffffffffu) {
  uint32_t r;
  asm volatile("redux.sync.min.u32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ uint32_t redux_max_u32(uint32_t v, uint32_t mask = 0xffffffffu) {
  uint32_t r;
  asm volatile("redux.sync.max.u32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ uint32_t redux_and_b32(uint32_t v, uint32_t mask = 0xffffffffu) {
  uint32_t r;
  asm volatile("redux.sync.and.b32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ uint32_t redux_or_b32(uint32_t v, uint32_t mask = 0xffffffffu) {
  uint32_t r;
  asm volatile("redux.sync.or.b32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
__device__ __forceinline__ uint32_t redux_xor_b32(uint32_t v, uint32_t mask = 0xffffffffu) {
  uint32_t r;
  asm volatile("redux.sync.xor.b32 %0, %1, %2;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}

}  // namespace ptxrag

#endif  // PTXRAG_SM90_WARP_CUH
