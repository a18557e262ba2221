// arch: sm_80
// expect: 9.7.1.23
// what: dp4a with .f32 operand types
__global__ void k(float *o, float a, float b, float c) {
  float r; asm volatile("dp4a.f32.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c)); o[0] = r;
}
