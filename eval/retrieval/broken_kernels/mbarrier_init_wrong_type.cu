// arch: sm_90a
// expect: 9.7.13.15.9
// what: mbarrier.init with a .b32 type instead of .b64
#include <cstdint>
__global__ void k() {
  __shared__ __align__(8) uint64_t bar;
  uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar);
  asm volatile("mbarrier.init.shared::cta.b32 [%0], %1;" :: "r"(a), "r"(32));
}
