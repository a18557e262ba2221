// arch: sm_80
// expect: 9.7.9.7
// what: prmt with an unknown mode
__global__ void k(unsigned *o, unsigned a, unsigned b) {
  unsigned r; asm volatile("prmt.b32.xyz %0, %1, %2, 0;" : "=r"(r) : "r"(a), "r"(b)); o[0] = r;
}
