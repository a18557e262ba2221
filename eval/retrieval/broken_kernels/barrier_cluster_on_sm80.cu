// arch: sm_80
// expect: 9.7.13.3
// what: barrier.cluster needs sm_90
__global__ void k() { asm volatile("barrier.cluster.arrive; barrier.cluster.wait;" ::: "memory"); }
