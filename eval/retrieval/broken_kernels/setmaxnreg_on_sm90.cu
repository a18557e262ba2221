// arch: sm_90
// expect: 9.7.19.5
// what: setmaxnreg compiled for sm_90 rather than sm_90a
__global__ void k() { asm volatile("setmaxnreg.inc.sync.aligned.u32 240;"); }
