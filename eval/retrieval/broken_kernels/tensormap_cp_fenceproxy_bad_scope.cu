// arch: sm_90a
// expect: 9.7.13.16
// what: tensormap.cp_fenceproxy with a size other than 128
__global__ void k(void *g) {
  __shared__ __align__(128) char s[128]; unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 64;" :: "l"(g), "r"(a) : "memory");
}
