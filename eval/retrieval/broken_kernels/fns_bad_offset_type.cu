// arch: sm_80
// expect: 9.7.1.17
// what: fns (find n-th set bit) with a 64-bit mask
__global__ void k(unsigned *o, unsigned long long m) {
  unsigned r; asm volatile("fns.b32 %0, %1, 0, 1;" : "=r"(r) : "l"(m)); o[0] = r;
}
