// arch: sm_90a
// expect: 9.7.13.4
// what: fence.mbarrier_init with .cta scope (only .release.cluster exists)
__global__ void k() { asm volatile("fence.mbarrier_init.release.cta;" ::: "memory"); }
