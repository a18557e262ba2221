// arch: sm_80
// expect: 9.7.13.8
// what: the deprecated vote.ballot without .sync on sm_70+
__global__ void k(unsigned *o, int v) {
  unsigned r; asm volatile("{ .reg .pred p; setp.ne.s32 p, %1, 0; vote.ballot.b32 %0, p; }" : "=r"(r) : "r"(v)); o[0] = r;
}
