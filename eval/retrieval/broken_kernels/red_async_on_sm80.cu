// arch: sm_80
// expect: 9.7.13.7
// what: red.async to a remote shared::cluster address on sm_80
#include <cstdint>
__global__ void k() {
  __shared__ __align__(8) uint64_t bar; __shared__ unsigned x;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar), a = (unsigned)__cvta_generic_to_shared(&x);
  asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];" :: "r"(a), "r"(1), "r"(b));
}
