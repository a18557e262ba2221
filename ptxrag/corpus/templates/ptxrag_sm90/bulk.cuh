// ptxrag_sm90/bulk.cuh: 1-D bulk copies and reductions through the copy engine (PTX ISA 9.7.9.25.4) and the
// bulk async-group completion instructions (9.7.9.27.2).
//
// Rules (9.7.9.25.4.1): global and shared addresses 16-byte aligned, `bytes` a multiple of 16. Loads complete
// on an mbarrier (complete_tx): the producer announces the bytes with mbarrier_arrive_expect_tx first.
// Stores and reductions complete through bulk async-groups: bulk_commit_group() then bulk_wait_group<0>()
// (or bulk_wait_group_read<0>() before the shared source buffer is overwritten).
// Contract: corpus/contracts/async-proxy.md and corpus/contracts/mbarrier.md.
#ifndef PTXRAG_SM90_BULK_CUH
#define PTXRAG_SM90_BULK_CUH

#include <cstdint>

namespace ptxrag {

// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes (9.7.9.25.4.1): copy `bytes` from global
// `src` to shared `dst_smem`; completion signals complete_tx(bytes) on the mbarrier `bar` (same CTA).
__device__ __forceinline__ void bulk_load(uint32_t dst_smem, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst_smem),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// Multicast form (9.7.9.25.4.1): the same bytes land at the same shared offset `dst_smem` and signal the mbarrier
// at the same offset `bar` in every CTA of the cluster whose bit is set in `cta_mask` (bit i = %cluster_ctarank i).
__device__ __forceinline__ void bulk_load_multicast(uint32_t dst_smem, const void* src, uint32_t bytes, uint32_t bar,
                                                    uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::
          "r"(dst_smem),
      "l"(src), "r"(bytes), "r"(bar), "h"(cta_mask)
      : "memory");
}

// cp.async.bulk.shared::cluster.shared::cta (9.7.9.25.4.1): copy from this CTA's shared memory to (possibly
// another CTA's) shared memory in the cluster. `dst_cluster` and `remote_bar` are shared::cluster addresses
// (from mapa_shared()); completion signals complete_tx on the mbarrier in the destination CTA.
__device__ __forceinline__ void bulk_copy_to_cluster(uint32_t dst_cluster, uint32_t src_smem, uint32_t bytes,
                                                     uint32_t remote_bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          dst_cluster),
      "r"(src_smem), "r"(bytes), "r"(remote_bar)
      : "memory");
}

// cp.async.bulk.global.shared::cta.bulk_group (9.7.9.25.4.1): copy `bytes` from shared `src_smem` to global `dst`.
// Make the shared data visible to the async proxy first (fence_proxy_async_shared_cta() by the writers, then a
// CTA barrier); commit and wait with bulk_commit_group()/bulk_wait_group<0>().
__device__ __forceinline__ void bulk_store(void* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src_smem), "r"(bytes)
               : "memory");
}

// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 (9.7.9.25.4.2): dst[i] += src[i] element-wise,
// atomically per element, for `bytes`/4 floats. The f32 add flushes subnormal inputs and results to zero.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
               "r"(src_smem), "r"(bytes)
               : "memory");
}

// The same reduction for 32-bit integers: add.u32 / add.s32 / min.s32 / max.s32 (9.7.9.25.4.2).
__device__ __forceinline__ void bulk_reduce_add_u32(uint32_t* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], %2;" ::"l"(dst),
               "r"(src_smem), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_reduce_add_s32(int32_t* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.s32 [%0], [%1], %2;" ::"l"(dst),
               "r"(src_smem), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_reduce_min_s32(int32_t* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.min.s32 [%0], [%1], %2;" ::"l"(dst),
               "r"(src_smem), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_reduce_max_s32(int32_t* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.max.s32 [%0], [%1], %2;" ::"l"(dst),
               "r"(src_smem), "r"(bytes)
               : "memory");
}

// bf16 add without flushing subnormals (add.noftz.bf16; 9.7.9.25.4.2).
__device__ __forceinline__ void bulk_reduce_add_bf16(void* dst, uint32_t src_smem, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], [%1], %2;" ::"l"(dst),
               "r"(src_smem), "r"(bytes)
               : "memory");
}

// cp.async.bulk.prefetch.L2.global (9.7.9.25.4.3): hint to bring `bytes` at `src` into L2 (no completion).
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// cp.async.bulk.commit_group (9.7.9.27.2.1): close the current bulk async-group of this thread (bulk stores,
// bulk reductions and TMA stores/reductions issued since the last commit).
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// cp.async.bulk.wait_group N (9.7.9.27.2.2): wait until at most N of this thread's committed bulk async-groups
// are pending, i.e. their writes to global memory are complete (and visible to this thread).
template <int N = 0>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

// cp.async.bulk.wait_group.read N (9.7.9.27.2.2): wait only until the SOURCES of those groups have been read,
// so the shared buffer may be overwritten. It does NOT mean the global writes are done.
template <int N = 0>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

}  // namespace ptxrag

#endif  // PTXRAG_SM90_BULK_CUH
