// arch: sm_100a
// expect: 9.7.16.10.9.1
// what: tcgen05.mma with an unknown .kind
#include <cstdint>
__global__ void k(unsigned d, uint64_t a, uint64_t b, unsigned idesc) {
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %3, 0; tcgen05.mma.cta_group::1.kind::bf16 [%0], %1, %2, %3, p; }"
               :: "r"(d), "l"(a), "l"(b), "r"(idesc));
}
