// arch: sm_90a
// expect: 9.7.13.4
// what: fence.acq_rel with a .gpu scope typo (.device)
__global__ void k() { asm volatile("fence.acq_rel.device;" ::: "memory"); }
