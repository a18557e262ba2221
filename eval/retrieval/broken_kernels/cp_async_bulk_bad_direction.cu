// arch: sm_90a
// expect: 9.7.9.25.4.1
// what: bulk copy global to global (no such direction)
#include <cstdint>
__global__ void k(float *a, float *b) {
  asm volatile("cp.async.bulk.global.global.bulk_group [%0], [%1], 256;" :: "l"(a), "l"(b) : "memory");
}
