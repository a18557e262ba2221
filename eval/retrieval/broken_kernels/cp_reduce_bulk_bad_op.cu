// arch: sm_90a
// expect: 9.7.9.25.4.2
// what: bulk reduction with .mul (not a reduction of cp.reduce.async.bulk)
__global__ void k(float *g) {
  __shared__ __align__(16) float s[64]; unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.mul.f32 [%0], [%1], 256;" :: "l"(g), "r"(a) : "memory");
}
