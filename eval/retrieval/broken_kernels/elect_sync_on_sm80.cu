// arch: sm_80
// expect: 9.7.13.14
// what: elect.sync needs sm_90
__global__ void k(unsigned *o) {
  unsigned r; asm volatile("{ .reg .pred p; elect.sync %0|p, 0xffffffff; }" : "=r"(r)); o[0] = r;
}
