// arch: sm_80
// expect: 9.7.14.5.14
// what: mma.sync with shape m16n16k16 (not an mma shape)
__global__ void k(float *o, unsigned a0, unsigned b0) {
  float d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n16k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(b0));
  o[0] = d0;
}
