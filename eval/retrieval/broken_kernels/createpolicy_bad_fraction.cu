// arch: sm_80
// expect: 9.7.9.18
// what: createpolicy with a fraction above 1
__global__ void k(unsigned long long *o) {
  unsigned long long p; asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 2.0;" : "=l"(p)); o[0] = p;
}
