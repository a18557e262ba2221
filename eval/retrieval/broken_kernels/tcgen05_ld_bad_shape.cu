// arch: sm_100a
// expect: 9.7.16.8.3
// what: tcgen05.ld with a shape that does not exist (.32x64b)
__global__ void k(unsigned *o, unsigned taddr) {
  unsigned r; asm volatile("tcgen05.ld.sync.aligned.32x64b.x1.b32 {%0}, [%1];" : "=r"(r) : "r"(taddr)); o[0] = r;
}
