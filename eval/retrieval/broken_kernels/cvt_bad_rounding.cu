// arch: sm_90a
// expect: 9.7.9.21
// what: cvt f32 to bf16 without a rounding modifier
__global__ void k(unsigned short *o, float v) {
  unsigned short r; asm volatile("cvt.bf16.f32 %0, %1;" : "=h"(r) : "f"(v)); o[0] = r;
}
