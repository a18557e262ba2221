// arch: sm_90a
// expect: 9.7.13.12
// what: redux.sync min on .f32 (needs sm_100a)
__global__ void k(float *o, float v) {
  float r; asm volatile("redux.sync.min.f32 %0, %1, 0xffffffff;" : "=f"(r) : "f"(v)); o[0] = r;
}
