// arch: sm_90a
// expect: 9.7.19.5
// what: setmaxnreg with 300 registers (range 24..256, multiple of 8)
__global__ void k() { asm volatile("setmaxnreg.inc.sync.aligned.u32 300;"); }
