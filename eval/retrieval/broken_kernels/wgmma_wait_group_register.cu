// arch: sm_90a
// expect: 9.7.15.7.3
// what: wgmma.wait_group given a register instead of an immediate
__global__ void k(int n) { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "r"(n)); }
