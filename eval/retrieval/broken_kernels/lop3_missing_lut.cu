// arch: sm_80
// expect: 9.7.8.6
// what: lop3 with its truth table given as a register
__global__ void k(unsigned *o, unsigned a, unsigned b, unsigned c, unsigned l) {
  unsigned r; asm volatile("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(r) : "r"(a), "r"(b), "r"(c), "r"(l)); o[0] = r;
}
