// arch: sm_90a
// expect: 9.7.13.17
// what: cluster launch control (work stealing) on Hopper
#include <cstdint>
__global__ void k() {
  __shared__ __align__(16) uint64_t resp[2]; __shared__ __align__(8) uint64_t bar;
  unsigned r = (unsigned)__cvta_generic_to_shared(resp), b = (unsigned)__cvta_generic_to_shared(&bar);
  asm volatile("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%0], [%1];" :: "r"(r), "r"(b) : "memory");
}
