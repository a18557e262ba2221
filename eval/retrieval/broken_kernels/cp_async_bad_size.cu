// arch: sm_80
// expect: 9.7.9.25.3.1
// what: cp.async with a copy size of 12 bytes
#include <cstdint>
__global__ void k(const float *g) {
  __shared__ __align__(16) float s[64];
  uint32_t d = (uint32_t)__cvta_generic_to_shared(s);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 12;" :: "r"(d), "l"(g) : "memory");
}
