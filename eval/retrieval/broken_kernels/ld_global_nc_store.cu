// arch: sm_80
// expect: 9.7.9.9
// what: the non-coherent read-only path used on a shared address
__global__ void k(float *o) {
  __shared__ float s[32]; unsigned a = (unsigned)__cvta_generic_to_shared(s); float r;
  asm volatile("ld.shared.nc.f32 %0, [%1];" : "=f"(r) : "r"(a)); o[0] = r;
}
