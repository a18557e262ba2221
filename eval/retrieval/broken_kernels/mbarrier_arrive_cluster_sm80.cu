// arch: sm_80
// expect: 9.7.13.15.13
// what: a remote arrive on a barrier of another CTA in the cluster, on sm_80
#include <cstdint>
__global__ void k() {
  __shared__ __align__(8) uint64_t bar; unsigned a = (unsigned)__cvta_generic_to_shared(&bar);
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(a));
}
