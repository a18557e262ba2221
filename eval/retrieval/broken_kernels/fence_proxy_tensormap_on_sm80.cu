// arch: sm_80
// expect: 9.7.13.4
// what: the tensormap proxy fence on sm_80
__global__ void k(void *t) { asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(t) : "memory"); }
