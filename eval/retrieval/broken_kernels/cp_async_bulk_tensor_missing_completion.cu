// arch: sm_90a
// expect: 9.7.9.27.1.2
// what: global-to-shared tensor copy without the mbarrier completion mechanism
#include <cstdint>
__global__ void k(const __grid_constant__ uint64_t tmap) {
  __shared__ __align__(128) float tile[256];
  uint32_t d = (uint32_t)__cvta_generic_to_shared(tile);
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile [%0], [%1, {%2, %2}];"
               :: "r"(d), "l"(&tmap), "r"(0) : "memory");
}
