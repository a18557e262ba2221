// arch: sm_80
// expect: 9.7.15.7.1
// what: wgmma.fence compiled for sm_80
__global__ void k() { asm volatile("wgmma.fence.sync.aligned;"); }
