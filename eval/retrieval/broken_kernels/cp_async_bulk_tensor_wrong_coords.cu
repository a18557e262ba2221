// arch: sm_90a
// expect: 9.7.9.27.1.2
// what: a 2d tensor copy given three coordinates
#include <cstdint>
__global__ void k(const __grid_constant__ uint64_t tmap) {
  __shared__ __align__(128) float tile[256];
  __shared__ __align__(8) uint64_t bar;
  uint32_t d = (uint32_t)__cvta_generic_to_shared(tile), b = (uint32_t)__cvta_generic_to_shared(&bar);
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %3, %3}], [%2];"
               :: "r"(d), "l"(&tmap), "r"(b), "r"(0) : "memory");
}
