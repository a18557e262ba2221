// arch: sm_75
// expect: 9.7.13.12
// what: redux.sync needs sm_80
__global__ void k(unsigned *o, unsigned v) {
  unsigned r; asm volatile("redux.sync.add.u32 %0, %1, 0xffffffff;" : "=r"(r) : "r"(v)); o[0] = r;
}
