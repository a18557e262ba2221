// arch: sm_90a
// expect: 9.7.19.5
// what: setmaxnreg with 100 registers
__global__ void k() { asm volatile("setmaxnreg.dec.sync.aligned.u32 100;"); }
