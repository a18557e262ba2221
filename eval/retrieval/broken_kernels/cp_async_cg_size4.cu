// arch: sm_80
// expect: 9.7.9.25.3.1
// what: cp.async.cg (L2 only) with 4 bytes; .cg takes only 16
#include <cstdint>
__global__ void k(const float *g) {
  __shared__ __align__(16) float s[64];
  uint32_t d = (uint32_t)__cvta_generic_to_shared(s);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 4;" :: "r"(d), "l"(g) : "memory");
}
