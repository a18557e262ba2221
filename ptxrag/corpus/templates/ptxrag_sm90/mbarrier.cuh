// ptxrag_sm90/mbarrier.cuh: mbarrier objects in shared memory (PTX ISA 9.7.13.15).
//
// An mbarrier is a 64-bit, 8-byte aligned __shared__ word (9.7.13.15.1). Typical producer/consumer use:
//   __shared__ __align__(8) uint64_t bar;
//   if (threadIdx.x == 0) { ptxrag::mbarrier_init(ptxrag::smem_u32(&bar), 1); ptxrag::fence_mbarrier_init(); }
//   __syncthreads();                               // every thread must see the initialised barrier
//   if (threadIdx.x == 0) { ptxrag::mbarrier_arrive_expect_tx(b, bytes); /* issue TMA / bulk copies */ }
//   ptxrag::mbarrier_wait_parity(b, phase);        // phase starts at 0 and flips after each completion
// Contract: corpus/contracts/mbarrier.md.
#ifndef PTXRAG_SM90_MBARRIER_CUH
#define PTXRAG_SM90_MBARRIER_CUH

#include <cstdint>

namespace ptxrag {

// mbarrier.init (9.7.13.15.9): set the expected arrival count (1 .. 2^20 - 1) of the barrier at shared address
// `bar`; the current phase becomes 0 and the tx-count 0. Call from ONE thread, then make the init visible before
// anyone else uses it: __syncthreads() for this CTA; fence_mbarrier_init() plus a cluster barrier when other CTAs
// of the cluster signal it (remote arrives, multicast copies).
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t arrive_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrive_count) : "memory");
}

// mbarrier.inval (9.7.13.15.10): invalidate before the shared word is reused for anything else.
__device__ __forceinline__ void mbarrier_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// mbarrier.arrive (9.7.13.15.13), release at CTA scope: one arrival. Returns the opaque state token that
// mbarrier_try_wait() accepts (most code waits on the parity instead and ignores it).
__device__ __forceinline__ uint64_t mbarrier_arrive(uint32_t bar) {
  uint64_t state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(bar) : "memory");
  return state;
}

// mbarrier.arrive with a count (9.7.13.15.13): `count` arrivals at once from this thread.
__device__ __forceinline__ uint64_t mbarrier_arrive_count(uint32_t bar, uint32_t count) {
  uint64_t state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(bar), "r"(count) : "memory");
  return state;
}

// mbarrier.arrive.expect_tx (9.7.13.15.13 with 9.7.13.15.5.1): raise the tx-count by `bytes`, then arrive once.
// Call it (from the one producer thread) for the current phase BEFORE or together with issuing the async
// copies that complete_tx on this barrier; `bytes` must equal the total bytes those copies deliver, or the
// phase never completes (hang) or completes early (stale data).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// mbarrier.expect_tx (9.7.13.15.11): raise the tx-count without arriving (when the arrival happens elsewhere).
__device__ __forceinline__ void mbarrier_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

// mbarrier.try_wait.parity (9.7.13.15.16), acquire at CTA scope, one probe: true once the phase with parity
// `parity` (0 or 1) has completed. The thread may be suspended for a system-dependent time inside the probe.
__device__ __forceinline__ bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Block until the phase with parity `parity` completes (try_wait.parity in a retry loop). The loop lives in
// PTX so the compiler cannot hoist or drop it. Waiting on a parity whose phase is neither the current nor the
// immediately preceding one is invalid (9.7.13.15.16): track the phase bit and flip it after every wait.
__device__ __forceinline__ void mbarrier_wait_parity(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "PTXRAG_WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra PTXRAG_WAIT_%=;\n\t}" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// As mbarrier_wait_parity, with acquire at CLUSTER scope: use when threads of other CTAs in the cluster arrive
// on this barrier (remote arrive, multicast TMA) and their prior writes must be visible here.
__device__ __forceinline__ void mbarrier_wait_parity_cluster(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred p;\n"
      "PTXRAG_WAITC_%=:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n\t"
      "@!p bra PTXRAG_WAITC_%=;\n\t}" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// mbarrier.try_wait with a state token from mbarrier_arrive (9.7.13.15.16), one probe.
__device__ __forceinline__ bool mbarrier_try_wait(uint32_t bar, uint64_t state) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(bar), "l"(state)
      : "memory");
  return done != 0;
}

// Phase tracking for a ring of `Stages` barriers (one per pipeline slot). After waiting on slot `index` with
// parity `phase`, call advance(): the index moves on and the phase bit flips each time the ring wraps.
// Consumers wait on full[index] with `phase`; a producer waits on empty[index] with `phase ^ 1u` (a fresh
// barrier passes parity 1 at once, so the first lap does not wait for releases that cannot come).
template <int Stages>
struct PipelineState {
  uint32_t index = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++index == Stages) {
      index = 0;
      phase ^= 1u;
    }
  }
};

}  // namespace ptxrag

#endif  // PTXRAG_SM90_MBARRIER_CUH
