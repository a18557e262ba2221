// arch: sm_80
// expect: 9.7.13.15.13
// what: mbarrier.arrive.expect_tx needs sm_90
#include <cstdint>
__global__ void k() {
  __shared__ __align__(8) uint64_t bar;
  uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(a), "r"(128));
}
