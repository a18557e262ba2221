// arch: sm_90a
// expect: 9.7.15.5.2
// what: wgmma.mma_async m64n16k16 given four accumulator registers instead of eight
#include <cstdint>
__global__ void k(float *o, uint64_t da, uint64_t db) {
  float d0, d1, d2, d3;
  asm volatile("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;"
               : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3) : "l"(da), "l"(db));
  o[0] = d0 + d1 + d2 + d3;
}
