// arch: sm_80
// expect: 9.7.9.23
// what: mapa (map a shared address to another CTA of the cluster) needs sm_90
#include <cstdint>
__global__ void k(unsigned *o) {
  __shared__ unsigned s; unsigned a = (unsigned)__cvta_generic_to_shared(&s), r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(1)); o[0] = r;
}
