// arch: sm_90a
// expect: 9.7.13.4
// what: fence.proxy.async with a state space it does not take (.local)
__global__ void k() { asm volatile("fence.proxy.async.local;" ::: "memory"); }
