// arch: sm_80
// expect: 9.7.13.2
// what: bar.warp.sync with a 64-bit membermask
__global__ void k(unsigned long long m) { asm volatile("bar.warp.sync %0;" :: "l"(m)); }
