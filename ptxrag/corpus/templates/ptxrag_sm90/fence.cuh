// ptxrag_sm90/fence.cuh: proxy and ordering fences (PTX ISA 9.7.13.4, memory model 8.6 "Proxies").
//
// Ordinary loads/stores go through the generic proxy; TMA, bulk copies and wgmma's shared-memory operand
// reads go through the async proxy. Writes made by one proxy are not ordered with accesses by the other until a
// proxy fence: after threads write shared memory that a TMA store / bulk store / wgmma will read, every writing
// thread executes fence_proxy_async_shared_cta() and then the CTA synchronises, before the async operation is
// issued. Contract: corpus/contracts/async-proxy.md.
#ifndef PTXRAG_SM90_FENCE_CUH
#define PTXRAG_SM90_FENCE_CUH

namespace ptxrag {

// fence.proxy.async.shared::cta (9.7.13.4): order this thread's generic-proxy accesses to the CTA's shared
// memory with later async-proxy accesses (and the reverse).
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// fence.proxy.async.global (9.7.13.4): the same for global memory (e.g. data written with st.global that a
// later TMA load in the same kernel reads).
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// fence.proxy.async (9.7.13.4): all state spaces.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async;" ::: "memory"); }

// fence.mbarrier_init.release.cluster (9.7.13.4): make prior mbarrier.init operations of this thread visible
// at cluster scope (to other CTAs of the cluster and to the async proxy, e.g. TMA complete_tx) before they
// are used. Follow it with cluster_arrive_relaxed() + cluster_wait() (a full cluster_sync() publishes the init
// by itself); when only this CTA uses the barrier, __syncthreads() after the init is enough.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// fence.acq_rel at CTA / cluster / GPU scope (9.7.13.4): a plain release+acquire fence (generic proxy).
__device__ __forceinline__ void fence_acq_rel_cta() { asm volatile("fence.acq_rel.cta;" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel_cluster() { asm volatile("fence.acq_rel.cluster;" ::: "memory"); }
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

}  // namespace ptxrag

#endif  // PTXRAG_SM90_FENCE_CUH
