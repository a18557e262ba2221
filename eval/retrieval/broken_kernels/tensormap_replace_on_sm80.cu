// arch: sm_80
// expect: 9.7.9.28
// what: tensormap.replace on sm_80
__global__ void k(void *t) {
  asm volatile("tensormap.replace.tile.global_address.global.b1024.b64 [%0], %1;" :: "l"(t), "l"(t) : "memory");
}
