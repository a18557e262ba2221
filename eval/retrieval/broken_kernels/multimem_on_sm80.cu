// arch: sm_80
// expect: 9.7.9.14
// what: multimem.ld_reduce on sm_80
__global__ void k(float *o, float *mc) {
  float r; asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];" : "=f"(r) : "l"(mc)); o[0] = r;
}
