// arch: sm_90a
// expect: 9.7.9.12
// what: st.async with a .b16 element (only b32, b64, u32, s32, f32, f64 and vectors)
#include <cstdint>
__global__ void k(unsigned short v) {
  __shared__ __align__(8) uint64_t bar; __shared__ unsigned short x;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar), a = (unsigned)__cvta_generic_to_shared(&x);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b16 [%0], %1, [%2];" :: "r"(a), "h"(v), "r"(b));
}
