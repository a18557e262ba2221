// arch: sm_100a
// expect: 9.7.16.12.1
// what: tcgen05.commit without the mbarrier::arrive::one qualifier
#include <cstdint>
__global__ void k() {
  __shared__ __align__(8) uint64_t bar; uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar);
  asm volatile("tcgen05.commit.cta_group::1.shared::cluster.b64 [%0];" :: "r"(b));
}
