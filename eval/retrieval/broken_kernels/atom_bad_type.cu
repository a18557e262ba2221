// arch: sm_80
// expect: 9.7.13.5
// what: atom.add on .s64 (no signed 64-bit add)
__global__ void k(long long *p, long long v) {
  long long r; asm volatile("atom.global.add.s64 %0, [%1], %2;" : "=l"(r) : "l"(p), "l"(v)); p[1] = r;
}
