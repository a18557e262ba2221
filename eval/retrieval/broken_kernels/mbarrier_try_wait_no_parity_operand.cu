// arch: sm_90a
// expect: 9.7.13.15.16
// what: mbarrier.try_wait.parity given a state operand kind it does not take (a 64-bit register where the parity is due)
#include <cstdint>
__global__ void k(uint64_t *out) {
  __shared__ __align__(8) uint64_t bar;
  uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar);
  uint64_t st = 0; uint32_t ok;
  asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
               : "=r"(ok) : "r"(a), "l"(st));
  out[0] = ok;
}
