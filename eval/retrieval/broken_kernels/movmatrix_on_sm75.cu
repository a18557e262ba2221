// arch: sm_75
// expect: 9.7.14.5.17
// what: movmatrix needs sm_75? (it needs sm_75: try a .x2 form that does not exist)
__global__ void k(unsigned *o, unsigned v) {
  unsigned r; asm volatile("movmatrix.sync.aligned.m8n8.trans.b32 %0, %1;" : "=r"(r) : "r"(v)); o[0] = r;
}
