// arch: sm_80
// expect: 9.7.9.5
// what: the deprecated shfl without .sync on sm_70+
__global__ void k(unsigned *o, unsigned v) {
  unsigned r; asm volatile("shfl.bfly.b32 %0, %1, 1, 0x1f;" : "=r"(r) : "r"(v)); o[0] = r;
}
