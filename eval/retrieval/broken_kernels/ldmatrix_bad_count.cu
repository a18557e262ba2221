// arch: sm_80
// expect: 9.7.14.5.15
// what: ldmatrix .x3 (only x1, x2, x4)
#include <cstdint>
__global__ void k(unsigned *o) {
  __shared__ __align__(16) unsigned short s[512]; unsigned a = (unsigned)__cvta_generic_to_shared(s), r0, r1, r2;
  asm volatile("ldmatrix.sync.aligned.m8n8.x3.shared.b16 {%0,%1,%2}, [%3];" : "=r"(r0), "=r"(r1), "=r"(r2) : "r"(a));
  o[0] = r0 + r1 + r2;
}
