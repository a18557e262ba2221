// arch: sm_90a
// expect: 9.7.16.7.1
// what: tcgen05.alloc on Hopper
#include <cstdint>
__global__ void k() {
  __shared__ uint32_t slot; uint32_t a = (uint32_t)__cvta_generic_to_shared(&slot);
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(a));
}
