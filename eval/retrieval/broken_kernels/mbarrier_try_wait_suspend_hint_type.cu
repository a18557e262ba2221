// arch: sm_90a
// expect: 9.7.13.15.16
// what: mbarrier.try_wait.parity with a 64-bit suspend-time hint
#include <cstdint>
__global__ void k(unsigned *o, unsigned long long hint) {
  __shared__ __align__(8) uint64_t bar; unsigned a = (unsigned)__cvta_generic_to_shared(&bar), ok;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(a), "r"(0), "l"(hint));
  o[0] = ok;
}
