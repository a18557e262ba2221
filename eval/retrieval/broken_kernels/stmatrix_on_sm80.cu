// arch: sm_80
// expect: 9.7.14.5.16
// what: stmatrix needs sm_90
__global__ void k(unsigned v) {
  __shared__ __align__(16) unsigned short s[512]; unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" :: "r"(a), "r"(v));
}
