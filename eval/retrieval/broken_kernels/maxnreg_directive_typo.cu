// arch: sm_80
// expect: 11.4.1
// what: PTX-level register limit written as an instruction inside the body
__global__ void k() { asm volatile(".maxnreg 64;"); }
