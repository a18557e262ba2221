// ptxrag_sm90/cluster.cuh: thread-block clusters and distributed shared memory (PTX ISA 2.2.2, 9.7.13.3,
// 9.7.9.23, 9.7.9.12, special registers 10.12-10.17).
//
// Launch with a cluster shape (__cluster_dims__(x,y,z) on the kernel, or cudaLaunchKernelEx with
// cudaLaunchAttributeClusterDimension); the grid must be a multiple of the cluster shape. A CTA may touch another
// CTA's shared memory (DSMEM) only while that CTA is running: synchronise the cluster (cluster_sync()) after
// setting up shared memory and again before any CTA exits if others may still access its shared memory.
// Contract: corpus/contracts/clusters.md.
#ifndef PTXRAG_SM90_CLUSTER_CUH
#define PTXRAG_SM90_CLUSTER_CUH

#include <cstdint>

namespace ptxrag {

// %cluster_ctarank (10.16): this CTA's rank in its cluster, 0 .. cluster_num_ctas()-1.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// %cluster_nctarank (10.17): number of CTAs in the cluster.
__device__ __forceinline__ uint32_t cluster_num_ctas() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

// %cluster_ctaid.x/.y (10.14): this CTA's coordinates inside its cluster; %clusterid.x (10.12): cluster index.
__device__ __forceinline__ uint32_t cluster_ctaid_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_ctaid_y() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t cluster_id_x() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}

// mapa.shared::cluster.u32 (9.7.9.23): the shared::cluster address of the same variable in CTA `rank`.
// Pass a shared::cta address (smem_u32(&x)); the result is for ld/st/atom .shared::cluster and for remote
// mbarrier arrives, NOT for plain pointers.
__device__ __forceinline__ uint32_t mapa_shared(uint32_t smem_addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr), "r"(rank));
  return r;
}

// ld/st.shared::cluster (9.7.9.8, 9.7.9.11) through a mapa address (generic-proxy, weak accesses: order them
// with cluster_sync() or a release/acquire pair).
__device__ __forceinline__ uint32_t ld_shared_cluster_u32(uint32_t cluster_addr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory");
  return v;
}
__device__ __forceinline__ float ld_shared_cluster_f32(uint32_t cluster_addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(cluster_addr) : "memory");
  return v;
}
__device__ __forceinline__ void st_shared_cluster_u32(uint32_t cluster_addr, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(cluster_addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_cluster_f32(uint32_t cluster_addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(cluster_addr), "f"(v) : "memory");
}

// st.async.shared::cluster.mbarrier::complete_tx::bytes (9.7.9.12): store one value into a peer CTA's shared
// memory (`cluster_addr` from mapa_shared) and signal complete_tx(4 bytes) on the peer's mbarrier `remote_bar`
// (also a mapa address). The peer arms that barrier with expect_tx for all the bytes it will receive and waits
// on it; the store itself is weak, ordered for the receiver by that barrier.
__device__ __forceinline__ void st_async_f32(uint32_t cluster_addr, float v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(cluster_addr),
               "f"(v), "r"(remote_bar)
               : "memory");
}
__device__ __forceinline__ void st_async_u32(uint32_t cluster_addr, uint32_t v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];" ::"r"(cluster_addr),
               "r"(v), "r"(remote_bar)
               : "memory");
}

// barrier.cluster.arrive.release / barrier.cluster.wait.acquire (9.7.13.3). Every non-exited thread of the
// cluster must arrive exactly once per phase; .aligned: all threads of a warp execute the same instruction.
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
// Arrive without release semantics (cheaper; use for pure execution sync, e.g. "my smem is initialised" after a
// separate fence).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// Full cluster barrier: memory written before it by any thread of the cluster is visible after it.
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// Remote arrive on an mbarrier in another CTA of the cluster (9.7.13.15.13), release at cluster scope.
// `remote_bar` comes from mapa_shared(smem_u32(&bar), rank). Pair with mbarrier_wait_parity_cluster().
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}

}  // namespace ptxrag

#endif  // PTXRAG_SM90_CLUSTER_CUH
